"""Fault schedules for the lease explorer: what goes wrong, when, drawn from a seed and shrunk.

A :class:`Schedule` is plain data: its ``repr`` is a Python expression that rebuilds it, so a
failing schedule printed by the explorer is pasted into a regression test as it is. The seed
also drives the bus's delays and the steps' durations (:mod:`asap_ros.testing.lease_world`), so
the same schedule replays the same run, event for event.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["KINDS", "Fault", "Schedule", "draw", "shrink"]

MS = 1_000_000
KINDS = ("kill", "stop", "deaf", "loss", "delay", "overrun", "combo", "estop", "reset", "deploy reset",
         "supervisor reset", "stand", "start", "restart", "attack")
"""What a fault may be: a process killed or stopped (SIGSTOP for ``duration_ns``), a receive path
held up (``deaf``: ``who`` hears nothing on ``topic`` for ``duration_ns``, then all of it at
once), best-effort samples lost (``share`` of them) or every message delayed (up to
``length_ns`` more), control steps overrunning (``share`` of the steps, each up to ``length_ns``
past its period), the remote's e-stop combo held for ``duration_ns``, an e-stop from ``topic``
(``deploy``, ``topic``, ``service`` or ``terminal`` at ``who``), the operator's ``ctl reset`` (the
supervisor ``who``, then the deploy node), one node's reset, Stand or Start, a supervisor killed
and started anew ``duration_ns`` later, and an attacker forging grants and beats."""
TOPICS = ("grant", "beat", "lowcmd", "estop", "lowstate", "service", "all")


@dataclass(frozen=True)
class Fault:
    kind: str
    at_ns: int
    duration_ns: int = 0
    who: str = "deploy"
    topic: str = ""
    share: float = 0.0
    length_ns: int = 0


@dataclass(frozen=True)
class Schedule:
    seed: int
    supervisors: int
    faults: tuple[Fault, ...]
    second_start_ns: int = 0
    """When the second supervisor starts (the first starts with the deploy node, at 0)."""
    end_ns: int = 3_000 * MS

    def kinds(self) -> list[str]:
        return sorted({f.kind for f in self.faults})


def _log_uniform(rng: random.Random, low_ns: int, high_ns: int) -> int:
    return int(math.exp(rng.uniform(math.log(low_ns), math.log(high_ns))))


def draw(seed: int) -> Schedule:
    """A schedule from ``seed``: one or two supervisors, the operator standing the robot up and
    starting a motion, then one to five faults, each kind as likely, with the operator's resets
    and stands drawn after e-stops."""
    rng = random.Random(seed)
    supervisors = 1 if rng.random() < 0.35 else 2
    second = 0 if rng.random() < 0.6 else rng.randint(0, 1_000) * MS
    sups = [f"supervisor{i}" for i in range(supervisors)]
    stand = rng.randint(250, 350) * MS
    faults = [Fault("stand", stand), Fault("start", stand + rng.randint(80, 200) * MS)]
    end = 3_000 * MS
    for _ in range(rng.randint(1, 5)):
        kind = rng.choice(KINDS)
        at = rng.randint(150, 2_200) * MS
        who = rng.choice(["deploy", *sups]) if kind in ("kill", "stop", "deaf") else rng.choice(sups)
        if kind in ("kill", "stop") and rng.random() < 0.5:
            who = rng.choice(sups)
        if kind == "kill":
            faults.append(Fault(kind, at, who=who))
        elif kind == "stop":
            faults.append(Fault(kind, at, _log_uniform(rng, 5 * MS, 2_000 * MS), who))
        elif kind == "deaf":
            faults.append(Fault(kind, at, _log_uniform(rng, 5 * MS, 1_500 * MS), who, rng.choice(TOPICS)))
        elif kind == "loss":
            faults.append(Fault(kind, at, _log_uniform(rng, 20 * MS, 1_500 * MS), topic=rng.choice(("beat", "lowcmd", "all")),
                                share=rng.uniform(0.05, 0.5)))
        elif kind == "delay":
            faults.append(Fault(kind, at, _log_uniform(rng, 20 * MS, 1_500 * MS), length_ns=_log_uniform(rng, MS, 60 * MS)))
        elif kind == "overrun":
            longest = _log_uniform(rng, MS, 40 * MS) if rng.random() < 0.85 else _log_uniform(rng, 40 * MS, 250 * MS)
            faults.append(Fault(kind, at, _log_uniform(rng, 100 * MS, 2_500 * MS), share=rng.uniform(0.02, 0.6),
                                length_ns=longest))
        elif kind == "combo":
            faults.append(Fault(kind, at, _log_uniform(rng, 30 * MS, 2_000 * MS)))
            _operator_after(rng, faults, at, sups)
        elif kind == "estop":
            faults.append(Fault(kind, at, who=who, topic=rng.choice(("deploy", "topic", "service", "terminal"))))
            _operator_after(rng, faults, at, sups)
        elif kind in ("reset", "deploy reset", "supervisor reset", "stand", "start"):
            faults.append(Fault(kind, at, who=who))
        elif kind == "restart":
            faults.append(Fault(kind, at, _log_uniform(rng, 5 * MS, 800 * MS), who))
        elif kind == "attack":
            faults.append(Fault(kind, at, _log_uniform(rng, 50 * MS, 2_000 * MS)))
    faults.sort(key=lambda f: f.at_ns)
    return Schedule(seed, supervisors, tuple(faults), second, end)


def _operator_after(rng: random.Random, faults: list[Fault], at_ns: int, sups: list[str]) -> None:
    """After an e-stop, an operator who (half the time) resets and stands the robot up again."""
    if rng.random() < 0.5:
        return
    when = at_ns + rng.randint(100, 1_200) * MS
    faults.append(Fault(rng.choice(("reset", "deploy reset")), when, who=rng.choice(sups)))
    faults.append(Fault("stand", when + rng.randint(20, 200) * MS))


def _simpler(schedule: Schedule) -> Iterator[Schedule]:
    """Schedules one step simpler than ``schedule``: a fault left out, one supervisor fewer, a
    duration or share halved, a time rounded to 10 ms."""
    faults = schedule.faults
    for i in range(len(faults)):
        yield dataclasses.replace(schedule, faults=faults[:i] + faults[i + 1:])
    if schedule.supervisors == 2 and not any("supervisor1" in f.who for f in faults):
        yield dataclasses.replace(schedule, supervisors=1, second_start_ns=0)
    if schedule.second_start_ns:
        yield dataclasses.replace(schedule, second_start_ns=0)
    for i, fault in enumerate(faults):
        variants = []
        if fault.duration_ns > MS:
            variants.append(dataclasses.replace(fault, duration_ns=fault.duration_ns // 2))
        if fault.length_ns > MS:
            variants.append(dataclasses.replace(fault, length_ns=fault.length_ns // 2))
        if fault.at_ns % (10 * MS):
            variants.append(dataclasses.replace(fault, at_ns=fault.at_ns // (10 * MS) * (10 * MS)))
        if fault.duration_ns % (10 * MS) and fault.duration_ns > 10 * MS:
            variants.append(dataclasses.replace(fault, duration_ns=fault.duration_ns // (10 * MS) * (10 * MS)))
        for variant in variants:
            yield dataclasses.replace(schedule, faults=faults[:i] + (variant,) + faults[i + 1:])


def shrink(schedule: Schedule, fails: Callable[[Schedule], bool], budget: int = 400) -> Schedule:
    """The simplest schedule reached from ``schedule`` one step at a time while ``fails`` holds
    (greedy, at most ``budget`` runs)."""
    runs = 0
    improved = True
    while improved and runs < budget:
        improved = False
        for candidate in _simpler(schedule):
            runs += 1
            if fails(candidate):
                schedule, improved = candidate, True
                break
            if runs >= budget:
                break
    return schedule
