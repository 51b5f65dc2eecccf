"""The lease explorer (:mod:`asap_ros.testing.lease_explorer`) at the shipped settings: a fixed
budget of seeded fault schedules breaks no invariant; every schedule it found on the tree before
the fixes (commit 38ab394, ``benchmarks/lease_explorer.py --schedules 3000``), shrunk as it
printed them, now holds; and the judge and the shrinker can fail."""

from __future__ import annotations

import pytest

from asap_ros.testing.lease_explorer import explore, violations
from asap_ros.testing.lease_invariants import check
from asap_ros.testing.lease_world import SHIPPED, EStopTaken, Outcome, Write, run
from asap_ros.testing.schedules import Fault, Schedule, draw, shrink

MS = 1_000_000
BUDGET = 2_000
"""Schedules in the fast tier (about 30 s here); ``benchmarks/lease_explorer.py`` runs more."""

FOUND_BEFORE_THE_FIXES = {
    # schedule 107: I2 kp > 0 after the combo's e-stop at 1990 ms, no reset accepted since; I4 the
    # deploy node accepted Reset at 2661 ms while it was held (the primary restarted meanwhile)
    "N1 a held e-stop released on a hand-over": Schedule(seed=106, supervisors=2, faults=(
        Fault(kind="combo", at_ns=1990 * MS, duration_ns=531726),
        Fault(kind="restart", at_ns=2100 * MS, duration_ns=39448515, who="supervisor0"),
        Fault(kind="deploy reset", at_ns=2660 * MS, who="supervisor0"),
        Fault(kind="stand", at_ns=2730 * MS))),
    # schedule 476: I1 deploy and supervisor1 wrote within 20 ms at 860 ms
    "N2 a deaf secondary writes beside the deploy node": Schedule(seed=475, supervisors=2, faults=(
        Fault(kind="deaf", at_ns=660 * MS, duration_ns=300 * MS, who="supervisor1", topic="all"),)),
    # schedule 131: I3 no command for 100 ms at 1701 ms, nobody stopped
    "N3 a dead supervisor and overrunning steps leave no writer": Schedule(seed=130, supervisors=1, faults=(
        Fault(kind="overrun", at_ns=1130 * MS, duration_ns=520 * MS, share=0.5325745529588395, length_ns=875149),
        Fault(kind="restart", at_ns=1620 * MS, duration_ns=639124, who="supervisor0"))),
    # schedule 435: I3 kp > 0 after 121 ms without a command, I5 kp > 0 a second after the primary died
    "N3 a dead primary and overruns: stiff again under the secondary": Schedule(seed=434, supervisors=2, faults=(
        Fault(kind="start", at_ns=440 * MS),
        Fault(kind="overrun", at_ns=770 * MS, duration_ns=110858801, share=0.06428709911420741, length_ns=572402),
        Fault(kind="kill", at_ns=804 * MS, who="supervisor0"),
        Fault(kind="stand", at_ns=870 * MS))),
    # schedule 263: I1 deploy and supervisor0 wrote within 20 ms at 970 ms
    "N4 a deaf supervisor writes beside the deploy node": Schedule(seed=262, supervisors=1, faults=(
        Fault(kind="deaf", at_ns=770 * MS, duration_ns=360 * MS, who="supervisor0", topic="all"),)),
    # schedule 102: I4 Reset accepted at 1445 ms while the topic's e-stop was held, I2 kp > 0 at 1581 ms
    "N5 an e-stop the supervisor with authority never held": Schedule(seed=101, supervisors=2, faults=(
        Fault(kind="estop", at_ns=340 * MS, who="supervisor0", topic="topic"),
        Fault(kind="reset", at_ns=1440 * MS, who="supervisor1"),
        Fault(kind="stand", at_ns=1570 * MS))),
    # schedule 9: I3 kp > 0 after 109 ms without a command
    "N6 stiff again after a command gap past the robot's timeout": Schedule(seed=8, supervisors=1, faults=(
        Fault(kind="stand", at_ns=270 * MS),
        Fault(kind="stop", at_ns=710 * MS, duration_ns=100 * MS))),
    # schedule 1: I6 the deploy node obeyed a forged grant at 1060 ms
    "S1 one forged grant is obeyed": Schedule(seed=0, supervisors=1, faults=(
        Fault(kind="attack", at_ns=1040 * MS, duration_ns=552396),)),
    # schedule 844: I4 Reset accepted at 1645 ms while the service's e-stop was held
    "S1 a forged grant releases a held e-stop": Schedule(seed=843, supervisors=2, faults=(
        Fault(kind="loss", at_ns=1140 * MS, duration_ns=160 * MS, topic="lowcmd", share=0.3555979316028709),
        Fault(kind="attack", at_ns=1498 * MS, duration_ns=270 * MS),
        Fault(kind="estop", at_ns=1530 * MS, who="supervisor1", topic="service"),
        Fault(kind="reset", at_ns=1640 * MS, who="supervisor1"))),
    # schedule 184: I5 kp > 0 a second after the supervisor restarted, the attacker obeyed
    "S1 forged grants keep a robot stiff through a supervisor restart": Schedule(seed=183, supervisors=1, faults=(
        Fault(kind="attack", at_ns=280 * MS, duration_ns=240 * MS),
        Fault(kind="stand", at_ns=290 * MS),
        Fault(kind="restart", at_ns=500 * MS, duration_ns=651828, who="supervisor0"))),
}


