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
    "motor_error": (NUM_MOTORS,),
    "quat_wxyz": (4,),
    "gyro": (3,),
    "acc": (3,),
}

PLAUSIBLE_TEMPERATURE_C = (1.0, 150.0)
"""A motor temperature outside this range is a sensor fault, not a temperature (a G1 motor reading
0 C indoors, or above any winding's rating): a warning, never believed to be cool."""
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
    """Hard limit: any motor hotter latches DAMPING."""
    motion_abort_temperature_c: float
    """A running motion (PREPARE, TRACKING) returns to HOLD when a motor is hotter."""
    max_start_temperature_c: float
    """Warning level: Start is refused and diagnostics warn when a motor is hotter."""
    max_consecutive_late_steps: int
    max_consecutive_bad_crc: int
    max_target_step_rad: float
    """A joint target that moves further than this in one control step is a fault."""

    def temperature_order_problem(self) -> tuple[str, str, float] | None:
        """``(key, problem, value)`` unless start <= abort <= hard temperature limit."""
        if self.max_start_temperature_c > self.motion_abort_temperature_c:
            return ("max_start_temperature_c",
                    f"must not exceed motion_abort_temperature_c ({self.motion_abort_temperature_c:g})",
                    self.max_start_temperature_c)
        if self.motion_abort_temperature_c > self.max_temperature_c:
            return ("motion_abort_temperature_c", f"must not exceed max_temperature_c ({self.max_temperature_c:g})",
                    self.motion_abort_temperature_c)
        return None


# --- pure checks ------------------------------------------------------------------------


def implausible_temperature(temperature: np.ndarray, joint_names: Sequence[str]) -> str | None:
    """The first motor whose temperature reading is outside :data:`PLAUSIBLE_TEMPERATURE_C` (a
    warning: the motor's own overheating bits still latch DAMPING)."""
    low, high = PLAUSIBLE_TEMPERATURE_C
    bad = np.flatnonzero(~((temperature >= low) & (temperature <= high)))
    if not bad.size:
        return None
    i = int(bad[0])
    return (f"implausible temperature reading: motor {joint_names[i]} at {float(temperature[i]):g} C "
            f"(plausible {low:g}..{high:g} C); check the sensor")


def check_state_age(arrival_ns: int, now_ns: int, max_age_ms: float) -> str | None:
    """The sample must have entered the process at most ``max_age_ms`` before ``now_ns`` (both
    on the monotonic clock)."""
    age_ns = now_ns - arrival_ns
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


def check_actor_output(output: np.ndarray | None, clip: float, driven: Sequence[str]) -> str | None:
    """The actor's output before clipping: finite and within ``+-clip`` on every driven joint.

    Clipping a non-finite or out-of-range output would hide it as a joint-limit target at full
    gains; it is a fault instead.
    """
    if output is None:
        return "no actor output"
    output = np.asarray(output, dtype=np.float64)
    if output.shape != (len(driven),):
        return f"actor output has shape {output.shape}, expected ({len(driven)},)"
    bad = ~(np.abs(output) <= clip)  # NaN compares false: bad
    if not bad.any():
        return None
    i = int(np.flatnonzero(bad)[0])
    value = float(output[i])
    if math.isfinite(value):
        return f"actor output[{i}] ({driven[i]}) = {value:g} is beyond the action clip +-{clip:g}"
    return f"actor output[{i}] ({driven[i]}) is {value}"


def check_target_step(
    q_target: np.ndarray,
    previous_target: np.ndarray,
    previous_kp: np.ndarray,
    measured_q: np.ndarray,
    limit_rad: float,
    names: Sequence[str],
) -> str | None:
    """No joint target moves further than ``limit_rad`` in one control step.

    A joint that had position stiffness in the previous command (kp > 0) is compared with its
    previous target, one without (PASSIVE, DAMPING) with its measured position.
    """
    reference = step_reference(previous_target, previous_kp, measured_q)
    jump = np.abs(q_target - reference)
    over = ~(jump <= limit_rad)
    if over.any():
        i = int(np.flatnonzero(over)[0])
        return (f"target of {names[i]} jumps {jump[i]:.3f} rad in one step ({reference[i]:.3f} -> "
                f"{q_target[i]:.3f} rad; limit {limit_rad:g} rad)")
    return None


