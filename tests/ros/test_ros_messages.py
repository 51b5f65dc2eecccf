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
NAMES = load_robot_model().joint_names


def state() -> RobotState:
    return RobotState(stamp_ns=STAMP, tick=7, mode_machine=5, q=np.arange(29) * 0.01, dq=np.arange(29) * -0.1,
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
    base = dict(stamp_ns=STAMP + 10_000_000, timing={"steps": 100, "deadline_misses": 0}, dropped_records=0,
                mode="TRACKING", motion="kick_level1", fault=None, state=state(), joint_names=NAMES,
                max_state_age_ms=50.0, max_start_temperature_c=65.0, max_temperature_c=85.0, new_deadline_misses=0)
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
    assert levels(diagnostics(state=hot))["motor temperatures"] == DiagnosticStatus.WARN
    hot.temperature[9] = 90.0
    msg = diagnostics(state=hot, new_deadline_misses=3, fault="overheating")
    assert levels(msg) == {"control loop": DiagnosticStatus.WARN, "robot state": DiagnosticStatus.OK,
                           "motor temperatures": DiagnosticStatus.ERROR, "controller": DiagnosticStatus.ERROR}
    assert msg.status[2].message == "hottest right_knee_joint 90 C"
    assert levels(diagnostics(stamp_ns=STAMP + 60_000_000))["robot state"] == DiagnosticStatus.ERROR
    assert levels(diagnostics(state=None))["robot state"] == DiagnosticStatus.ERROR
    assert diagnostics(sink_errors=["boom"]).status[0].message == "step publisher failed: boom"
