"""Simulated motion capture: the pelvis pose as ``geometry_msgs/msg/PoseStamped`` on DDS.

Captures at ``rate_hz`` on its own thread from the newest physics pose, adds position and
orientation noise, loses samples with probability ``dropout`` and publishes each one
``latency_ms`` after capture with the header stamp = capture time (system clock). The pose goes
out through the simulator's Cyclone DDS participant on the ROS 2 topic's DDS name
(``mocap/pose`` -> ``rt/mocap/pose``), where rclpy subscriptions and the deploy node's reader
find it as they find a Vicon bridge's. No rclpy in the simulator: its publish holds the GIL
the physics thread needs, for up to 340 ms at a time under Jazzy's rclpy 7.1.6 (Fast DDS).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable

import numpy as np
from cyclonedds.core import Policy
from cyclonedds.qos import Qos
from cyclonedds.util import duration
from unitree_sdk2py.idl.builtin_interfaces.msg.dds_ import Time_
from unitree_sdk2py.idl.geometry_msgs.msg.dds_ import Point_, Pose_, PoseStamped_, Quaternion_
from unitree_sdk2py.idl.std_msgs.msg.dds_ import Header_

from asap_ros.runtime.dds import RawWriter
from asap_ros.runtime.mocap import root_dds_topic
from asap_ros.runtime.scheduling import half_a_period_off, run_realtime
from asap_ros.sim.config import MocapConfig
from asap_ros.sim.rotations import perturb_quat

PoseSource = Callable[[], tuple[np.ndarray, np.ndarray]]
"""Returns the newest true pelvis ``(position, quaternion wxyz)``."""

HISTORY_DEPTH = 10
"""Poses the writer keeps for a reliable reader's repair: rclpy's default depth."""


def pose_cdr(stamp_ns: int, frame_id: str, position: np.ndarray, quat_wxyz: np.ndarray) -> bytes:
    """One ``geometry_msgs/msg/PoseStamped`` serialised as XCDR1 (with its encapsulation header)."""
    sec, nanosec = divmod(stamp_ns, 1_000_000_000)
    w, x, y, z = (float(v) for v in quat_wxyz)
    point = Point_(*(float(v) for v in position))
    return PoseStamped_(Header_(Time_(sec, nanosec), frame_id), Pose_(point, Quaternion_(x, y, z, w))).serialize()


class MocapStream:
    """The simulated Vicon: :meth:`open` (after :func:`~asap_ros.runtime.dds.init_channels`)
    creates the writer, so subscriptions can be matched before :meth:`start` sends the first pose."""

    def __init__(self, config: MocapConfig, pose_source: PoseSource, rng: np.random.Generator,
                 realtime_priority: int = 0):
        """``realtime_priority`` > 0: the stream's thread under SCHED_FIFO (it takes the GIL the
        physics thread needs: below the physics, never preempted by ordinary work while it holds it)."""
        self.config = config
        self.topic = root_dds_topic(config.topic)
        self._pose_source = pose_source
        self._rng = rng
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._priority = realtime_priority
        self.scheduling_note: str | None = None
        self._writer: RawWriter | None = None
        self.captured = 0
        self.published = 0
        self.dropped = 0

    def open(self) -> None:
        """Create the pose writer, idempotent: reliable, keeping the last :data:`HISTORY_DEPTH`
        poses (a keep-last writer drops older unacknowledged ones rather than block a write)."""
        if self._writer is None:
            qos = Qos(Policy.Reliability.Reliable(duration(milliseconds=100)), Policy.History.KeepLast(HISTORY_DEPTH))
            self._writer = RawWriter(self.topic, PoseStamped_, qos=qos)

    def start(self) -> None:
        self.open()
        self._thread = threading.Thread(target=self._run, name="asap-sim-mocap", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop publishing and close the writer (idempotent; also for a stream never started)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def subscribers(self) -> int:
        """Subscriptions matched with the pose writer now (0 before :meth:`open`)."""
        return self._writer.matched() if self._writer is not None else 0

    def stats(self) -> dict[str, int]:
        return {"captured": self.captured, "published": self.published, "dropped": self.dropped}

    def _run(self) -> None:
        assert self._writer is not None
        self.scheduling_note = run_realtime(self._priority)
        period_ns = int(round(1e9 / self.config.rate_hz))
        latency_ns = int(round(self.config.latency_ms * 1e6))
        pending: collections.deque[tuple[int, bytes]] = collections.deque()
        # half a period off the grid, as the supervisor's threads: at 200 Hz (5 ms) its captures, and
        # with a latency of whole periods its publishes, keep 2.5 ms off the control loop's deadlines
        next_capture = half_a_period_off(time.monotonic_ns(), period_ns)
        while not self._stop.is_set():
            now = time.monotonic_ns()
            if now >= next_capture:
                self._capture(latency_ns, pending)
                next_capture += period_ns
                if now - next_capture > period_ns:  # fell behind: keep the grid, skip missed frames
                    next_capture += (now - next_capture) // period_ns * period_ns
            while pending and pending[0][0] <= now:
                self._writer.write(pending.popleft()[1])
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
        pending.append((publish_at_ns, pose_cdr(stamp_ns, self.config.frame_id, position, quat)))
