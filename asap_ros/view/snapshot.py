"""What the page shows at one moment, whether live or from a bag."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from asap_ros.tracking.evaluation import BodyPose

NO_VALUE = "—"


@dataclass(frozen=True)
class Timing:
    """Control loop timing over the newest policy steps."""

    steps: int
    latency_p50_ms: float
    latency_p99_ms: float
    late_steps: int
    """Steps that finished past their deadline, among ``steps``."""


@dataclass(frozen=True)
class Snapshot:
    robot: BodyPose | None
    """The robot: root (pelvis) pose in the world and its 29 joint angles."""
    root_source: str
    """Where the root pose comes from (``mocap``, ``IMU (no mocap)``)."""
    reference: BodyPose | None
    """The clip's pose at the motion tick being tracked (the ghost); ``None`` when not tracking."""
    mode: str = NO_VALUE
    fault: str = ""
    motion: str = ""
    episode: int = 0
    phase: float | None = None
    temperature_c: np.ndarray | None = None
    """(29,) deg C."""
    timing: Timing | None = None
    recorder: str = NO_VALUE
    clock: str = ""
    """When the snapshot is from (``live`` age, or the time in the session)."""


@dataclass
class TimingWindow:
    """Latency and lateness of the newest ``capacity`` policy steps."""

    capacity: int = 500
    _latency_ns: deque = field(default_factory=deque)
    _late: deque = field(default_factory=deque)

    def add(self, latency_ns: int, late: bool) -> None:
        if latency_ns <= 0:
            return  # a step without a state (none arrived): no latency to speak of
        self._latency_ns.append(latency_ns)
        self._late.append(bool(late))
        if len(self._latency_ns) > self.capacity:
            self._latency_ns.popleft()
            self._late.popleft()

    def summary(self) -> Timing | None:
        if not self._latency_ns:
            return None
        return timing_of(np.fromiter(self._latency_ns, dtype=np.float64), np.fromiter(self._late, dtype=bool))


def timing_of(latency_ns: np.ndarray, late: np.ndarray) -> Timing:
    p50, p99 = np.percentile(latency_ns, [50, 99]) / 1e6
    return Timing(len(latency_ns), float(p50), float(p99), int(np.count_nonzero(late)))
