"""``asap_mocap``: the robot's root pose and velocity from motion capture.

Publishes ``mocap/pose`` (geometry_msgs/PoseStamped, ``frame_id``) and ``mocap/odometry``
(nav_msgs/Odometry: pose in ``frame_id``, twist in ``child_frame_id``, i.e. body frame).

- ``mode: vicon``: client of the Vicon DataStream SDK. Each frame is stamped with its capture
  time, receive time minus the SDK's ``GetLatencyTotal``. Occluded frames publish nothing and
  are counted; frame-number gaps count as drops.
- ``mode: topic``: relays PoseStamped from ``mocap/input`` (remap it to any mocap driver's
  topic), keeping its header; out-of-order stamps are dropped and counted.

Velocity: finite differences between consecutive poses, EMA-filtered; never across a gap (a
dropped or occluded frame, or in topic mode an interval above ``max_gap_periods``): after a
gap the first pose is published without odometry. Counters go to ``/diagnostics``.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseStamped
from nav_msgs.msg import Odometry

from asap_ros.config.node_params import MOCAP, MOCAP_PARAMS
from asap_ros.core.quaternion import xyzw_to_wxyz
from asap_ros.mocap.velocity import VelocityEstimator
from asap_ros.mocap.vicon import ViconSource
from asap_ros.ros.node_main import EXIT_FAILED, EXIT_OK, NodeBehaviour, run_node

__all__ = ["MOCAP_PARAMS", "NODE_NAME", "MocapNode", "PublishCounters", "main"]

NODE_NAME = MOCAP.name


@dataclass
class PublishCounters:
    """What the node published or dropped (reported on /diagnostics)."""

    poses: int = 0
    odometry: int = 0
    gaps: int = 0
    """Topic mode: intervals longer than max_gap_periods."""
    out_of_order: int = 0
    """Topic mode: inputs not newer than the previous one (dropped)."""
    invalid: int = 0
    """Inputs with a non-finite position or a zero quaternion (dropped)."""


def _time_msg(stamp_ns: int) -> Time:
    return Time(sec=stamp_ns // 1_000_000_000, nanosec=stamp_ns % 1_000_000_000)


def _stamp_ns(stamp: Any) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


class MocapNode(NodeBehaviour):
    """The ``asap_mocap`` node on one rclpy node; ``vicon_source`` replaces the SDK client (tests:
    the stand-in). Vicon mode connects at :meth:`start` and reads frames on a thread of its own."""

    def __init__(self, node: Any, params: Any, vicon_source: ViconSource | None = None):
        self.node = node
        self.params = params
        self.counters = PublishCounters()
        self.estimator = VelocityEstimator(self.params["velocity_filter_alpha"])
        self.error: Exception | None = None
        self._pose_pub = node.create_publisher(PoseStamped, "mocap/pose", 10)
        self._odom_pub = node.create_publisher(Odometry, "mocap/odometry", 10)
        self._diag_pub = node.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._poses_at_last_report = 0
        node.create_timer(1.0 / self.params["diagnostics_rate_hz"], self._publish_diagnostics)
        self.vicon: ViconSource | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_input_ns: int | None = None
        if self.params["mode"] == "vicon":
            self.vicon = vicon_source or ViconSource.from_sdk(
                self.params["host"], self.params["subject"], self._segment(), self.params.source
            )
        else:
            node.create_subscription(PoseStamped, "mocap/input", self._on_input, 10)

    def start(self) -> None:
        """Vicon mode: connect to the server and start reading frames."""
        if self.vicon is None:
            return
        self.vicon.open()
        self._thread = threading.Thread(target=self._vicon_loop, name="vicon", daemon=True)
        self._thread.start()

    def finished(self) -> bool:
        """The Vicon stream stopped on an error (the node then exits 1)."""
        return self.error is not None

    def shutdown(self) -> int:
        """Stop reading frames; 1 if the Vicon stream had stopped on an error."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        return EXIT_FAILED if self.error is not None else EXIT_OK

    def _segment(self) -> str:
        return self.params["segment"] or self.params["subject"]

    # -- vicon mode ----------------------------------------------------------------------
    def _vicon_loop(self) -> None:
        assert self.vicon is not None
        last_frame: int | None = None
        rate_checked = False
        try:
            while not self._stop.is_set():
                no_frame_before = self.vicon.counters.no_frame
                sample = self.vicon.read()
                if sample is None:
                    if self.vicon.counters.no_frame > no_frame_before:  # server not streaming: don't spin
                        self._stop.wait(1.0 / self.params["rate"])
                    continue
                if not rate_checked:
                    self._check_frame_rate(sample.frame_rate_hz)
                    rate_checked = True
                contiguous = last_frame is not None and sample.frame_number == last_frame + 1
                last_frame = sample.frame_number
                self._publish(
                    sample.capture_ns,
                    self.params["frame_id"],
                    sample.position_m,
                    sample.quat_wxyz,
                    1.0 / sample.frame_rate_hz if contiguous else None,
                )
        except Exception as exc:  # ends the node (finished); it publishes nothing more
            self.error = exc
            self.node.get_logger().error(f"Vicon stream stopped: {exc}")

    def _check_frame_rate(self, server_rate_hz: float) -> None:
        expected = self.params["rate"]
        if abs(server_rate_hz - expected) > 0.01 * expected:
            self.node.get_logger().warning(
                f"Vicon streams at {server_rate_hz:g} Hz, parameter rate is {expected:g} Hz: "
                "velocities use the server's rate"
            )

    # -- topic mode ----------------------------------------------------------------------
    def _on_input(self, msg: PoseStamped) -> None:
        stamp_ns = _stamp_ns(msg.header.stamp)
        p, o = msg.pose.position, msg.pose.orientation
        position = np.array([p.x, p.y, p.z])
        quat = xyzw_to_wxyz(np.array([o.x, o.y, o.z, o.w]))
        norm = float(np.linalg.norm(quat))
        if not (np.all(np.isfinite(position)) and np.isfinite(norm) and norm > 1e-6):
            self.counters.invalid += 1
            return
        dt_s = None
        if self._last_input_ns is not None:
            if stamp_ns <= self._last_input_ns:
                self.counters.out_of_order += 1
                return
            dt_s = (stamp_ns - self._last_input_ns) * 1e-9
            if dt_s > self.params["max_gap_periods"] / self.params["rate"]:
                self.counters.gaps += 1
                dt_s = None
        self._last_input_ns = stamp_ns
        self._publish(stamp_ns, msg.header.frame_id, position, quat / norm, dt_s)

    # -- output --------------------------------------------------------------------------
    def _publish(
        self, stamp_ns: int, frame_id: str, position: np.ndarray, quat_wxyz: np.ndarray, dt_s: float | None
    ) -> None:
        pose = PoseStamped()
        pose.header.stamp = _time_msg(stamp_ns)
        pose.header.frame_id = frame_id
        pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = (float(v) for v in position)
        o = pose.pose.orientation
        o.w, o.x, o.y, o.z = (float(v) for v in quat_wxyz)
        self._pose_pub.publish(pose)
        self.counters.poses += 1
        twist = self.estimator.update(position, quat_wxyz, dt_s)
        if twist is None:
            return
        odom = Odometry()
        odom.header = pose.header
        odom.child_frame_id = self.params["child_frame_id"]
        odom.pose.pose = pose.pose
        lin, ang = odom.twist.twist.linear, odom.twist.twist.angular
        lin.x, lin.y, lin.z = (float(v) for v in twist.linear_body)
        ang.x, ang.y, ang.z = (float(v) for v in twist.angular_body)
        self._odom_pub.publish(odom)
        self.counters.odometry += 1

    def counter_values(self) -> dict[str, int]:
        """Every counter of the node (and of the Vicon stream in vicon mode)."""
        values = dict(vars(self.counters), velocity_resets=self.estimator.resets)
        if self.vicon is not None:
            values.update({f"vicon_{k}": v for k, v in vars(self.vicon.counters).items()})
        return values

    def _publish_diagnostics(self) -> None:
        fresh = self.counters.poses > self._poses_at_last_report
        self._poses_at_last_report = self.counters.poses
        status = DiagnosticStatus(
            name=f"{NODE_NAME}: {self.params['mode']}",
            hardware_id=self.params["host"] if self.vicon is not None else "mocap/input",
            level=DiagnosticStatus.OK if fresh and self.error is None else DiagnosticStatus.WARN,
            message="tracking" if fresh else f"no pose since the last report{f' ({self.error})' if self.error else ''}",
            values=[KeyValue(key=k, value=str(v)) for k, v in self.counter_values().items()],
        )
        array = DiagnosticArray(status=[status])
        array.header.stamp = _time_msg(time.time_ns())
        self._diag_pub.publish(array)


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``asap_mocap``: exit 2 on bad parameters, 1 if the Vicon stream broke."""
    return run_node(MOCAP, __doc__.splitlines()[0], MocapNode, argv)


if __name__ == "__main__":
    sys.exit(main())
