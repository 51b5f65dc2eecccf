"""The lease explorer: draw fault schedules from seeds, play each, check the invariants, shrink
what fails to a minimal schedule that replays.

Used by ``tests/core/test_lease_explorer.py`` (a fixed budget in the fast tier) and
``benchmarks/lease_explorer.py`` (as many as asked, with the rate).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from asap_ros.testing.lease_invariants import Violation, check
from asap_ros.testing.lease_world import SHIPPED, WorldTiming, run
from asap_ros.testing.schedules import Schedule, draw, shrink

__all__ = ["Finding", "Report", "explore", "violations"]


def violations(schedule: Schedule, timing: WorldTiming = SHIPPED) -> list[Violation]:
    """The invariants ``schedule`` breaks."""
    return check(run(schedule, timing))


@dataclass(frozen=True)
class Finding:
    """The first schedule that broke ``invariant``, shrunk."""

    invariant: str
    seed: int
    index: int
    """How many schedules were played before it (1: the first)."""
    violation: Violation
    shrunk: Schedule

    def replay(self) -> str:
        return repr(self.shrunk)


@dataclass
class Report:
    schedules: int = 0
    seconds: float = 0.0
    failing: int = 0
    findings: dict[str, Finding] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.schedules / self.seconds if self.seconds else 0.0


def explore(seeds: Iterable[int], timing: WorldTiming = SHIPPED, shrink_found: bool = True) -> Report:
    """Play ``draw(seed)`` for every seed; the first failure of each invariant is shrunk."""
    report = Report()
    began = time.perf_counter()
    for seed in seeds:
        report.schedules += 1
        schedule = draw(seed)
        broken = violations(schedule, timing)
        report.failing += bool(broken)
        for violation in broken:
            if violation.invariant in report.findings:
                continue
            shrunk = schedule
            if shrink_found:
                name = violation.invariant
                shrunk = shrink(schedule, lambda s, n=name: any(v.invariant == n for v in violations(s, timing)))
            report.findings[violation.invariant] = Finding(violation.invariant, seed, report.schedules, violation, shrunk)
    report.seconds = time.perf_counter() - began
    return report
