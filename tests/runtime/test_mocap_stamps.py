"""The mocap pose's header stamp read from its DDS bytes, and ROS topic names on DDS."""

from __future__ import annotations

import pytest
from unitree_sdk2py.idl.builtin_interfaces.msg.dds_ import Time_
from unitree_sdk2py.idl.geometry_msgs.msg.dds_ import Point_, Pose_, PoseStamped_, Quaternion_
from unitree_sdk2py.idl.std_msgs.msg.dds_ import Header_

from asap_ros.runtime.mocap import dds_topic, header_stamp_ns, root_dds_topic


def pose_bytes(sec: int, nanosec: int, frame: str = "world") -> bytes:
    pose = Pose_(Point_(1.0, 2.0, 0.8), Quaternion_(0.0, 0.0, 0.0, 1.0))
    return PoseStamped_(Header_(Time_(sec, nanosec), frame), pose).serialize()


@pytest.mark.parametrize("sec, nanosec", [(0, 1), (1_796_327_222, 978_479_000), (2**31 - 1, 999_999_999)])
def test_the_header_stamp_is_read_from_the_serialised_pose(sec: int, nanosec: int) -> None:
    assert header_stamp_ns(pose_bytes(sec, nanosec)) == sec * 1_000_000_000 + nanosec


def test_a_big_endian_pose_is_read_too() -> None:
    little = pose_bytes(12, 34)
    big = b"\x00\x00\x00\x00" + (12).to_bytes(4, "big") + (34).to_bytes(4, "big") + little[12:]
    assert header_stamp_ns(big) == 12_000_000_034


@pytest.mark.parametrize("payload", [b"", b"\x00\x01\x00\x00\x01", b"\x00\x03\x00\x00" + bytes(16)])
def test_bytes_that_are_not_a_cdr_message_are_refused(payload: bytes) -> None:
    with pytest.raises(ValueError, match="not a plain CDR message with a header"):
        header_stamp_ns(payload)


def test_ros_topics_map_to_rt_topics_once_resolved() -> None:
    assert dds_topic("/mocap/pose") == "rt/mocap/pose"
    assert dds_topic("/lab/vicon/pose") == "rt/lab/vicon/pose"
    with pytest.raises(ValueError, match="not fully resolved"):
        dds_topic("mocap/pose")


@pytest.mark.parametrize("topic, expected", [("mocap/pose", "rt/mocap/pose"), ("/vicon/g1/pose", "rt/vicon/g1/pose")])
def test_a_root_namespace_topic_maps_relative_or_absolute(topic: str, expected: str) -> None:
    assert root_dds_topic(topic) == expected
