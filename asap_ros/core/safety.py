"""Fault checks for the control step.

Each ``check_*`` function is pure: it looks at one aspect of a sample and returns a short
reason (naming the joint and value) or ``None`` when the aspect is healthy. They never raise
on malformed input; a malformed sample is itself a fault. :class:`SafetyMonitor` runs them
all, in a fixed order, once per control step and keeps the two consecutive-event counters
(late steps, bad CRCs). Thresholds come from the ``safety`` section of
``config/controller.yaml`` (read by :func:`asap_ros.config.controller.read_safety_config`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from asap_ros.core.state import NUM_MOTORS, RobotState

#: RobotState array fields and the shape each must have.
STATE_ARRAY_SHAPES: dict[str, tuple[int, ...]] = {
    "q": (NUM_MOTORS,),
    "dq": (NUM_MOTORS,),
    "tau_est": (NUM_MOTORS,),
    "temperature": (NUM_MOTORS,),
    "quat_wxyz": (4,),
    "gyro": (3,),
    "acc": (3,),
}

QUATERNION_NORM_TOLERANCE = 0.1
"""An IMU quaternion whose norm is further than this from 1 is treated as corrupt."""


@dataclass(frozen=True)
class SafetyConfig:
    """Fault thresholds (see ``config/controller.yaml`` for the reasoning behind each)."""

    max_state_age_ms: float
    position_margin_rad: float
    velocity_limit_factor: float
    max_tilt_deg: float
    max_temperature_c: float
    max_start_temperature_c: float
    max_consecutive_late_steps: int
    max_consecutive_bad_crc: int


# --- pure checks ------------------------------------------------------------------------


def check_state_age(stamp_ns: int, now_ns: int, max_age_ms: float) -> str | None:
    """The sample must have entered the process at most ``max_age_ms`` before ``now_ns``."""
    age_ns = now_ns - stamp_ns
    if age_ns > max_age_ms * 1e6:
        return f"stale robot state: {age_ns / 1e6:.1f} ms old (limit {max_age_ms:g} ms)"
    return None


def check_state_values(state: RobotState) -> str | None:
    """Every array field has its expected shape and holds only finite numbers."""
    for name, shape in STATE_ARRAY_SHAPES.items():
        reason = check_finite_array(f"state {name}", getattr(state, name, None), shape)
        if reason:
            return reason
    return None


def check_finite_array(label: str, value: object, shape: tuple[int, ...]) -> str | None:
    """``value`` is a numeric array of ``shape`` with no NaN or inf."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return f"{label} is not numeric ({type(value).__name__})"
    if array.shape != shape:
        return f"{label} has shape {array.shape}, expected {shape}"
    finite = np.isfinite(array)
    if not finite.all():
        index = int(np.flatnonzero(~finite)[0])
        return f"{label}[{index}] is {array[index]}"
    return None


def check_action(raw_action: np.ndarray, q_target: np.ndarray) -> str | None:
    """The actor output and the targets derived from it are finite."""
    return check_finite_array("actor output", raw_action, np.shape(raw_action)) or check_finite_array(
        "policy target q", q_target, (NUM_MOTORS,)
    )


def check_position_limits(
    q: np.ndarray, lower: np.ndarray, upper: np.ndarray, margin: float, names: Sequence[str]
) -> str | None:
    """Each joint lies within its limits widened by ``margin`` (rad)."""
    outside = (q < lower - margin) | (q > upper + margin)
    if outside.any():
        i = int(np.flatnonzero(outside)[0])
        return (
            f"joint {names[i]} at {q[i]:.3f} rad is outside [{lower[i]:.3f}, {upper[i]:.3f}] "
            f"by more than {margin:g} rad"
        )
    return None


def check_velocity_limits(dq: np.ndarray, limit: np.ndarray, factor: float, names: Sequence[str]) -> str | None:
    """Each joint speed is at most ``factor`` times its velocity limit."""
    over = np.abs(dq) > limit * factor
    if over.any():
        i = int(np.flatnonzero(over)[0])
        return f"joint {names[i]} speed {dq[i]:.2f} rad/s exceeds {factor:g} x limit {limit[i]:g} rad/s"
    return None


