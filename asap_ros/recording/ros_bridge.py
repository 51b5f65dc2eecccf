"""The recorder's ROS 2 side: raw subscriptions (mocap, diagnostics) and its status on diagnostics.

Subscriptions are ``raw``: the serialised CDR from rmw goes to the bag without a Python
message in between. They are reliable with a deep queue (the asap_mocap publishers are
reliable; a best-effort publisher would not match and is reported by ``ros2 topic info -v``).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping
from typing import Any

from asap_ros.recording.topics import ROS_TYPES

Sink = Callable[[str, int, bytes, int], None]
SUBSCRIPTION_DEPTH = 1000
STATUS_NAME = "asap_recorder"


def message_class(msgtype: str) -> type:
    """The rclpy message class of ``pkg/msg/Name``."""
    package, _, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{package}.msg"), name)


def resolved_topics(node: Any, topics: Mapping[str, str]) -> dict[str, str]:
    """Config key -> fully resolved topic name, for the enabled (non-empty) ones."""
    return {key: node.resolve_topic_name(name) for key, name in topics.items() if name}


class RosBridge:
    """Feeds ``sink`` with the ROS inputs and publishes ``status()`` as a DiagnosticArray."""

    def __init__(
        self,
        node: Any,
        sink: Sink,
        topics: Mapping[str, str],
        status: Callable[[], Any],
        status_rate_hz: float,
    ) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.qos import QoSProfile, ReliabilityPolicy

        self._node = node
        self._sink = sink
        self._status = status
        qos = QoSProfile(depth=SUBSCRIPTION_DEPTH, reliability=ReliabilityPolicy.RELIABLE)
        resolved = resolved_topics(node, topics)
        self._subscriptions = [
            node.create_subscription(
                message_class(ROS_TYPES[key]), name, self._callback(name), qos, raw=True
            )
            for key, name in resolved.items()
        ]
        self._diagnostics = node.create_publisher(DiagnosticArray, resolved["diagnostics"], 10)
        self._timer = node.create_timer(1.0 / status_rate_hz, self.publish_status)

    def _callback(self, bag_topic: str) -> Callable[[bytes], None]:
        def on_message(data: bytes) -> None:
            self._sink(bag_topic, time.time_ns(), data, 0)

        return on_message

    def publish_status(self) -> None:
        """Publish the recorder's status now (also called on a fault)."""
        from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

        status = self._status()
        array = DiagnosticArray()
        array.header.stamp = self._node.get_clock().now().to_msg()
        array.status = [
            DiagnosticStatus(
                level=bytes([status.diagnostic_level]),
                name=STATUS_NAME,
                message=status.summary,
                hardware_id=status.host,
                values=[KeyValue(key=k, value=v) for k, v in status.key_values().items()],
            )
        ]
        self._diagnostics.publish(array)

    def close(self) -> None:
        """Remove the subscriptions and the status timer: no more input."""
        for subscription in self._subscriptions:
            self._node.destroy_subscription(subscription)
        self._subscriptions.clear()
        self._node.destroy_timer(self._timer)

    def finish(self) -> None:
        """Publish the final status, then remove the diagnostics publisher."""
        self.publish_status()
        self._node.destroy_publisher(self._diagnostics)
