"""Stand-in for the G1 and the ASAP runtime, for the recording tests: publishes a session
whose every value is known.

The benchmark (``benchmarks/record_session.py``) records the real simulated robot and runtime;
their values cannot be predicted, so the exact round trip through a bag is checked with this
stand-in: real ``unitree_hg`` ``LowState_`` and ``LowCmd_`` samples on DDS
``rt/lowstate``/``rt/lowcmd`` (XCDR1 through :class:`asap_ros.runtime.dds.RawWriter`),
``PolicyStep_``/``ModeTransition_`` through :class:`asap_ros.runtime.step_topics.PolicyStepPublisher`, and
over rclpy ``mocap/pose``, ``mocap/odometry`` and ``diagnostics``. Every value is a function of
the message's index (see the ``expected_*`` helpers), so a reader can check each recorded
message exactly. The transitions make two episodes: one ended by HOLD, one by an e-stop (DAMPING).

    python -m asap_ros.testing.session_publisher --domain 7 --duration 20 --counts counts.json

It waits until every topic has a subscriber and the recorder says it received a burst of probes
on ``/diagnostics`` (see :meth:`SessionPublisher.confirm_diagnostics_delivery`), prints
``publishing``, publishes for ``--duration`` seconds on absolute deadlines, then writes what it
published per bag topic to ``--counts`` (JSON).
"""

from __future__ import annotations

import argparse
import heapq
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

NUM_DRIVEN = 23
OBS_DIM = 380
ODOMETRY_HZ = 100.0
DIAGNOSTICS_HZ = 2.0
STAND_IN_NAME = "session_publisher"
PROBE_NAME = f"{STAND_IN_NAME} probe"
PROBE_BURST = 20
"""Probes a delivery check sends at once: far more than the recorder's own statuses (1 Hz) add
to its ``/diagnostics`` count while the check waits."""
PROBE_WAIT_S = 3.0
MOTION = "kick_level1"
TRANSITIONS = (  # (fraction of the duration, from, to, reason)
    (0.05, "PASSIVE", "STAND_UP", "operator stand"),
    (0.10, "STAND_UP", "HOLD", "stand-up done"),
    (0.15, "HOLD", "PREPARE", "operator start"),
    (0.25, "PREPARE", "TRACKING", "prepare done"),
    (0.50, "TRACKING", "HOLD", "motion finished"),
    (0.55, "HOLD", "PREPARE", "operator start"),
    (0.60, "PREPARE", "TRACKING", "prepare done"),
    (0.80, "TRACKING", "DAMPING", "operator e-stop"),
)


def expected_motor_q(tick: int) -> np.ndarray:
    """float32[29] ``motor_state[:29].q`` of LowState ``tick`` (and ``motor_cmd[:29].q`` of LowCmd ``tick``)."""
    return (np.arange(29, dtype=np.float64) * 0.01 + tick * 1e-4).astype(np.float32)


def expected_obs(control_tick: int) -> np.ndarray:
    return (np.arange(OBS_DIM, dtype=np.float64) * 1e-3 + control_tick).astype(np.float32)


def expected_raw_action(control_tick: int) -> np.ndarray:
    return (np.arange(NUM_DRIVEN, dtype=np.float64) - control_tick * 1e-2).astype(np.float32)


def expected_q_target(control_tick: int) -> np.ndarray:
    return (np.arange(29, dtype=np.float64) * -0.1 + control_tick * 1e-3).astype(np.float32)


def expected_pose_x(index: int) -> float:
    return index * 1e-3