def torso_tilt_cos(quat_wxyz: np.ndarray) -> float:
    """Cosine of the angle between the body z axis and the world vertical.

    Equals ``-projected_gravity_z`` for gravity (0, 0, -1) rotated into the body frame.
    """
    w, x, y, z = quat_wxyz
    return float(1.0 - 2.0 * (x * x + y * y) / (w * w + x * x + y * y + z * z))


def check_tilt(quat_wxyz: np.ndarray, max_tilt_deg: float) -> str | None:
    """The IMU quaternion is a unit quaternion and the torso tilt is below ``max_tilt_deg``."""
    norm = float(np.sqrt(np.dot(quat_wxyz, quat_wxyz)))
    if abs(norm - 1.0) > QUATERNION_NORM_TOLERANCE:
        return f"IMU quaternion norm {norm:.3f} is not 1"
    cos_tilt = torso_tilt_cos(quat_wxyz)
    if cos_tilt < math.cos(math.radians(max_tilt_deg)):
        tilt = math.degrees(math.acos(max(-1.0, min(1.0, cos_tilt))))
        return f"torso tilt {tilt:.1f} deg exceeds {max_tilt_deg:g} deg"
    return None


def hottest_motor(temperature: np.ndarray, max_c: float, names: Sequence[str]) -> str | None:
    """The hottest motor, if any motor is above ``max_c`` deg C, as ``name at T``."""
    i = int(np.argmax(temperature))
    if temperature[i] > max_c:
        return f"motor {names[i]} at {temperature[i]:g} C"
    return None


def check_temperature(temperature: np.ndarray, max_c: float, names: Sequence[str]) -> str | None:
    """No motor is hotter than ``max_c`` deg C."""
    hot = hottest_motor(temperature, max_c, names)
    return f"overheating: {hot} (limit {max_c:g} C)" if hot else None


def check_consecutive(count: int, limit: int, what: str) -> str | None:
    """``count`` consecutive events of kind ``what`` must stay below ``limit``."""
    if count >= limit:
        return f"{count} consecutive {what} (limit {limit})"
    return None


# --- per-step monitor -------------------------------------------------------------------


class SafetyMonitor:
    """All state checks of one control step, plus the consecutive late-step and bad-CRC counters."""

    def __init__(
        self,
        config: SafetyConfig,
        joint_names: Sequence[str],
        q_lower: np.ndarray,
        q_upper: np.ndarray,
        dq_limit: np.ndarray,
    ):
        self.config = config
        self.joint_names = tuple(joint_names)
        self.q_lower = q_lower
        self.q_upper = q_upper
        self.dq_limit = dq_limit
        self.late_steps = 0
        self.bad_crcs = 0

    def reset(self) -> None:
        """Forget the consecutive counters (after an operator Reset)."""
        self.late_steps = 0
        self.bad_crcs = 0

    def check(self, state: RobotState | None, now_ns: int, late: bool) -> str | None:
        """The first fault found in this step, or ``None``. Updates the counters first."""
        cfg = self.config
        self.late_steps = self.late_steps + 1 if late else 0
        if state is not None:
            self.bad_crcs = 0 if state.crc_ok else self.bad_crcs + 1
        reason = check_consecutive(self.late_steps, cfg.max_consecutive_late_steps, "late control steps")
        if reason:
            return reason
        if state is None:
            return "no robot state received"
        if not state.crc_ok:  # a corrupted sample's values mean nothing: only the count matters
            return check_consecutive(self.bad_crcs, cfg.max_consecutive_bad_crc, "state CRC mismatches")
        return (
            check_state_age(state.stamp_ns, now_ns, cfg.max_state_age_ms)
            or check_state_values(state)
            or check_position_limits(
                state.q, self.q_lower, self.q_upper, cfg.position_margin_rad, self.joint_names
            )
            or check_velocity_limits(state.dq, self.dq_limit, cfg.velocity_limit_factor, self.joint_names)
            or check_tilt(state.quat_wxyz, cfg.max_tilt_deg)
            or check_temperature(state.temperature, cfg.max_temperature_c, self.joint_names)
        )
