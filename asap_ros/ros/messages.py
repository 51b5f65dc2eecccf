"""ROS message views of the runtime's data: joint states, IMU, policy step, diagnostics.

Pure builders (no publishing): they run on the deploy node's sink thread and timers, never on
the control path. Stamps are the ``time.time_ns()`` taken where the sample entered the process.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Float32MultiArray, MultiArrayDimension

from asap_ros.core.policy import PolicyOutput
from asap_ros.core.safety import implausible_temperature
from asap_ros.core.state import RobotState

IMU_FRAME = "imu_in_pelvis"
OK, WARN, ERROR = DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR


def ros_time(stamp_ns: int) -> Time:
    """``builtin_interfaces/Time`` of a system-clock stamp in ns."""
    sec, nanosec = divmod(int(stamp_ns), 1_000_000_000)
    return Time(sec=sec, nanosec=nanosec)


def joint_state_msg(state: RobotState, joint_names: Sequence[str]) -> JointState:
    """Measured q, dq and estimated torque of every motor, in motor order."""
    msg = JointState()
    msg.header.stamp = ros_time(state.stamp_ns)
    msg.name = list(joint_names)
    msg.position = state.q.tolist()
    msg.velocity = state.dq.tolist()
    msg.effort = state.tau_est.tolist()
    return msg


def imu_msg(state: RobotState, frame_id: str = IMU_FRAME) -> Imu:
    """Orientation (LowState's w,x,y,z reordered to ROS x,y,z,w), body-frame gyro and accelerometer.

    Covariances are unknown: all zeros, as REP 145 specifies for that case.
    """
    msg = Imu()
    msg.header.stamp = ros_time(state.stamp_ns)
    msg.header.frame_id = frame_id
    w, x, y, z = (float(v) for v in state.quat_wxyz)
    msg.orientation.w, msg.orientation.x, msg.orientation.y, msg.orientation.z = w, x, y, z
    gx, gy, gz = (float(v) for v in state.gyro)
    msg.angular_velocity.x, msg.angular_velocity.y, msg.angular_velocity.z = gx, gy, gz
    ax, ay, az = (float(v) for v in state.acc)
    msg.linear_acceleration.x, msg.linear_acceleration.y, msg.linear_acceleration.z = ax, ay, az
    return msg


POLICY_STEP_FIELDS = ("tick", "phase", "raw_action", "q_target")
"""Layout of :func:`policy_step_msg`: one labelled dimension per field, in this order."""


def policy_step_msg(out: PolicyOutput) -> Float32MultiArray:
    """Compact ROS view of one actor step: ``[tick, phase, raw_action..., q_target...]``.

    The full step (with the observation) goes out on DDS via :mod:`asap_ros.runtime.step_topics`.
    """
    parts = (np.array([out.tick], np.float32), np.array([out.phase], np.float32),
             np.asarray(out.raw_action, np.float32), np.asarray(out.q_target, np.float32))
    msg = Float32MultiArray()
    msg.layout.dim = [
        MultiArrayDimension(label=label, size=len(part), stride=len(part))
        for label, part in zip(POLICY_STEP_FIELDS, parts)
    ]
    msg.data = np.concatenate(parts).tolist()
    return msg


@dataclass(frozen=True)
class DiagnosticsInput:
    """Everything one diagnostics message reports (gathered off the control path)."""

    stamp_ns: int
    """System time of the message."""
    monotonic_ns: int
    """The same instant on the monotonic clock: the state's age is measured on it."""
    timing: Mapping[str, float]
    """``LoopStats.as_dict()`` of the control loop."""
    dropped_records: int
    mode: str
    motion: str | None
    fault: str | None
    state: RobotState | None
    """Newest robot state seen by the publishers (None before the first)."""
    joint_names: Sequence[str]
    max_state_age_ms: float
    max_start_temperature_c: float
    motion_abort_temperature_c: float
    max_temperature_c: float
    new_deadline_misses: int
    """Deadline misses since the previous diagnostics message."""
    sink_errors: Sequence[str] = ()
    """Errors raised by the step publishers (the control loop keeps running)."""
    control_error: str | None = None
    """Why the control loop no longer runs the controller (``ControlLoop.fatal_error``, or its
    thread is gone); it then streams damping, or nothing at all."""
    motion_abort: str | None = None
    """Why the latest motion was aborted to HOLD (a hot motor)."""
    operator: Sequence[str] = ()
    """The newest operator requests, oldest first, each with its outcome and reason."""
    supervisor: str = ""
    """Which supervisor the deploy node obeys (or "unsupervised")."""


def _motor_status(d: DiagnosticsInput, name: str, hardware_id: str) -> DiagnosticStatus:
    """The hottest motor against the graded limits, and any motor reporting an error state."""
    state = d.state
    hottest = int(np.argmax(state.temperature))
    hottest_c = float(state.temperature[hottest])
    message = f"hottest {d.joint_names[hottest]} {hottest_c:.0f} C"
    levels = ((d.max_temperature_c, ERROR, "DAMPING"), (d.motion_abort_temperature_c, WARN, "motions abort"),
              (d.max_start_temperature_c, WARN, "start refused"))
    level = OK
    for limit, grade, effect in levels:
        if hottest_c > limit:
            level, message = grade, f"{message}: above {limit:g} C, {effect}"
            break
    implausible = implausible_temperature(state.temperature, d.joint_names)
    if implausible and level == OK:
        level, message = WARN, f"{implausible}; {message}"
    errors = np.flatnonzero(state.motor_error)
    if errors.size:
        level = ERROR
        message = f"motor {d.joint_names[errors[0]]} error state 0x{int(state.motor_error[errors[0]]):08x}; {message}"
    values = {name: float(t) for name, t in zip(d.joint_names, state.temperature)}
    values.update({f"{d.joint_names[i]} error": f"0x{int(state.motor_error[i]):08x}" for i in errors})
    return _status(name, level, message, hardware_id, values)


def _values(items: Mapping[str, object]) -> list[KeyValue]:
    return [KeyValue(key=k, value=f"{v:.1f}" if isinstance(v, float) else str(v)) for k, v in items.items()]


def _status(name: str, level: bytes, message: str, hardware_id: str, values: Mapping[str, object]) -> DiagnosticStatus:
    return DiagnosticStatus(level=level, name=name, message=message, hardware_id=hardware_id, values=_values(values))


def diagnostics_msg(d: DiagnosticsInput, node_name: str, hardware_id: str = "unitree_g1") -> DiagnosticArray:
    """Five statuses: control loop timing, robot state age, motor temperatures, controller mode, the
    newest operator requests."""
    timing_level = (ERROR if d.control_error or d.sink_errors
                    else WARN if d.new_deadline_misses or d.dropped_records else OK)
    timing_message = (f"control loop failed: {d.control_error}" if d.control_error
                      else f"step publisher failed: {d.sink_errors[-1]}" if d.sink_errors
                      else f"{d.new_deadline_misses} deadline misses since last report" if d.new_deadline_misses
                      else "on time")
    timing = _status(f"{node_name}: control loop", timing_level, timing_message, hardware_id,
                     {**d.timing, "dropped_records": d.dropped_records, "sink_errors": len(d.sink_errors),
                      "control_error": d.control_error or ""})

    if d.state is None:
        state = _status(f"{node_name}: robot state", ERROR, "no LowState received", hardware_id, {})
        motors = _status(f"{node_name}: motor temperatures", ERROR, "no LowState received", hardware_id, {})
    else:
        age_ms = (d.monotonic_ns - d.state.arrival_ns) / 1e6
        level = ERROR if age_ms > d.max_state_age_ms else OK
        state = _status(f"{node_name}: robot state", level, f"age {age_ms:.1f} ms", hardware_id,
                        {"age_ms": age_ms, "robot_tick": d.state.tick, "mode_machine": d.state.mode_machine,
                         "crc_ok": d.state.crc_ok})
        motors = _motor_status(d, f"{node_name}: motor temperatures", hardware_id)

    level = ERROR if d.fault else WARN if d.motion_abort else OK
    controller = _status(f"{node_name}: controller", level, d.fault or d.motion_abort or d.mode, hardware_id,
                         {"mode": d.mode, "motion": d.motion or "", "fault": d.fault or "",
                          "motion_abort": d.motion_abort or "", "supervisor": d.supervisor})
    operator = _status(f"{node_name}: operator requests", OK, d.operator[-1] if d.operator else "none yet",
                       hardware_id, {f"request {i}": text for i, text in enumerate(reversed(d.operator), 1)})
    msg = DiagnosticArray()
    msg.header.stamp = ros_time(d.stamp_ns)
    msg.status = [timing, state, motors, controller, operator]
    return msg
