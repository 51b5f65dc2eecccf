"""Plain data passed between the adapters and the pure core.

Every array is indexed in G1 motor order (29 motors, see ``config/g1_29dof.yaml``).
Timestamps are ROS system time in integer nanoseconds (``time.time_ns()``), taken once,
where the sample enters the process ("stamped at the source").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

NUM_MOTORS = 29


def _zeros(n: int = NUM_MOTORS) -> np.ndarray:
    return np.zeros(n, dtype=np.float64)


@dataclass
class RobotState:
    """One proprioceptive sample of the robot (decoded ``LowState_``)."""

    stamp_ns: int = 0
    """Receive time (ns, system clock) at which the sample entered this process."""
    tick: int = 0
    """The robot's own counter (``LowState_.tick``)."""
    mode_machine: int = 0
    q: np.ndarray = field(default_factory=_zeros)
    dq: np.ndarray = field(default_factory=_zeros)
    tau_est: np.ndarray = field(default_factory=_zeros)
    temperature: np.ndarray = field(default_factory=_zeros)
    """Hottest of the two winding/casing temperatures per motor, deg C."""
    quat_wxyz: np.ndarray = field(default_factory=lambda: np.array([1.0, 0.0, 0.0, 0.0]))
    gyro: np.ndarray = field(default_factory=lambda: _zeros(3))
    """Angular velocity, body frame, rad/s."""
    acc: np.ndarray = field(default_factory=lambda: _zeros(3))
    crc_ok: bool = True
    wireless_remote: bytes = b""


@dataclass
class JointCommand:
    """One command for all 29 motors (encoded into ``LowCmd_``)."""

    q: np.ndarray = field(default_factory=_zeros)
    dq: np.ndarray = field(default_factory=_zeros)
    tau: np.ndarray = field(default_factory=_zeros)
    kp: np.ndarray = field(default_factory=_zeros)
    kd: np.ndarray = field(default_factory=_zeros)
    enabled: np.ndarray = field(default_factory=lambda: np.ones(NUM_MOTORS, dtype=bool))
