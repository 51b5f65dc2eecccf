"""asap_mocap: the real rclpy node on the Vicon SDK stand-in (DDS on loopback): poses, velocities, relayed topics, refused parameters."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from asap_ros.config.paths import config_file
from asap_ros.core.errors import ConfigError
from asap_ros.testing.vicon_script import RATE_HZ, script, standin_source, true_pose, true_twist


def expected_runs(frames, dropped, occluded) -> tuple[list[int], list[int]]:
    """Frames with a pose, and those that also get odometry (their predecessor had a pose)."""
    valid = [f.frame_number for f in frames if f.frame_number not in occluded]
    valid_set = set(valid)
    return valid, [n for n in valid if n - 1 in valid_set]


@pytest.fixture
def ros(dds_domain, monkeypatch):
    """An rclpy context on this process's own domain, with a background executor."""
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor

    context = Context()
    rclpy.init(context=context, domain_id=dds_domain)
    executor = SingleThreadedExecutor(context=context)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    nodes, mocaps = [], []

    def add(node):
        """An rclpy node, or a started MocapNode (its rclpy node is added)."""
        if hasattr(node, "shutdown"):
            mocaps.append(node)
            node.start()
            add(node.node)
            return node
        nodes.append(node)
        executor.add_node(node)
        return node

    yield context, add, spinner
    for mocap in mocaps:
        mocap.shutdown()
    executor.shutdown()
    for node in nodes:
        node.destroy_node()
    rclpy.shutdown(context=context)


def mocap_node(context, vicon_source=None, defaults_file=None, cli_args=None, **params):
    """A MocapNode as run_node builds one: its rclpy node, the parameters of config/mocap.yaml
    (or ``defaults_file``) with ``params`` as overrides, the node class."""
    from rclpy.node import Node

    from asap_ros.config.node_params import MOCAP
    from asap_ros.ros.mocap_node import MocapNode
    from asap_ros.ros.parameters import NodeParams

    node = Node(MOCAP.name, context=context, parameter_overrides=overrides(**params), cli_args=cli_args)
    try:
        return MocapNode(node, NodeParams.for_schema(node, MOCAP, defaults_file), vicon_source=vicon_source)
    except BaseException:
        node.destroy_node()
        raise


class Recorder:
    """Subscribes to the node's outputs and keeps (receive time, message)."""

    def __init__(self, context):
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import PoseStamped
        from nav_msgs.msg import Odometry
        from rclpy.node import Node

        self.node = Node("mocap_test_recorder", context=context)
        self.poses: list = []
        self.odometry: list = []
        self.diagnostics: list = []
        def keep(messages: list):
            return lambda msg: messages.append((time.time_ns(), msg))

        self.node.create_subscription(PoseStamped, "mocap/pose", keep(self.poses), 200)
        self.node.create_subscription(Odometry, "mocap/odometry", keep(self.odometry), 200)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", lambda m: self.diagnostics.append(m), 50)

    def wait_for(self, condition, timeout_s=10.0):
        deadline = time.monotonic() + timeout_s
        while not condition():
            assert time.monotonic() < deadline, "timed out waiting for mocap messages"
            time.sleep(0.01)


def stamp_ns(msg) -> int:
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def overrides(**values):
    from rclpy.parameter import Parameter

    return [Parameter(name, value=value) for name, value in values.items()]


def test_node_publishes_vicon_poses_and_velocities(ros):
    context, add, spinner = ros
    dropped, occluded = {1010, 1011, 1030}, {1020, 1021, 1045}
    frames = script(1000, 60, dropped, occluded)
    recorder = Recorder(context)
    add(recorder.node)
    source, client = standin_source(frames)
    node = add(mocap_node(context, vicon_source=source, diagnostics_rate_hz=20.0))
    spinner.start()
    valid, with_odometry = expected_runs(frames, dropped, occluded)
    recorder.wait_for(lambda: len(recorder.poses) >= len(valid) and len(recorder.odometry) >= len(with_odometry))
    recorder.wait_for(lambda: any(v.value == "57" for d in recorder.diagnostics for v in d.status[0].values))
    time.sleep(0.05)  # nothing else may arrive

    assert len(recorder.poses) == len(valid) == 54
    for frame, (received_ns, msg) in zip(valid, recorder.poses):
        position_mm, quat = true_pose(frame)
        np.testing.assert_allclose(position(msg), position_mm / 1000, atol=1e-12)
        o = msg.pose.orientation
        np.testing.assert_allclose([o.w, o.x, o.y, o.z], quat, atol=1e-12)
        assert msg.header.frame_id == "world"
        latency_ns = round((0.004 + 0.001 * (frame % 5)) * 1e9)
        # capture time = (time GetFrame returned, at or after the stand-in handed the frame out) − latency
        assert client.delivered_ns[frame] - latency_ns <= stamp_ns(msg) <= received_ns - latency_ns

    assert len(recorder.odometry) == len(with_odometry) == 49  # no velocity across the 4 gaps nor at the start
    pose_stamps = {frame: stamp_ns(msg) for frame, (_, msg) in zip(valid, recorder.poses)}
    for frame, (_, odom) in zip(with_odometry, recorder.odometry):
        assert stamp_ns(odom) == pose_stamps[frame] and odom.child_frame_id == "pelvis"
        linear, angular = true_twist(frame)
        t = odom.twist.twist
        np.testing.assert_allclose([t.linear.x, t.linear.y, t.linear.z], linear, atol=1e-9)
        np.testing.assert_allclose([t.angular.x, t.angular.y, t.angular.z], angular, atol=1e-9)

    counters = node.counter_values()
    assert counters["vicon_dropped"] == 3 and counters["vicon_occluded"] == 3 and counters["vicon_frames"] == 57
    assert counters["poses"] == 54 and counters["odometry"] == 49 and counters["velocity_resets"] == 4
    last = {v.key: v.value for v in recorder.diagnostics[-1].status[0].values}
    assert last["vicon_dropped"] == "3" and last["vicon_occluded"] == "3"


