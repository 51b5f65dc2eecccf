"""The simulated Vicon's wire format (no DDS: the e2e tier runs the stream)."""

from __future__ import annotations

import numpy as np
from unitree_sdk2py.idl.geometry_msgs.msg.dds_ import PoseStamped_

from asap_ros.runtime.mocap import header_stamp_ns
from asap_ros.sim.mocap_stream import pose_cdr


def test_pose_cdr_is_a_pose_stamped_with_the_capture_stamp():
    stamp_ns = 1_796_404_063_525_174_990
    payload = pose_cdr(stamp_ns, "world", np.array([1.0, -2.0, 0.75]), np.array([0.9, 0.1, -0.2, 0.3]))
    assert len(payload) % 4 == 0  # raw XCDR1 writes need 4-byte alignment
    assert header_stamp_ns(payload) == stamp_ns
    pose = PoseStamped_.deserialize(payload)
    assert pose.header.frame_id == "world"
    assert (pose.header.stamp.sec, pose.header.stamp.nanosec) == divmod(stamp_ns, 1_000_000_000)
    p, o = pose.pose.position, pose.pose.orientation
    assert (p.x, p.y, p.z) == (1.0, -2.0, 0.75)
    assert (o.w, o.x, o.y, o.z) == (0.9, 0.1, -0.2, 0.3)  # ROS order x, y, z, w on the wire; wxyz in