class SessionPublisher:
    """All writers of the stand-in session; ``counts`` holds what was published per bag topic."""

    def __init__(self) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import PoseStamped
        from nav_msgs.msg import Odometry
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowCmd_, LowState_

        from asap_ros.g1.crc import record_crc
        from asap_ros.g1.layout import LOWCMD_LAYOUT, LOWCMD_WIRE, LOWSTATE_LAYOUT, LOWSTATE_WIRE
        from asap_ros.runtime.dds import RawWriter
        from asap_ros.runtime.step_topics import PolicyStepPublisher

        self._wire = {"lowstate": LOWSTATE_WIRE, "lowcmd": LOWCMD_WIRE}
        self._crc = record_crc
        self.lowstate = np.zeros((), dtype=LOWSTATE_LAYOUT)
        self.lowstate["version"] = (1, 7)
        self.lowstate["mode_machine"] = 5
        self.lowstate["imu_state"]["quaternion"] = (1, 0, 0, 0)
        self.lowcmd = np.zeros((), dtype=LOWCMD_LAYOUT)
        self.lowcmd["mode_machine"] = 5
        self.lowcmd["motor_cmd"]["mode"][:29] = 1
        self.dds = {"lowstate": RawWriter("rt/lowstate", LowState_), "lowcmd": RawWriter("rt/lowcmd", LowCmd_)}
        self.steps = PolicyStepPublisher()
        self.node = rclpy.create_node(STAND_IN_NAME)
        self._qos = qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        self.ros = {
            "pose": self.node.create_publisher(PoseStamped, "mocap/pose", qos),
            "odometry": self.node.create_publisher(Odometry, "mocap/odometry", qos),
            "diagnostics": self.node.create_publisher(DiagnosticArray, "/diagnostics", qos),
        }
        self._recorder_counts: list[int] = []
        self.diagnostics_attempts = 0
        self.counts = dict.fromkeys(
            ["/lowstate", "/lowcmd", "/asap/policy_step", "/asap/transition", "/mocap/pose", "/mocap/odometry", "/diagnostics"], 0
        )
        self.mode = "PASSIVE"
        self.episode = 0
        self.motion_start_tick = 0

    def wait_for_subscribers(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            dds_ok = all(w.matched() for w in self.dds.values()) and self.steps.matched_readers()
            if dds_ok and all(p.get_subscription_count() for p in self.ros.values()):
                time.sleep(0.5)  # let the remaining discovery (transition topic) settle
                return
            time.sleep(0.05)
        raise SystemExit(f"{STAND_IN_NAME}: no recorder subscribed within {timeout_s} s")

    def _listen_to_recorder(self) -> Any:
        from diagnostic_msgs.msg import DiagnosticArray

        from asap_ros.recording.ros_bridge import STATUS_NAME
        from asap_ros.recording.topics import DIAGNOSTICS

        key = f"count {DIAGNOSTICS}"  # the recorder's per-topic count (RecorderStatus.key_values)

        def on_status(msg: DiagnosticArray) -> None:
            for status in msg.status:
                counts = [int(v.value) for v in status.values if v.key == key]
                if status.name == STATUS_NAME and counts:
                    self._recorder_counts.append(counts[0])

        return self.node.create_subscription(DiagnosticArray, "/diagnostics", on_status, self._qos)

    def _recorder_count(self, above: int, timeout_s: float) -> int | None:
        """The first ``/diagnostics`` count above ``above`` that the recorder reports within ``timeout_s``."""
        import rclpy

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            rclpy.spin_once(self.node, timeout_sec=0.05)
            newer = [n for n in self._recorder_counts if n > above]
            if newer:
                return newer[0]
        return None

    def confirm_diagnostics_delivery(self, timeout_s: float) -> None:
        """Wait until the recorder's status counts a burst of probes on ``/diagnostics``.

        A matched subscription does not prove delivery: on this machine Fast DDS sometimes matched
        the recorder's ``/diagnostics`` reader and delivered none of the session's 40 messages
        (CI, after other modules had run). The recorder's own status (1 Hz) counts what it
        received per topic; a burst of ``PROBE_BURST`` probes (status ``PROBE_NAME``, recorded
        like any message) must raise that count by at least the burst. Until it does, the
        ``/diagnostics`` publisher and listener are made anew (new DDS endpoints, discovered
        afresh); ``diagnostics_attempts`` says how many tries it took.
        """
        from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus

        listener = self._listen_to_recorder()  # after wait_for_subscribers: it would count as one
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.diagnostics_attempts += 1
            self._recorder_counts.clear()
            baseline = self._recorder_count(-1, PROBE_WAIT_S)
            if baseline is not None:
                for index in range(PROBE_BURST):
                    self.ros["diagnostics"].publish(
                        DiagnosticArray(status=[DiagnosticStatus(name=PROBE_NAME, message=str(index))]))
                if self._recorder_count(baseline + PROBE_BURST - 1, PROBE_WAIT_S) is not None:
                    return
            print(f"{STAND_IN_NAME}: /diagnostics probes not confirmed by the recorder (try "
                  f"{self.diagnostics_attempts}); new /diagnostics endpoints", file=sys.stderr, flush=True)
            self.node.destroy_publisher(self.ros["diagnostics"])
            self.node.destroy_subscription(listener)
            self.ros["diagnostics"] = self.node.create_publisher(DiagnosticArray, "/diagnostics", self._qos)
            listener = self._listen_to_recorder()
            time.sleep(0.5)
        raise SystemExit(f"{STAND_IN_NAME}: the recorder confirmed no /diagnostics probe within {timeout_s} s")

    def subscribers(self) -> dict[str, int]:
        """Matched readers per writer now (for diagnosing a recording that misses a topic)."""
        counts = {f"rt/{name}": writer.matched() for name, writer in self.dds.items()}
        counts["rt/asap/policy_step"] = self.steps.matched_readers()
        counts.update({name: publisher.get_subscription_count() for name, publisher in self.ros.items()})
        return counts

    def publish_lowstate(self, tick: int) -> None:
        rec = self.lowstate
        rec["tick"] = tick
        rec["motor_state"]["q"][:29] = expected_motor_q(tick)
        rec["crc"] = self._crc(rec)
        self.dds["lowstate"].write(self._wire["lowstate"].to_cdr(rec))
        self.counts["/lowstate"] += 1

    def publish_lowcmd(self, tick: int) -> None:
        rec = self.lowcmd
        rec["motor_cmd"]["q"][:29] = expected_motor_q(tick)
        rec["crc"] = self._crc(rec)
        self.dds["lowcmd"].write(self._wire["lowcmd"].to_cdr(rec))
        self.counts["/lowcmd"] += 1

    def publish_step(self, control_tick: int, now_ns: int) -> None:
        tracking = self.mode == "TRACKING"
        motion_tick = control_tick - self.motion_start_tick if tracking else -1
        self.steps.publish_step(
            stamp_ns=now_ns, control_tick=control_tick, mode=self.mode, motion=MOTION if tracking else "",
            episode=self.episode, motion_tick=motion_tick, phase=max(motion_tick, 0) * 0.01,
            lowstate_tick=control_tick * 10, lowstate_stamp_ns=now_ns - 3_000_000,
            mocap_stamp_ns=now_ns - 5_000_000, obs=expected_obs(control_tick),
            raw_action=expected_raw_action(control_tick), q_target=expected_q_target(control_tick),
            compute_ns=1_000_000, latency_ns=3_000_000, late=control_tick % 97 == 0,
        )
        self.counts["/asap/policy_step"] += 1

    def publish_transition(self, from_mode: str, to_mode: str, reason: str, now_ns: int, control_tick: int) -> None:
        if to_mode == "TRACKING":
            self.episode += 1
            self.motion_start_tick = control_tick
        self.mode = to_mode
        self.steps.publish_transition(stamp_ns=now_ns, from_mode=from_mode, to_mode=to_mode, reason=reason,
                                      motion=MOTION if "TRACKING" in (from_mode, to_mode) else "")
        self.counts["/asap/transition"] += 1

    def publish_mocap(self, index: int, now_ns: int) -> None:
        from geometry_msgs.msg import PoseStamped

        msg = PoseStamped()
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(now_ns, 1_000_000_000)
        msg.header.frame_id = "world"
        msg.pose.position.x = expected_pose_x(index)
        msg.pose.orientation.w = 1.0
        self.ros["pose"].publish(msg)
        self.counts["/mocap/pose"] += 1

    def publish_odometry(self, index: int, now_ns: int) -> None:
        from nav_msgs.msg import Odometry

        msg = Odometry()
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(now_ns, 1_000_000_000)
        msg.pose.pose.position.x = expected_pose_x(index)
        self.ros["odometry"].publish(msg)
        self.counts["/mocap/odometry"] += 1

    def publish_diagnostics(self, index: int) -> None:
        from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus

        msg = DiagnosticArray(status=[DiagnosticStatus(name=STAND_IN_NAME, message=str(index))])
        self.ros["diagnostics"].publish(msg)
        self.counts["/diagnostics"] += 1

    def close(self) -> None:
        for writer in self.dds.values():
            writer.close()
        self.steps.close()
        self.node.destroy_node()


def run(pub: SessionPublisher, duration_s: float, lowstate_hz: float, policy_hz: float, mocap_hz: float) -> None:
    """Publish every stream on its own absolute schedule for ``duration_s``."""
    start = time.monotonic()
    transitions = list(TRANSITIONS)
    streams = {"lowstate": lowstate_hz, "step": policy_hz, "mocap": mocap_hz,
               "odometry": ODOMETRY_HZ, "diagnostics": DIAGNOSTICS_HZ}
    events = [(start, name, 0) for name in streams]
    heapq.heapify(events)
    control_tick = 0
    while events:
        due, name, index = heapq.heappop(events)
        if due - start >= duration_s:
            continue
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        now_ns = time.time_ns()
        if name == "lowstate":
            pub.publish_lowstate(index)
            pub.publish_lowcmd(index)
        elif name == "step":
            control_tick = index
            while transitions and (due - start) >= transitions[0][0] * duration_s:
                _, from_mode, to_mode, reason = transitions.pop(0)
                pub.publish_transition(from_mode, to_mode, reason, now_ns, control_tick)
            pub.publish_step(control_tick, now_ns)
        elif name == "mocap":
            pub.publish_mocap(index, now_ns)
        elif name == "odometry":
            pub.publish_odometry(index, now_ns)
        else:
            pub.publish_diagnostics(index)
        heapq.heappush(events, (start + (index + 1) / streams[name], name, index + 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domain", type=int, required=True, help="DDS domain (also set ROS_DOMAIN_ID)")
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--lowstate-hz", type=float, default=500.0)
    parser.add_argument("--policy-hz", type=float, default=50.0)
    parser.add_argument("--mocap-hz", type=float, default=200.0)
    parser.add_argument("--wait", type=float, default=30.0, help="longest wait for the recorder's subscriptions")
    parser.add_argument("--counts", type=Path, required=True, help="JSON file for the published counts")
    args = parser.parse_args(argv)

    import rclpy

    from asap_ros.runtime.dds import init_channels

    init_channels(args.domain, "lo")
    rclpy.init()
    pub = SessionPublisher()
    try:
        pub.wait_for_subscribers(args.wait)
        pub.confirm_diagnostics_delivery(args.wait)
        print("publishing", flush=True)
        started = time.monotonic()
        run(pub, args.duration, args.lowstate_hz, args.policy_hz, args.mocap_hz)
        elapsed = time.monotonic() - started
        time.sleep(0.5)  # let reliable writers deliver the last samples
        args.counts.write_text(json.dumps({"counts": pub.counts, "elapsed_s": elapsed, "subscribers": pub.subscribers(),
                                           "diagnostics_attempts": pub.diagnostics_attempts}))
        print(json.dumps(pub.counts), flush=True)
    finally:
        pub.close()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
