"""ROS message views: joint states, IMU (w,x,y,z -> x,y,z,w), policy step, diagnostics levels."""

from __future__ import annotations

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus

from asap_ros.config.robot import load_robot_model
from asap_ros.core.policy import PolicyOutput
from asap_ros.core.state import RobotState
from asap_ros.ros.messages import (
    DiagnosticsInput,
    diagnostics_msg,
    imu_msg,
    joint_state_msg,
    policy_step_msg,
    ros_time,
)

STAMP = 1_700_000_000_123_456_789
ARRIVAL = 5_000_000_000
"""The state's arrival on the monotonic clock."""
NAMES = load_robot_model().joint_names


def state() -> RobotState:
    return RobotState(stamp_ns=STAMP, arrival_ns=ARRIVAL, tick=7, mode_machine=5, q=np.arange(29) * 0.01, dq=np.arange(29) * -0.1,
                      tau_est=np.full(29, 2.0), temperature=np.full(29, 40.0),
                      quat_wxyz=np.array([0.9, 0.1, 0.2, 0.3]), gyro=np.array([1.0, 2.0, 3.0]),
                      acc=np.array([0.0, 0.0, 9.8]))


def test_stamps_split_into_seconds_and_nanoseconds():
    t = ros_time(STAMP)
    assert (t.sec, t.nanosec) == (1_700_000_000, 123_456_789)


def test_joint_state_carries_names_and_measurements_in_motor_order():
    msg = joint_state_msg(state(), NAMES)
    assert list(msg.name) == list(NAMES) and msg.name[3] == "left_knee_joint"
    assert np.allclose(msg.position, np.arange(29) * 0.01) and np.allclose(msg.velocity, np.arange(29) * -0.1)
    assert np.allclose(msg.effort, 2.0) and msg.header.stamp.nanosec == 123_456_789


def test_imu_reorders_the_quaternion_and_copies_gyro_and_accelerometer():
    msg = imu_msg(state())
    q = msg.orientation
    assert (q.x, q.y, q.z, q.w) == (0.1, 0.2, 0.3, 0.9)
    assert (msg.angular_velocity.x, msg.angular_velocity.z, msg.linear_acceleration.z) == (1.0, 3.0, 9.8)


def test_policy_step_layout_is_labelled():
    out = PolicyOutput(tick=12, phase=0.25, obs=np.zeros(380, np.float32), raw_action=np.ones(23, np.float32),
                       q_target=np.full(29, 0.5), done=False)
    msg = policy_step_msg(out)
    assert [(d.label, d.size) for d in msg.layout.dim] == [("tick", 1), ("phase", 1), ("raw_action", 23),
                                                          ("q_target", 29)]
    assert msg.data[0] == 12 and msg.data[1] == 0.25 and len(msg.data) == 54


def diagnostics(**changes):
    """10 ms after the state arrived (monotonic clock); the system clock was stepped back 1 h since."""
    base = dict(stamp_ns=STAMP - 3600 * 10**9, monotonic_ns=ARRIVAL + 10_000_000,
                timing={"steps": 100, "deadline_misses": 0}, dropped_records=0,
                mode="TRACKING", motion="kick_level1", fault=None, state=state(), joint_names=NAMES,
                max_state_age_ms=50.0, max_start_temperature_c=65.0, motion_abort_temperature_c=75.0,
                max_temperature_c=85.0, new_deadline_misses=0)
    return diagnostics_msg(DiagnosticsInput(**{**base, **changes}), "asap_deploy")


def levels(msg):
    return {s.name.split(": ")[1]: s.level for s in msg.status}


def test_healthy_diagnostics_are_ok_and_report_state_age():
    msg = diagnostics()
    assert set(levels(msg).values()) == {DiagnosticStatus.OK}
    age = {kv.key: kv.value for kv in msg.status[1].values}["age_ms"]
    assert age == "10.0"


def test_diagnostics_levels_follow_thresholds():
    hot = state()
    hot.temperature[9] = 70.0
    msg = diagnostics(state=hot)
    assert levels(msg)["motor temperatures"] == DiagnosticStatus.WARN
    assert msg.status[2].message == "hottest right_knee_joint 70 C: above 65 C, start refused"
    hot.temperature[9] = 80.0
    msg = diagnostics(state=hot, motion_abort="motion kick_level1 aborted: motor right_knee_joint at 80 C")
    assert levels(msg)["motor temperatures"] == DiagnosticStatus.WARN
    assert msg.status[2].message == "hottest right_knee_joint 80 C: above 75 C, motions abort"
    assert msg.status[3].level == DiagnosticStatus.WARN and "aborted" in msg.status[3].message
    hot.temperature[9] = 90.0
    msg = diagnostics(state=hot, new_deadline_misses=3, fault="overheating")
    assert levels(msg) == {"control loop": DiagnosticStatus.WARN, "robot state": DiagnosticStatus.OK,
                           "motor temperatures": DiagnosticStatus.ERROR, "controller": DiagnosticStatus.ERROR,
                           "operator requests": DiagnosticStatus.OK}
    assert msg.status[2].message == "hottest right_knee_joint 90 C: above 85 C, DAMPING"
    assert levels(diagnostics(monotonic_ns=ARRIVAL + 60_000_000))["robot state"] == DiagnosticStatus.ERROR
    assert levels(diagnostics(state=None))["robot state"] == DiagnosticStatus.ERROR
    assert diagnostics(sink_errors=["boom"]).status[0].message == "step publisher failed: boom"


def test_diagnostics_report_a_motor_error_and_a_failed_control_loop():
    broken = state()
    broken.motor_error[3] = 0x200
    msg = diagnostics(state=broken)
    assert levels(msg)["motor temperatures"] == DiagnosticStatus.ERROR
    assert msg.status[2].message.startswith("motor left_knee_joint error state 0x00000200")
    msg = diagnostics(control_error="control step raised ZeroDivisionError('division by zero')")
    assert levels(msg)["control loop"] == DiagnosticStatus.ERROR
    assert msg.status[0].message == "control loop failed: control step raised ZeroDivisionError('division by zero')"
    assert {kv.key: kv.value for kv in msg.status[0].values}["control_error"].startswith("control step raised")


def test_an_implausible_temperature_is_a_warning_naming_the_motor() -> None:
    cold = state()
    cold.temperature[3] = 0.0
    msg = diagnostics(state=cold)
    assert levels(msg)["motor temperatures"] == DiagnosticStatus.WARN
    assert msg.status[2].message.startswith("implausible temperature reading: motor left_knee_joint at 0 C")


def test_operator_requests_are_reported_newest_first() -> None:
    msg = diagnostics(operator=["Stand via ~/stand: accepted: ok", "Reset via ~/reset: refused: e-stop held"])
    status = msg.status[4]
    assert status.message == "Reset via ~/reset: refused: e-stop held"
    assert [(v.key, v.value) for v in status.values][0] == ("request 1", "Reset via ~/reset: refused: e-stop held")