def step_reference(previous_target: np.ndarray, previous_kp: np.ndarray, measured_q: np.ndarray) -> np.ndarray:
    """What a new target is compared with: the previous target where it had stiffness, else the
    measured position."""
    return np.where(previous_kp > 0, previous_target, measured_q)


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


MOTOR_ERROR_BITS: dict[int, str] = {
    0x1: "overcurrent",
    0x2: "transient overvoltage",
    0x4: "sustained overvoltage",
    0x8: "transient undervoltage",
    0x10: "chip overheating",
    0x20: "MOS overheating/undercooling",
    0x40: "MOS temperature anomaly",
    0x80: "shell overheating/undercooling",
    0x100: "shell temperature anomaly",
    0x200: "winding overheating",
    0x400: "rotor encoder 1 error",
    0x800: "rotor encoder 2 error",
    0x1000: "output encoder error",
    0x2000: "calibration/BOOT data error",
    0x4000: "abnormal reset",
    0x8000: "motor locked",
}
"""G1 motor status bits (``MotorState_.motorstate``), from Unitree's G1 developer guide,
"Common mistakes and definitions" (support.unitree.com/home/en/G1_developer/common_istakes_and_definitions)."""


def describe_motor_error(bits: int) -> str:
    """``0x00000201 (overcurrent, winding overheating)``; unknown bits are listed as such."""
    names = [name for bit, name in MOTOR_ERROR_BITS.items() if bits & bit]
    unknown = bits & ~sum(MOTOR_ERROR_BITS)
    if unknown:
        names.append(f"unknown bits 0x{unknown:x}")
    return f"0x{bits:08x} ({', '.join(names)})"


def check_motor_errors(motor_error: np.ndarray, names: Sequence[str]) -> str | None:
    """Every motor reports error state 0."""
    if motor_error.any():
        i = int(np.flatnonzero(motor_error)[0])
        return f"motor {names[i]} reports error state {describe_motor_error(int(motor_error[i]))}"
    return None


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
        self._tick: int | None = None
        self._tick_arrival_ns = 0
        self._mode_machine: int | None = None

    def reset(self) -> None:
        """Forget the consecutive counters, the robot's tick and its mode_machine (after an
        operator Reset)."""
        self.late_steps = 0
        self.bad_crcs = 0
        self._tick = None
        self._mode_machine = None

    def check(self, state: RobotState | None, now_ns: int, late: bool, powered: bool = True) -> str | None:
        """The first fault found in this step, or ``None``. Updates the counters first.

        A state whose tick does not advance past the newest seen is as old as the first sample
        that carried that tick (a frozen or replayed stream is stale); a ``mode_machine`` other
        than the one first seen is a fault. With ``powered`` False (PASSIVE: no stiffness) a tick
        that went back (the robot restarted) and a new mode_machine are taken as the new baseline.
        """
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
            self._check_tick(state, now_ns, powered)
            or self._check_mode_machine(state, powered)
            or check_state_values(state)
            or check_position_limits(
                state.q, self.q_lower, self.q_upper, cfg.position_margin_rad, self.joint_names
            )
            or check_velocity_limits(state.dq, self.dq_limit, cfg.velocity_limit_factor, self.joint_names)
            or check_tilt(state.quat_wxyz, cfg.max_tilt_deg)
            or check_motor_errors(state.motor_error, self.joint_names)
            or check_temperature(state.temperature, cfg.max_temperature_c, self.joint_names)
        )

    def _check_tick(self, state: RobotState, now_ns: int, powered: bool) -> str | None:
        if self._tick is None or state.tick > self._tick or (state.tick < self._tick and not powered):
            self._tick, self._tick_arrival_ns = state.tick, state.arrival_ns
        elif state.arrival_ns != self._tick_arrival_ns:  # a later sample that did not advance
            stale = check_state_age(self._tick_arrival_ns, now_ns, self.config.max_state_age_ms)
            return f"{stale}: robot tick {state.tick} does not advance past {self._tick}" if stale else None
        return check_state_age(self._tick_arrival_ns, now_ns, self.config.max_state_age_ms)

    def _check_mode_machine(self, state: RobotState, powered: bool) -> str | None:
        if self._mode_machine is None or (not powered and state.mode_machine != self._mode_machine):
            self._mode_machine = state.mode_machine
        elif state.mode_machine != self._mode_machine:
            return (f"robot mode_machine changed from {self._mode_machine} to {state.mode_machine} while the "
                    "motors are powered")
        return None