def test_node_relays_another_drivers_topic(ros):
    from geometry_msgs.msg import PoseStamped
    from rclpy.node import Node

    context, add, spinner = ros
    recorder = Recorder(context)
    add(recorder.node)
    node = add(mocap_node(context, cli_args=["--ros-args", "-r", "mocap/input:=/optitrack/rigid_body"], mode="topic"))
    driver = add(Node("other_mocap_driver", context=context))
    publisher = driver.create_publisher(PoseStamped, "/optitrack/rigid_body", 100)
    spinner.start()
    recorder.wait_for(lambda: publisher.get_subscription_count() > 0)

    def send(frame: int, quat_wxyz=None):
        msg = PoseStamped()
        stamp = 1_700_000_000_000_000_000 + round(frame * 1e9 / RATE_HZ)
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp, 1_000_000_000)
        msg.header.frame_id = "optitrack"
        position_mm, quat = true_pose(frame)
        quat = quat if quat_wxyz is None else quat_wxyz
        msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = (position_mm / 1000).tolist()
        o = msg.pose.orientation
        o.w, o.x, o.y, o.z = quat.tolist()
        publisher.publish(msg)
        time.sleep(0.003)

    sent = [n for n in range(20) if n not in (8, 9)]  # 30 ms without poses: a gap at 100 Hz
    for n in sent:
        send(n)
        if n == 12:
            send(11)  # out of order: dropped
            send(13, quat_wxyz=np.zeros(4))  # invalid orientation: dropped
    with_odometry = [n for n in sent if n - 1 in sent]
    recorder.wait_for(lambda: len(recorder.poses) >= len(sent) and len(recorder.odometry) >= len(with_odometry))
    time.sleep(0.05)

    assert len(recorder.poses) == len(sent)
    for frame, (_, msg) in zip(sent, recorder.poses):
        np.testing.assert_allclose(position(msg), true_pose(frame)[0] / 1000, atol=1e-12)
        assert msg.header.frame_id == "optitrack"
    assert len(recorder.odometry) == len(with_odometry) == 16
    for frame, (_, odom) in zip(with_odometry, recorder.odometry):
        t = odom.twist.twist
        np.testing.assert_allclose([t.linear.x, t.linear.y, t.linear.z], true_twist(frame)[0], atol=1e-6)
        np.testing.assert_allclose([t.angular.x, t.angular.y, t.angular.z], true_twist(frame)[1], atol=1e-6)
    counters = node.counter_values()
    assert (counters["gaps"], counters["out_of_order"], counters["invalid"]) == (1, 1, 1)


def test_bad_parameters_are_refused(ros, tmp_path: Path):
    context, _, _ = ros
    with pytest.raises(ConfigError, match=r"asap_mocap: mode: must be one of vicon, topic \(got 'optitrack'\)"):
        mocap_node(context, mode="optitrack")
    with pytest.raises(ConfigError, match=r"asap_mocap: frame: unknown parameter \(known: mode, host, .*\(got 'map'\)"):
        mocap_node(context, frame="map")  # a misspelt frame_id is not ignored
    bad_file = tmp_path / "mocap.yaml"
    bad_file.write_text(config_file("mocap.yaml").read_text().replace("rate: 100.0", "rate: fast"))
    with pytest.raises(ConfigError, match=rf"{bad_file}: rate: must be a number \(got 'fast'\)"):
        mocap_node(context, defaults_file=bad_file)


def position(msg) -> np.ndarray:
    p = msg.pose.position if hasattr(msg.pose, "position") else msg.pose.pose.position
    return np.array([p.x, p.y, p.z])
