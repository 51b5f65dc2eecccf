"""Plain data passed between the adapters and the pure core.

Every array is indexed in G1 motor order (29 motors, see ``config/g1_29dof.yaml``).
Each sample carries two stamps taken once, where it enters the process: ``stamp_ns``, ROS
system time (``time.time_ns()``) for recorded data, and ``arrival_ns``, the monotonic clock
(``time.monotonic_ns()``) for durations such as the state's age.
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
    """Receive time (ns, system clock) at which the sample entered this process: data only."""
    arrival_ns: int = 0
    """The same instant on the monotonic clock (ns): what the state's age is measured from."""
    tick: int = 0
    """The robot's own counter (``LowState_.tick``)."""
    mode_machine: int = 0
    q: np.ndarray = field(default_factory=_zeros)
    dq: np.ndarray = field(default_factory=_zeros)
    tau_est: np.ndarray = field(default_factory=_zeros)
    temperature: np.ndarray = field(default_factory=_zeros)
    """Hottest of the two winding/casing temperatures per motor, deg C."""
    motor_error: np.ndarray = field(default_factory=lambda: np.zeros(NUM_MOTORS, dtype=np.uint32))
    """Per-motor error bits (``MotorState_.motorstate``); 0 = no error."""
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
