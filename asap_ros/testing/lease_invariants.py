"""The e-stop promise as invariants over what the robot received (:class:`~asap_ros.testing.lease_world.Outcome`).

- **I1** at most one writer of rt/lowcmd in any 20 ms.
- **I2** after an e-stop taken by any node, no kp > 0 command later than the e-stop window
  (``estop_obey_ns``) until the deploy node accepted a Reset while no e-stop was held.
- **I3** never unattended: no gap between commands longer than the robot's command timeout,
  except while the process writing before the gap was stopped or dead, and then no longer than
  that plus the documented takeover bound; and the first command after any gap longer than the
  command timeout is damping (the motors went limp: no stiff command on an old observation).
- **I4** while an e-stop is held (the combo pressed, or an e-stop taken at a supervisor and not
  released by a supervisor reset since), the deploy node accepts no Reset, Stand or Start.
- **I5** every schedule ends in damping: once the last fault is a second past, an e-stop or a
  death not reset leaves damping commands, from one writer, no further apart than the timeout.
- **I6** the deploy node never obeys a grant the attacker forged while every supervisor runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from asap_ros.testing.lease_world import Outcome, Write

__all__ = ["TAKEOVER_BOUND_NS", "Violation", "check"]

MS = 1_000_000
WINDOW_NS = 20 * MS
TAKEOVER_BOUND_NS = 300 * MS
"""After the writer stops or dies, the next writer's first command comes within this: the
supervisor's takeover (200 ms of silence) + its step (10 ms) + the wait after its first TAKEOVER
grant (60 ms, TAKEOVER_SILENCE_NS) + two more write periods; the deploy node's own damping after
a silent supervisor comes sooner (lease + two control periods after the newest grant, 190 ms)."""
SETTLE_NS = 1_000 * MS


@dataclass(frozen=True)
class Violation:
    invariant: str
    at_ns: int
    text: str

    def __str__(self) -> str:
        return f"{self.invariant} at {self.at_ns / 1e6:.1f} ms: {self.text}"


def _inside(intervals: list[tuple[int, int]], t: int) -> bool:
    return any(start <= t < end for start, end in intervals)


def _overlap(intervals: list[tuple[int, int]], a: int, b: int) -> int:
    return sum(max(0, min(end, b) - max(start, a)) for start, end in intervals)


def _one_writer(writes: list[Write]) -> Violation | None:
    start = 0
    for end, write in enumerate(writes):
        while write.stamp_ns - writes[start].stamp_ns >= WINDOW_NS:
            start += 1
        writers = {w.writer for w in writes[start:end + 1]}
        if len(writers) > 1:
            return Violation("I1", write.stamp_ns, f"{sorted(writers)} wrote within 20 ms")
    return None


def _held(out: Outcome, t: int) -> bool:
    """An e-stop is held at ``t``: the combo is pressed (seen from one supervisor step after the
    press: the nodes read it in the robot's state), or a supervisor took one and no supervisor
    reset was accepted since."""
    seen = out.timing.write_period_ns
    if any(start + seen <= t < end for start, end in out.combo) and _reader(out, t):
        return True
    taken = [e.stamp_ns for e in out.estops if e.by != "deploy" and e.stamp_ns <= t]
    if not taken:
        return False
    released = [a.stamp_ns for a in out.accepted if a.what == "supervisor reset" and a.stamp_ns <= t]
    return not released or max(released) < max(taken)


def check(out: Outcome) -> list[Violation]:
    """Every invariant broken in ``out`` (at most one violation each, the first)."""
    found: list[Violation] = []
    writes = sorted(out.writes, key=lambda w: w.stamp_ns)
    one = _one_writer(writes)
    if one is not None:
        found.append(one)
    obey = out.timing.estop_obey_ns
    deploy_resets = [a.stamp_ns for a in out.accepted if a.by == "deploy" and a.what == "reset"]
    for estop in out.estops:
        released = min((r for r in deploy_resets if r > estop.stamp_ns and not _held(out, r)), default=out.end_ns)
        stiff = next((w for w in writes if estop.stamp_ns + obey <= w.stamp_ns < released and not w.damping), None)
        if stiff is not None:
            found.append(Violation("I2", stiff.stamp_ns, f"kp > 0 from {stiff.writer} after the e-stop from "
                                   f"{estop.source} at {estop.stamp_ns / 1e6:.1f} ms, no reset accepted since"))
            break
    gap = _unattended(out, writes)
    if gap is not None:
        found.append(gap)
    for accepted in out.accepted:
        if accepted.by == "deploy" and _held(out, accepted.stamp_ns):
            found.append(Violation("I4", accepted.stamp_ns, f"the deploy node accepted {accepted.what} while an "
                                   "e-stop is held"))
            break
    settled = _settled(out, writes)
    if settled is not None:
        found.append(settled)
    forged = [t for t in out.forged_bound if _supervised(out, t)]
    if forged:
        found.append(Violation("I6", forged[0], "the deploy node obeyed a grant the attacker forged while a "
                               "supervisor ran"))
    return found


def _reader(out: Outcome, t: int) -> bool:
    """Some supervisor is alive at ``t`` to read the remote (the deploy node does not read it)."""
    return any(n != "deploy" and out.started[n] <= t < out.killed.get(n, out.end_ns) for n in out.started)


def _supervised(out: Outcome, t: int) -> bool:
    """Every supervisor alive at ``t`` ran through the lease before it, and none died or started in
    it or in the listening time before it (else the supervisor obeyed may be silent, and an
    attacker can stand in for a new one: docs/operating.md)."""
    since = t - out.timing.lease_ns
    names = [n for n in out.started if n != "deploy"]
    listen = out.timing.lease_ns + 2 * out.timing.write_period_ns
    if any(since - listen <= out.killed.get(n, -1) <= t or 0 < since - listen <= out.started[n] <= t for n in names):
        return False
    alive = [n for n in names if out.started[n] <= t < out.killed.get(n, out.end_ns)]
    return bool(alive) and all(out.started[n] <= since and _overlap(out.stopped.get(n, []), since, t) == 0
                               for n in alive)


def _unattended(out: Outcome, writes: list[Write]) -> Violation | None:
    timeout = out.timing.command_timeout_ns
    stamps = [*writes, Write(out.end_ns, "", True)]
    for before, after in zip(stamps, stamps[1:]):
        gap = after.stamp_ns - before.stamp_ns
        if gap <= timeout:
            continue
        if after.writer and not after.damping:
            return Violation("I3", after.stamp_ns, f"kp > 0 from {after.writer} after {gap / 1e6:.0f} ms without a "
                             f"command (the robot's timeout is {timeout / 1e6:g} ms)")
        if all(p in out.killed and out.killed[p] <= before.stamp_ns for p in ("deploy",)) and not any(
                name != "deploy" and out.killed.get(name, out.end_ns) > before.stamp_ns for name in out.started):
            continue  # nothing left alive that could write
        writer = before.writer
        stopped = _overlap(out.stopped.get(writer, []), before.stamp_ns, after.stamp_ns)
        killed = out.killed.get(writer)
        if killed is not None and killed < after.stamp_ns:
            stopped += after.stamp_ns - max(killed, before.stamp_ns)
        allowed = stopped + TAKEOVER_BOUND_NS if stopped else timeout
        if gap > allowed:
            return Violation("I3", before.stamp_ns, f"no command for {gap / 1e6:.0f} ms after {writer}'s "
                             f"(stopped or dead {stopped / 1e6:.0f} ms of it)")
    return None


def _settled(out: Outcome, writes: list[Write]) -> Violation | None:
    faults = out.schedule.faults
    if not faults:
        return None
    last = max(f.at_ns + f.duration_ns for f in faults)
    if last + SETTLE_NS + 2 * out.timing.command_timeout_ns > out.end_ns:
        return None
    resets = [a.stamp_ns for a in out.accepted if a.what == "reset"]
    harm = [e.stamp_ns for e in out.estops] + out.harmful_kills
    if not harm or (resets and max(resets) > max(harm)):
        return None
    if "deploy" in out.killed and all(out.killed.get(n, out.end_ns) < out.end_ns or out.started[n] > out.killed["deploy"]
                                      for n in out.started if n != "deploy"):
        return None  # no supervisor alive that heard the deploy node before it died
    tail = [w for w in writes if w.stamp_ns >= last + SETTLE_NS]
    if not tail:
        return Violation("I5", last + SETTLE_NS, "no command at all a second after the last fault")
    if any(not w.damping for w in tail):
        return Violation("I5", last + SETTLE_NS, "kp > 0 a second after the last fault, with an e-stop or death unreset")
    if len({w.writer for w in tail}) > 1:
        return Violation("I5", last + SETTLE_NS, f"{sorted({w.writer for w in tail})} write after the last fault")
    return None
