"""Simulated motion capture: the pelvis pose as ``geometry_msgs/msg/PoseStamped`` via rclpy.

Captures at ``rate_hz`` on its own thread from the newest physics pose, adds position and
orientation noise, loses samples with probability ``dropout`` and publishes each one
``latency_ms`` after capture with the header stamp = capture time (system clock). The
publisher is created with the stream, before :meth:`MocapStream.start`, so subscribers can be
discovered before the first pose; rclpy is imported only when a stream is created, so the
simulator runs without it when mocap is off.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from asap_ros.runtime.scheduling import run_realtime
from asap_ros.sim.config import MocapConfig
from asap_ros.sim.rotations import perturb_quat

PoseSource = Callable[[], tuple[np.ndarray, np.ndarray]]
"""Returns the newest true pelvis ``(position, quaternion wxyz)``."""


class MocapStream:
    def __init__(self, config: MocapConfig, domain: int, pose_source: PoseSource, rng: np.random.Generator,
                 realtime_priority: int = 0):
        """``realtime_priority`` > 0: the stream's thread under SCHED_FIFO (it takes the GIL the
        physics thread needs: below the physics, never preempted by ordinary work while it holds it)."""
        import rclpy
        from geometry_msgs.msg import PoseStamped
        from rclpy.signals import SignalHandlerOptions

        self.config = config
        self.domain = domain
        self._pose_source = pose_source
        self._rng = rng
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._priority = realtime_priority
        self.scheduling_note: str | None = None
        self._pose_type = PoseStamped
        self._context: Any = rclpy.Context()
        rclpy.init(context=self._context, domain_id=domain, signal_handler_options=SignalHandlerOptions.NO)
        self._node: Any = rclpy.create_node("asap_sim_mocap", context=self._context)
        self._publisher = self._node.create_publisher(PoseStamped, config.topic, 10)
        self.captured = 0
        self.published = 0
        self.dropped = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="asap-sim-mocap", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop publishing and remove the node (idempotent; also for a stream never started)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)
        if self._node is not None:
            self._node.destroy_node()
            self._context.try_shutdown()
            self._node = None

    def subscribers(self) -> int:
        """Subscriptions matched with the pose publisher now."""
        return self._publisher.get_subscription_count()

    def stats(self) -> dict[str, int]:
        return {"captured": self.captured, "published": self.published, "dropped": self.dropped}

    def _run(self) -> None:
        self.scheduling_note = run_realtime(self._priority)
        period_ns = int(round(1e9 / self.config.rate_hz))
        latency_ns = int(round(self.config.latency_ms * 1e6))
        pending: collections.deque[tuple[int, Any]] = collections.deque()
        next_capture = time.monotonic_ns()
        while not self._stop.is_set():
            now = time.monotonic_ns()
            if now >= next_capture:
                self._capture(latency_ns, pending)
                next_capture += period_ns
                if now - next_capture > period_ns:  # fell behind: keep the grid, skip missed frames
                    next_capture += (now - next_capture) // period_ns * period_ns
            while pending and pending[0][0] <= now:
                self._publisher.publish(pending.popleft()[1])
                self.published += 1
            wake = min(next_capture, pending[0][0]) if pending else next_capture
            self._stop.wait(max(0.0, (wake - time.monotonic_ns()) / 1e9))

    def _capture(self, latency_ns: int, pending: collections.deque) -> None:
        stamp_ns = time.time_ns()
        publish_at_ns = time.monotonic_ns() + latency_ns  # read after the stamp: never early
        position, quat = self._pose_source()
        self.captured += 1
        if self.config.dropout and self._rng.random() < self.config.dropout:
            self.dropped += 1
            return
        if self.config.position_noise_m:
            position = position + self._rng.normal(0.0, self.config.position_noise_m, 3)
        quat = perturb_quat(quat, self.config.orientation_noise_rad, self._rng)
        msg = self._pose_type()
        msg.header.frame_id = self.config.frame_id
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
        p, o = msg.pose.position, msg.pose.orientation
        p.x, p.y, p.z = (float(v) for v in position)
        o.w, o.x, o.y, o.z = (float(v) for v in quat)
        pending.append((publish_at_ns, msg))
