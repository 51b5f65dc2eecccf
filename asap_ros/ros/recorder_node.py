"""``asap_recorder``: records the session into one rosbag2 bag of MCAP files.

Raw DDS ``rt/lowstate`` and ``rt/lowcmd`` (every sample), the runtime's ``rt/asap/policy_step``
and ``rt/asap/transition``, and over ROS 2 ``mocap/pose``, ``mocap/odometry`` and
``diagnostics``; plus the robot model for Foxglove (``/robot_description``, ``/tf``,
``/tf_static``, ``/joint_states``, :mod:`asap_ros.recording.robot_model`). DDS runs on the node's own domain with a large socket receive buffer
(``receive_buffer_mb``, :class:`~asap_ros.recording.dds_source.RecorderDomain`). Parameters
and their defaults: ``config/recorder.yaml``. The node reports its state on ``diagnostics``
(name ``asap_recorder``); when free space drops below ``min_free_mb`` it closes the bag,
reports the fault (level ERROR) and keeps running without recording. SIGINT/SIGTERM close the
bag cleanly (:func:`asap_ros.ros.node_main.run_node`); after a ``kill -9`` the bag is readable up to the last flush (``asap-ros bag
repair``). See docs/recording.md.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from asap_ros.config.node_params import RECORDER
from asap_ros.ros.node_main import EXIT_FAILED, EXIT_OK, NodeBehaviour, run_node

__all__ = ["NODE_NAME", "RecorderNode", "main"]

NODE_NAME = RECORDER.name


class RecorderNode(NodeBehaviour):
    """Parameters -> session description -> DDS -> a :class:`~asap_ros.recording.recorder.Recorder`
    on one rclpy node; :meth:`start` opens the bag, :meth:`shutdown` closes it."""

    def __init__(self, node: Any, params: Any):
        from asap_ros.config.policy_spec import resolve_policy_files
        from asap_ros.config.robot_description import load_robot_description
        from asap_ros.recording.config import recorder_config
        from asap_ros.recording.dds_source import RecorderDomain
        from asap_ros.recording.recorder import Recorder
        from asap_ros.recording.robot_model import RobotModelTopics
        from asap_ros.recording.ros_bridge import resolved_topics
        from asap_ros.recording.session_info import SessionInfo, describe_policies

        self.node = node
        self.params = params
        config = recorder_config(params.values)
        session = SessionInfo(
            policies=describe_policies(resolve_policy_files(list(config.policies), params.source),
                                       config.assets_dir or None),
            operator_notes=config.operator_notes,
        )
        robot_model = RobotModelTopics(load_robot_description(assets_dir=config.assets_dir or None),
                                       mocap_topic=resolved_topics(node, config.ros_topics).get("mocap_pose"))
        self.recorder = Recorder(config, session, on_fault=lambda text: node.get_logger().error(text),
                                 robot_model=robot_model)
        self.dds = RecorderDomain(config.dds_domain, config.network_interface, config.receive_buffer_bytes)
        if note := self.dds.capped_note():
            node.get_logger().warning(note)

    def start(self) -> None:
        bag = self.recorder.start(participant=self.dds.participant, ros_node=self.node)
        self.node.get_logger().info(f"recording to {bag}")

    def shutdown(self) -> int:
        """Close the bag (metadata written, files finished) and the DDS domain; 1 if recording faulted."""
        summary = self.recorder.stop()
        self.dds.close()
        if summary is not None:
            total = sum(summary.topic_counts.values())
            self.node.get_logger().info(f"closed {summary.path}: {total} messages in {len(summary.files)} file(s)")
        return EXIT_FAILED if self.recorder.status().fault else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``asap_recorder``: exit 2 on bad parameters, 1 if recording faulted."""
    return run_node(RECORDER, __doc__.splitlines()[0], RecorderNode, argv, executor="events")


if __name__ == "__main__":
    sys.exit(main())
