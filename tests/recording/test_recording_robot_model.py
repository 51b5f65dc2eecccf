"""The robot-model topics the recorder derives for Foxglove, from known LowState and mocap bytes."""

from __future__ import annotations

import numpy as np
import pytest

from asap_ros.config.robot_description import load_robot_description
from asap_ros.core.quaternion import quat_wxyz_matrix
from asap_ros.g1.layout import LOWSTATE_LAYOUT, LOWSTATE_WIRE
from asap_ros.recording import topics as T
from asap_ros.recording.robot_model import RATE_HZ, RobotModelTopics
from asap_ros.recording.typestore import recording_typestore

STORE = recording_typestore()
PERIOD_NS = int(1e9 / 500)


def lowstate_cdr(q: np.ndarray, quat_wxyz=(1.0, 0.0, 0.0, 0.0)) -> bytes:
    record = np.zeros((), LOWSTATE_LAYOUT)
    record["motor_state"]["q"][:29] = q
    record["imu_state"]["quaternion"] = quat_wxyz
    return LOWSTATE_WIRE.to_cdr(record)


def mocap_cdr(position, quat_wxyz) -> bytes:
    t = STORE.types
    w, x, y, z = quat_wxyz
    msg = t["geometry_msgs/msg/PoseStamped"](
        header=t["std_msgs/msg/Header"](stamp=t["builtin_interfaces/msg/Time"](sec=0, nanosec=0), frame_id="world"),
        pose=t["geometry_msgs/msg/Pose"](position=t["geometry_msgs/msg/Point"](x=position[0], y=position[1], z=position[2]),
                                         orientation=t["geometry_msgs/msg/Quaternion"](x=x, y=y, z=z, w=w)),
    )  # fmt: skip
    return bytes(STORE.serialize_cdr(msg, "geometry_msgs/msg/PoseStamped"))


@pytest.fixture(scope="module")
def model(assets) -> RobotModelTopics:
    return RobotModelTopics(load_robot_description())


def test_start_messages_are_the_description_then_the_fixed_joints(model):
    (description_topic, description), (static_topic, static) = model.start_messages(123)
    assert (description_topic, static_topic) == (T.ROBOT_DESCRIPTION, T.TF_STATIC)
    assert STORE.deserialize_cdr(description, "std_msgs/msg/String").data == model.description.xml
    transforms = STORE.deserialize_cdr(static, "tf2_msgs/msg/TFMessage").transforms
    fixed = [j for j in model.description.joints if j.type == "fixed"]
    assert sorted(t.child_frame_id for t in transforms) == sorted(j.child for j in fixed)


def test_lowstates_become_tf_and_joint_states_at_the_derived_rate(assets):
    model = RobotModelTopics(load_robot_description())
    q = np.linspace(-0.5, 0.5, 29)
    out = [m for k in range(500) for m in model.on_message(T.LOWSTATE, 10**9 + k * PERIOD_NS, lowstate_cdr(q))]
    assert len(out) == 2 * RATE_HZ, "one second of 500 Hz LowState"
    joints = STORE.deserialize_cdr(dict(out[:2])[T.JOINT_STATES], "sensor_msgs/msg/JointState")
    assert joints.position == pytest.approx(q.astype(np.float32))
    assert joints.header.stamp.sec == 1 and joints.header.stamp.nanosec == 0
    tf = STORE.deserialize_cdr(dict(out[:2])[T.TF], "tf2_msgs/msg/TFMessage")
    by_child = {t.child_frame_id: t for t in tf.transforms}
    knee = by_child["left_knee_link"].transform.rotation
    expected = model.description.joint_transforms({"left_knee_joint": float(np.float32(q[3]))})["left_knee_link"]
    got = quat_wxyz_matrix([knee.w, knee.x, knee.y, knee.z])
    assert got == pytest.approx(expected[:3, :3], abs=1e-6)
    assert by_child["pelvis"].header.frame_id == "world"


def test_the_root_is_the_fresh_mocap_pose_else_the_imu(assets):
    model = RobotModelTopics(load_robot_description())
    tilt = (np.cos(0.2), np.sin(0.2), 0.0, 0.0)
    model.on_message(T.MOCAP_POSE, 10**9, mocap_cdr((1.0, 2.0, 0.7), (1.0, 0.0, 0.0, 0.0)))
    out = dict(model.on_message(T.LOWSTATE, 10**9 + PERIOD_NS, lowstate_cdr(np.zeros(29), tilt)))
    root = next(t for t in STORE.deserialize_cdr(out[T.TF], "tf2_msgs/msg/TFMessage").transforms if t.child_frame_id == "pelvis")
    assert (root.transform.translation.x, root.transform.translation.y) == pytest.approx((1.0, 2.0))
    assert root.transform.rotation.w == pytest.approx(1.0)
    out = dict(model.on_message(T.LOWSTATE, 3 * 10**9, lowstate_cdr(np.zeros(29), tilt)))  # mocap 2 s old
    root = next(t for t in STORE.deserialize_cdr(out[T.TF], "tf2_msgs/msg/TFMessage").transforms if t.child_frame_id == "pelvis")
    assert root.transform.translation.x == 0.0 and root.transform.rotation.x == pytest.approx(np.sin(0.2), abs=1e-6)


def test_an_undecodable_lowstate_derives_nothing(model):
    assert list(model.on_message(T.LOWSTATE, 5 * 10**9, b"\x00\x01\x00\x00garbage")) == []
