"""One recorded episode (one motion run) as the bag holds it: raw streams on their own clocks.

Everything here is in the units and orders of the recording: joint arrays in G1 motor order
(29), quaternions w, x, y, z, stamps in ns of the system clock where each sample entered
the recording process (mocap: the capture time the mocap source stamped).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

COMPLETED = "completed"
PHASE_END_TOLERANCE = 1e-6
"""Phases are recorded as float32."""


@dataclass(frozen=True)
class Stream:
    """Samples of one topic: sorted stamps and one row per stamp in each column."""

    topic: str
    stamps_ns: np.ndarray
    columns: Mapping[str, np.ndarray]

    def __post_init__(self) -> None:
        for name, values in self.columns.items():
            if len(values) != len(self.stamps_ns):
                raise ValueError(f"{self.topic}: column {name} has {len(values)} rows for {len(self.stamps_ns)} stamps")
        if np.any(np.diff(self.stamps_ns) < 0):
            order = np.argsort(self.stamps_ns, kind="stable")
            object.__setattr__(self, "stamps_ns", self.stamps_ns[order])
            object.__setattr__(self, "columns", {k: v[order] for k, v in self.columns.items()})

    def __len__(self) -> int:
        return len(self.stamps_ns)

    def __getitem__(self, column: str) -> np.ndarray:
        return self.columns[column]

    def between(self, start_ns: int, end_ns: int) -> Stream:
        """The samples with ``start_ns <= stamp <= end_ns``."""
        lo = np.searchsorted(self.stamps_ns, start_ns, side="left")
        hi = np.searchsorted(self.stamps_ns, end_ns, side="right")
        return Stream(self.topic, self.stamps_ns[lo:hi], {k: v[lo:hi] for k, v in self.columns.items()})


@dataclass(frozen=True)
class PolicySteps:
    """The actor's steps of one episode, in tick order."""

    tick: np.ndarray
    """(K,) control step within the motion, 0 first."""
    stamp_ns: np.ndarray
    """(K,) when the step's command was written."""
    state_stamp_ns: np.ndarray
    """(K,) arrival stamp of the LowState the actor's observation was built from (the tick time)."""
    phase: np.ndarray
    obs: np.ndarray
    """(K, obs_dim) float32, exactly what the actor saw."""
    raw_action: np.ndarray
    """(K, 23) float32, the actor's clipped raw output."""
    q_target: np.ndarray
    """(K, 29) position targets sent."""
    lowstate_tick: np.ndarray
    """(K,) the robot's tick of the LowState the observation was built from."""
    fault_latched: np.ndarray
    """(K,) bool: DAMPING latched on this step (its action faulted; the command sent was damping)."""

    def __len__(self) -> int:
        return len(self.tick)

    def phase_step(self) -> float:
        """Phase advance per tick (the median over the episode; 0 with fewer than two steps)."""
        return float(np.median(np.diff(self.phase))) if len(self) > 1 else 0.0

    def done(self) -> np.ndarray:
        """(K,) the motion is over after this step: the next step's phase would reach 1."""
        return self.phase + self.phase_step() >= 1.0 - PHASE_END_TOLERANCE

    def reached_end(self) -> bool:
        """The actor ran its clip to the end."""
        return bool(len(self) and self.done()[-1])


@dataclass(frozen=True)
class RecordedEpisode:
    """One motion run of a session."""

    source: str
    """Bag it was read from."""
    index: int
    """Episode number within the session (as the recorder numbered it)."""
    motion: str
    """Motion / policy name (e.g. ``CR7_level1``)."""
    start_ns: int
    end_ns: int
    outcome: str
    """``completed``, or why the run ended early (e-stop or fault reason, stop request)."""
    estop: bool
    """The run ended in DAMPING (operator e-stop or a safety fault)."""
    steps: PolicySteps
    lowstate: Stream
    """Columns: ``q``, ``dq``, ``tau_est`` (N, 29), ``quat_wxyz`` (N, 4), ``gyro``, ``acc`` (N, 3), ``tick``."""
    lowcmd: Stream
    """Columns: ``q``, ``dq``, ``tau``, ``kp``, ``kd`` (N, 29) and ``enabled`` (N, 29) bool."""
    mocap: Stream | None
    """Columns: ``pos`` (N, 3), ``quat_wxyz`` (N, 4); ``None`` when the bag has no mocap."""
    mocap_topic: str
    """The mocap topic looked for (named in messages when it is missing)."""
    ended: bool = True
    """The run ended by a transition out of TRACKING (False: the recording stopped during it)."""
    notes: tuple[str, ...] = field(default_factory=tuple)
    """What a trainer should know about how this episode was read."""

    @property
    def cut_short(self) -> bool:
        """The motion did not run to the end of its clip (e-stop, fault, stop)."""
        return self.outcome != COMPLETED

    @property
    def name(self) -> str:
        return f"ep{self.index:03d}_{self.motion}"
