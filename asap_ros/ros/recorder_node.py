"""``asap_recorder``: records the session into one rosbag2 bag of MCAP files.

Raw DDS ``rt/lowstate`` and ``rt/lowcmd`` (every sample), the runtime's ``rt/asap/policy_step``
and ``rt/asap/transition``, and over ROS 2 ``mocap/pose``, ``mocap/odometry`` and
``diagnostics``; plus the robot model for Foxglove (``/robot_description``, ``/tf``,
``/tf_static``, ``/joint_states``, :mod:`asap_ros.recording.robot_model`). DDS runs on the node's own domain with a large socket receive buffer
(``receive_buffer_mb``, :class:`~asap_ros.recording.dds_source.RecorderDomain`). Parameters
and their defaults: ``config/recorder.yaml``. The node reports its state on ``diagnostics``
(name ``asap_recorder``); when free space drops below ``min_free_mb`` it closes the bag,
reports the fault (level ERROR) and keeps running without recording. SIGINT/SIGTERM close the
bag cleanly; after a ``kill -9`` the bag is readable up to the last flush (``asap-ros bag
repair``). See docs/recording.md.
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any

from asap_ros.core.errors import AsapError
from asap_ros.recording.config import NODE_NAME, RECORDER_PARAMS, recorder_config

SPIN_TIMEOUT_S = 0.1


def _start_recording(node: Any) -> tuple[Any, Any]:
    """Parameters -> session description -> DDS -> a started :class:`Recorder` and its DDS domain."""
    from asap_ros.config.node_params import load_defaults
    from asap_ros.config.paths import config_file
    from asap_ros.config.policy_spec import resolve_policy_files
    from asap_ros.config.robot_description import load_robot_description
    from asap_ros.recording.dds_source import RecorderDomain
    from asap_ros.recording.recorder import Recorder
    from asap_ros.recording.robot_model import RobotModelTopics
    from asap_ros.recording.ros_bridge import resolved_topics
    from asap_ros.recording.session_info import SessionInfo, describe_policies
    from asap_ros.ros.parameters import NodeParams

    defaults_file = config_file("recorder.yaml")
    params = NodeParams(node, RECORDER_PARAMS, load_defaults(defaults_file, NODE_NAME, RECORDER_PARAMS))
    config = recorder_config(params.values, params.source)
    session = SessionInfo(
        policies=describe_policies(resolve_policy_files(list(config.policies), params.source), config.assets_dir or None),
        operator_notes=config.operator_notes,
    )
    dds = RecorderDomain(config.dds_domain, config.network_interface, config.receive_buffer_bytes)
    if note := dds.capped_note():
        node.get_logger().warning(note)
    robot_model = RobotModelTopics(load_robot_description(assets_dir=config.assets_dir or None),
                                   mocap_topic=resolved_topics(node, config.ros_topics).get("mocap_pose"))  # fmt: skip
    recorder = Recorder(config, session, on_fault=lambda text: node.get_logger().error(text), robot_model=robot_model)
    try:
        bag = recorder.start(participant=dds.participant, ros_node=node)
    except BaseException:
        dds.close()
        raise
    node.get_logger().info(f"recording to {bag}")
    return recorder, dds


def main(argv: list[str] | None = None) -> int:
    """Console script ``asap_recorder``: exit 2 on bad parameters, 1 if recording faulted."""
    import rclpy
    from rclpy.experimental import EventsExecutor
    from rclpy.signals import SignalHandlerOptions

    rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node(NODE_NAME)
    try:
        recorder, dds = _start_recording(node)
    except AsapError as exc:
        print(f"{NODE_NAME}: refusing to start: {exc}", file=sys.stderr)
        node.destroy_node()
        rclpy.try_shutdown()
        return 2
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    executor = EventsExecutor()
    executor.add_node(node)
    try:
        while not stop.is_set():
            executor.spin_once(timeout_sec=SPIN_TIMEOUT_S)
    finally:
        summary = recorder.stop()
        dds.close()
        if summary is not None:
            total = sum(summary.topic_counts.values())
            node.get_logger().info(f"closed {summary.path}: {total} messages in {len(summary.files)} file(s)")
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    return 1 if recorder.status().fault else 0


if __name__ == "__main__":
    sys.exit(main())
