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
    timing: Mapping[str, float]
    """``TimingStats.summary()`` of the control loop."""
    dropped_records: int
    mode: str
    motion: str | None
    fault: str | None
    state: RobotState | None
    """Newest robot state seen by the publishers (None before the first)."""
    joint_names: Sequence[str]
    max_state_age_ms: float
    max_start_temperature_c: float
    max_temperature_c: float
    new_deadline_misses: int
    """Deadline misses since the previous diagnostics message."""
    sink_errors: Sequence[str] = ()
    """Errors raised by the step publishers (the control loop keeps running)."""


def _values(items: Mapping[str, object]) -> list[KeyValue]:
    return [KeyValue(key=k, value=f"{v:.1f}" if isinstance(v, float) else str(v)) for k, v in items.items()]


def _status(name: str, level: bytes, message: str, hardware_id: str, values: Mapping[str, object]) -> DiagnosticStatus:
    return DiagnosticStatus(level=level, name=name, message=message, hardware_id=hardware_id, values=_values(values))


def diagnostics_msg(d: DiagnosticsInput, node_name: str, hardware_id: str = "unitree_g1") -> DiagnosticArray:
    """Four statuses: control loop timing, robot state age, motor temperatures, controller mode."""
    timing_level = ERROR if d.sink_errors else WARN if d.new_deadline_misses or d.dropped_records else OK
    timing_message = (f"step publisher failed: {d.sink_errors[-1]}" if d.sink_errors
                      else f"{d.new_deadline_misses} deadline misses since last report" if d.new_deadline_misses
                      else "on time")
    timing = _status(f"{node_name}: control loop", timing_level, timing_message, hardware_id,
                     {**d.timing, "dropped_records": d.dropped_records, "sink_errors": len(d.sink_errors)})

    if d.state is None:
        state = _status(f"{node_name}: robot state", ERROR, "no LowState received", hardware_id, {})
        motors = _status(f"{node_name}: motor temperatures", ERROR, "no LowState received", hardware_id, {})
    else:
        age_ms = (d.stamp_ns - d.state.stamp_ns) / 1e6
        level = ERROR if age_ms > d.max_state_age_ms else OK
        state = _status(f"{node_name}: robot state", level, f"age {age_ms:.1f} ms", hardware_id,
                        {"age_ms": age_ms, "robot_tick": d.state.tick, "mode_machine": d.state.mode_machine,
                         "crc_ok": d.state.crc_ok})
        hottest = int(np.argmax(d.state.temperature))
        hottest_c = float(d.state.temperature[hottest])
        level = ERROR if hottest_c > d.max_temperature_c else WARN if hottest_c > d.max_start_temperature_c else OK
        motors = _status(
            f"{node_name}: motor temperatures", level,
            f"hottest {d.joint_names[hottest]} {hottest_c:.0f} C", hardware_id,
            {name: float(t) for name, t in zip(d.joint_names, d.state.temperature)},
        )

    level = ERROR if d.fault else OK
    controller = _status(f"{node_name}: controller", level, d.fault or d.mode, hardware_id,
                         {"mode": d.mode, "motion": d.motion or "", "fault": d.fault or ""})
    msg = DiagnosticArray()
    msg.header.stamp = ros_time(d.stamp_ns)
    msg.status = [timing, state, motors, controller]
    return msg