@pytest.mark.once  # the pure cores on a virtual clock: the same on every distribution and interpreter
def test_a_fixed_budget_of_schedules_breaks_no_invariant() -> None:
    report = explore(range(BUDGET))
    print(f"\n{report.schedules} schedules in {report.seconds:.1f} s ({report.rate:.0f}/s), {report.failing} failing")
    assert not report.findings, "\n".join(f"{f.violation} (seed {f.seed})\n  {f.replay()}" for f in report.findings.values())


@pytest.mark.parametrize("name", sorted(FOUND_BEFORE_THE_FIXES))
def test_a_schedule_found_before_the_fixes_holds(name: str) -> None:
    assert violations(FOUND_BEFORE_THE_FIXES[name]) == []


def test_a_schedule_replays_event_for_event() -> None:
    schedule = draw(7)
    assert run(schedule).writes == run(schedule).writes
    assert eval(repr(schedule), {"Schedule": Schedule, "Fault": Fault}) == schedule


def _outcome(writes: list[Write], **fields: object) -> Outcome:
    out = Outcome(Schedule(1, 1, ()), SHIPPED, writes=writes, end_ns=writes[-1].stamp_ns + 1)
    out.started.update({"deploy": 0, "supervisor0": 0})
    for key, value in fields.items():
        setattr(out, key, value)
    return out


def test_the_judge_names_each_broken_invariant() -> None:
    stream = [Write(i * 20 * MS, "deploy", False) for i in range(10)]
    assert [v.invariant for v in check(_outcome(stream))] == []
    two = [*stream, Write(185 * MS, "supervisor0", True)]
    assert [v.invariant for v in check(_outcome(sorted(two, key=lambda w: w.stamp_ns)))] == ["I1"]
    estop = _outcome(stream, estops=[EStopTaken(40 * MS, "topic", "supervisor0")])
    assert {v.invariant for v in check(estop)} == {"I2"}
    gap = [*stream, Write(310 * MS, "deploy", True)]
    assert [v.invariant for v in check(_outcome(gap))] == ["I3"]
    stiff_after_gap = [*stream, Write(310 * MS, "deploy", False)]
    assert "kp > 0" in str(check(_outcome(stiff_after_gap))[0])


def test_shrinking_keeps_a_failure_and_drops_what_it_does_not_need() -> None:
    wanted = Fault(kind="kill", at_ns=700 * MS, who="supervisor0")
    schedule = Schedule(3, 2, (Fault(kind="stand", at_ns=300 * MS), wanted, Fault(kind="delay", at_ns=900 * MS,
                                                                                  duration_ns=50 * MS, length_ns=MS)))
    shrunk = shrink(schedule, lambda s: any(f.kind == "kill" for f in s.faults))
    assert shrunk.faults == (wanted,) and shrunk.supervisors == 1
