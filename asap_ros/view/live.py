"""The live feed: what the robot and the runtime publish, read in this (separate) process.

DDS, on the robot's domain: the newest ``rt/lowstate`` (taken at the page's rate, never all
500 per second), every ``rt/asap/policy_step`` (mode, motion, phase, latency) and
``rt/asap/transition`` (fault reasons). ROS: ``mocap/pose`` (root pose), ``diagnostics``
(the recorder's status) and ``asap_deploy``'s latched ``~/fault``. Only readers and
subscriptions: nothing here writes to the robot or calls a service.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from asap_ros.view.reference import ReferencePoser
from asap_ros.view.snapshot import NO_VALUE, BodyPose, Snapshot, TimingWindow

MOCAP_FRESH_S = 0.5
"""Older mocap poses are not shown: the root falls back to the IMU orientation."""
RECORDER_STATUS = "asap_recorder"
DEPLOY_FAULT_TOPIC = "/asap_deploy/fault"


@dataclass(frozen=True)
class LiveTopics:
    domain: int
    interface: str
    mocap_topic: str = "mocap/pose"
    diagnostics_topic: str = "/diagnostics"
    ros_domain: int | None = None
    """ROS 2 domain id (``None``: ``$ROS_DOMAIN_ID``)."""


class _Steps:
    """Newest policy step and transition fields, and the timing window (DDS reader threads)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.timing = TimingWindow()
        self.mode = NO_VALUE
        self.motion = ""
        self.episode = 0
        self.phase: float | None = None
        self.fault = ""

    def on_step(self, payload: bytes, _stamp_ns: int, _writer: int) -> None:
        from asap_ros.runtime.step_topics import PolicyStep_

        step = PolicyStep_.deserialize(payload)
        with self.lock:
            self.timing.add(step.latency_ns, step.late)
            self.mode, self.motion, self.episode = step.mode, step.motion, int(step.episode)
            self.phase = float(step.phase) if step.motion_tick >= 0 else None

    def on_transition(self, payload: bytes, _stamp_ns: int, _writer: int) -> None:
        from asap_ros.runtime.step_topics import ModeTransition_

        transition = ModeTransition_.deserialize(payload)
        with self.lock:
            self.fault = transition.reason if transition.to_mode == "DAMPING" else ""

    def on_latched_fault(self, text: str) -> None:
        with self.lock:
            self.fault = text


class _RosInputs:
    """rclpy in its own context, spun on a thread: mocap, diagnostics, the latched fault."""

    def __init__(self, topics: LiveTopics, steps: _Steps) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import PoseStamped
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, qos_profile_sensor_data
        from std_msgs.msg import String

        self.context = rclpy.Context()
        rclpy.init(context=self.context, **({} if topics.ros_domain is None else {"domain_id": topics.ros_domain}))
        self.node = rclpy.create_node("asap_view", context=self.context)
        self.mocap: tuple[float, Any] | None = None
        self.recorder = "no status on diagnostics"
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.node.create_subscription(PoseStamped, topics.mocap_topic, self._on_mocap, qos_profile_sensor_data)
        self.node.create_subscription(DiagnosticArray, topics.diagnostics_topic, self._on_diagnostics, 10)
        self.node.create_subscription(String, DEPLOY_FAULT_TOPIC, lambda m: steps.on_latched_fault(m.data), latched)
        self._executor = SingleThreadedExecutor(context=self.context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, name="view-ros", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException

        try:
            while self.context.ok():
                self._executor.spin_once(timeout_sec=0.1)
        except ExternalShutdownException:
            pass  # close() shut the context down

    def _on_mocap(self, msg: Any) -> None:
        self.mocap = (time.monotonic(), msg.pose)

    def _on_diagnostics(self, msg: Any) -> None:
        for status in msg.status:
            if status.name == RECORDER_STATUS:
                level = {0: "", 1: "WARN: ", 2: "ERROR: "}.get(int.from_bytes(status.level, "little"), "")
                self.recorder = level + status.message

    def close(self) -> None:
        import rclpy

        rclpy.shutdown(context=self.context)
        self._thread.join(2.0)
        self._executor.shutdown()
        self.node.destroy_node()


class LiveFeed:
    """Everything the page shows, from the running system; :meth:`snapshot` any time."""

    def __init__(self, topics: LiveTopics, poser: ReferencePoser) -> None:
        from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowState_

        from asap_ros.runtime.dds import PolledReader, RawReader, init_channels
        from asap_ros.runtime.step_topics import POLICY_STEP_TOPIC, TRANSITION_TOPIC, ModeTransition_, PolicyStep_

        init_channels(topics.domain, topics.interface)
        self._poser = poser
        self._steps = _Steps()
        self._lowstate = PolledReader("rt/lowstate", LowState_)
        self._readers = [
            RawReader(POLICY_STEP_TOPIC, PolicyStep_, self._steps.on_step, depth=256),
            RawReader(TRANSITION_TOPIC, ModeTransition_, self._steps.on_transition),
        ]
        self._ros = _RosInputs(topics, self._steps)

    def _robot_pose(self, state: Any) -> tuple[BodyPose, str]:
        from asap_ros.config.robot_description import root_pose

        mocap, fresh = self._ros.mocap, None
        if mocap is not None and time.monotonic() - mocap[0] < MOCAP_FRESH_S:
            p, o = mocap[1].position, mocap[1].orientation
            fresh = ((p.x, p.y, p.z), (o.w, o.x, o.y, o.z))
        position, quat, source = root_pose(fresh, state.quat_wxyz)
        return BodyPose(position, quat, state.q), source

    def snapshot(self) -> Snapshot:
        from asap_ros.g1.codec import decode_lowstate_cdr

        payload, stamp_ns = self._lowstate.newest()
        state = decode_lowstate_cdr(payload, stamp_ns) if payload is not None else None
        robot, root_source = self._robot_pose(state) if state is not None else (None, NO_VALUE)
        s = self._steps
        with s.lock:
            mode, motion, episode, phase, fault = s.mode, s.motion, s.episode, s.phase, s.fault
            timing = s.timing.summary()
        reference = None
        if mode == "TRACKING" and motion and phase is not None:
            if not self._poser.aligned(episode, motion) and robot is not None:
                self._poser.align(episode, motion, robot)
            reference = self._poser.pose(episode, motion, phase)
        clock = "no LowState yet" if state is None else f"live; newest LowState {(time.time_ns() - stamp_ns) / 1e6:.0f} ms old"
        return Snapshot(
            robot=robot, root_source=root_source, reference=reference, mode=mode, fault=fault, motion=motion,
            episode=episode, phase=phase, temperature_c=None if state is None else state.temperature,
            timing=timing, recorder=self._ros.recorder, clock=clock,
        )  # fmt: skip

    def close(self) -> None:
        for reader in self._readers:
            reader.close()
        self._lowstate.close()
        self._ros.close()


def run_live(page: Any, feed: LiveFeed, rate_hz: float, stop: threading.Event) -> None:
    """Show a snapshot ``rate_hz`` times per second until ``stop`` is set."""
    period = 1.0 / rate_hz
    next_at = time.monotonic()
    while not stop.is_set():
        page.show(feed.snapshot())
        next_at += period
        stop.wait(max(0.0, next_at - time.monotonic()))
        next_at = max(next_at, time.monotonic() - period)
