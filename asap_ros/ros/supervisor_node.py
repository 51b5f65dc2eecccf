"""``asap_supervisor``: the e-stop that survives a crashed or hung ``asap_deploy``.

E-stop sources: the ``estop`` topic (std_msgs/Empty), the ``~/estop`` service
(std_srvs/Trigger), a button combo on the G1 wireless remote (``LowState.wireless_remote``)
and ENTER on an interactive terminal. Each reaches the deploy node twice, independently: in
the supervisor's next grant (state ESTOP, read by the deploy node's control thread every step)
and as a call of ``/<deploy_node>/estop``, retried every ``FORWARD_RETRY_S`` until acknowledged.

Exactly one process writes ``rt/lowcmd`` at any instant (:mod:`asap_ros.runtime.lease`): the
deploy node writes under a lease the supervisor grants beat by beat; the supervisor takes over,
streaming damping ``LowCmd`` (kp 0, the controller's damping kd, ``mode_machine`` from the
newest CRC-valid ``LowState``, CRC set), when

- the deploy process exits (same host: watched through a pidfd of the pid it announces on
  its latched ``~/process`` topic, so a ``kill -9`` is seen at once), or
- it has written ``rt/lowcmd`` and then nothing arrives for ``takeover_after_ms``, or
- after an e-stop, no LowCmd with kp 0 on every motor arrives within ``estop_obey_ms``,

and writes its first command only once the deploy node can no longer write (its lease has run
out, it acknowledged the takeover, or its process is gone) and a handover gap later. It hands
back only on ``~/reset`` while the deploy node is in PASSIVE or DAMPING. ``lowcmd_writes``
counts its writes (``~/lowcmd_writes``, latched), its state is on ``~/state`` (latched).
"""

from __future__ import annotations

import gc
import os
import select
import socket
import sys
import threading
import time
from typing import Any

from asap_ros.config.node_params import SUPERVISOR_PARAMS, load_defaults
from asap_ros.config.paths import config_file
from asap_ros.core.errors import AsapError
from asap_ros.core.remote import ComboDetector, decode_remote, parse_combo
from asap_ros.g1.codec import LowCmdEncoder, damping_command
from asap_ros.g1.crc import record_crc
from asap_ros.g1.layout import LOWCMD_TOPIC, LOWCMD_WIRE, LOWSTATE_TOPIC, LOWSTATE_WIRE
from asap_ros.ros.parameters import NodeParams
from asap_ros.runtime.arbitration import decode_beat, encode_grant
from asap_ros.runtime.lease import Grant, Supervision
from asap_ros.runtime.watchdog import Watchdog, lowcmd_is_damping

NODE_NAME = "asap_supervisor"
WATCHING = "WATCHING"
TAKEOVER = "TAKEOVER"


class SupervisorNode:
    """The supervisor's DDS readers/writers, ROS interface and watchdog thread."""

    IDLE_CHECK_NS = 50_000_000
    RECHECK_S = 0.01
    """Before taking over for silence, let this process's own DDS/ROS threads deliver anything
    queued while it was itself starved of CPU, then look again."""
    LOWSTATE_POLL_S = 0.01
    """The newest LowState (remote buttons, mode_machine) is read this often, not all 500 per
    second: a button press lasts far longer, and each sample costs Python time."""
    FORWARD_RETRY_S = 0.05
    """While an e-stop is not acknowledged by the deploy node, send it again this often."""
    FORWARD_TIMEOUT_S = 1.0
    """A forwarded e-stop call unanswered this long is taken as lost and sent again."""
    TAKEOVER_REPEAT_S = 0.1
    """During a takeover the TAKEOVER grant is sent again this often (deploy processes that start
    or resume meanwhile also get it as the topic's transient-local sample)."""

    def __init__(self, node: Any):
        from rclpy.qos import DurabilityPolicy, QoSProfile
        from std_msgs.msg import Empty, String, UInt64
        from std_srvs.srv import Trigger

        from asap_ros.config.controller import load_controller_config

        self.node = node
        self.params = NodeParams(node, SUPERVISOR_PARAMS,
                                 load_defaults(config_file("supervisor.yaml"), NODE_NAME, SUPERVISOR_PARAMS))
        p = self.params
        self._combo = ComboDetector(parse_combo(p["estop_combo"], p.source, "estop_combo"))
        self._damping = damping_command(load_controller_config(p["controller_config"] or None).damping_kd)
        self._encoder = LowCmdEncoder()
        self._period_s = 1.0 / p["damping_rate_hz"]
        self.watchdog = Watchdog(int(p["takeover_after_ms"] * 1e6), int(p["estop_obey_ms"] * 1e6),
                                 int(p["lease_ms"] * 1e6))
        self.state = WATCHING
        self.reason = ""
        self.estop_source = ""
        self.estops = 0
        """E-stops so far: each one latches DAMPING in the deploy node once (Grant.estop)."""
        self.lowcmd_writes = 0
        self._last_write_ns = 0
        self._mode_machine: int | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._forward_pending = False
        self._forward_future: Any = None
        self._forward_sent_s = 0.0

        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self._state_pub = node.create_publisher(String, "~/state", latched)
        self._writes_pub = node.create_publisher(UInt64, "~/lowcmd_writes", latched)
        deploy = p["deploy_node"].strip("/")
        self._deploy_estop = node.create_client(Trigger, f"/{deploy}/estop")
        node.create_subscription(String, f"/{deploy}/process", self._on_deploy_process, latched)
        node.create_subscription(Empty, "estop", lambda _msg: self.estop("estop topic"), 10)
        node.create_service(Trigger, "~/estop", self._on_estop_service)
        node.create_service(Trigger, "~/reset", self._on_reset_service)
        node.create_timer(0.1, self._publish_writes)
        self._published_writes = -1
        self._publish_state()
        self._open_channels(p["dds_domain"], p["network_interface"])
        self._thread = threading.Thread(target=self._run, name="asap-supervisor", daemon=True)
        self._robot_thread = threading.Thread(target=self._watch_robot, name="asap-robot-state", daemon=True)

    def _open_channels(self, domain: int, interface: str) -> None:
        """rt/lowcmd and grant writers (created now, so a takeover needs no discovery) and raw readers."""
        from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowCmd_, LowState_

        from asap_ros.runtime.arbitration import (
            BEAT_QOS,
            BEAT_TOPIC,
            GRANT_QOS,
            GRANT_TOPIC,
            DeployBeat_,
            SupervisorGrant_,
        )
        from asap_ros.runtime.dds import PolledReader, RawReader, RawWriter, init_channels

        init_channels(domain, interface)
        self._writer = RawWriter(LOWCMD_TOPIC, LowCmd_)
        self._grants = RawWriter(GRANT_TOPIC, SupervisorGrant_, GRANT_QOS)
        # raw bytes: the SDK's Python deserialiser would cost ~0.5 ms per LowState;
        # rt/lowcmd from other processes only: this process's own damping stream is not the deploy's
        self._lowstate = PolledReader(LOWSTATE_TOPIC, LowState_)
        self._lowcmd_reader = RawReader(LOWCMD_TOPIC, LowCmd_, self._on_lowcmd, ignore_local=True)
        self._beat_reader = RawReader(BEAT_TOPIC, DeployBeat_, self._on_beat, qos=BEAT_QOS)

    # --- inputs (DDS and executor threads) ---------------------------------------------
    def _watch_robot(self) -> None:
        """Every ``LOWSTATE_POLL_S``: the newest LowState, if new (its own thread)."""
        seen_ns = 0
        while not self._stop.wait(self.LOWSTATE_POLL_S):
            payload, stamp_ns = self._lowstate.newest()
            if payload is not None and stamp_ns != seen_ns:
                seen_ns = stamp_ns
                self._on_lowstate(payload)

    def _on_lowstate(self, payload: bytes) -> None:
        try:
            record = LOWSTATE_WIRE.from_cdr(payload)
        except ValueError:
            return  # malformed: like a bad CRC, never used
        if int(record["crc"]) != record_crc(record):
            return
        self._mode_machine = int(record["mode_machine"])
        if self._combo.update(decode_remote(record["wireless_remote"].tobytes())):
            self.estop(f"wireless remote {'+'.join(sorted(self._combo.combo))}")

    def _on_lowcmd(self, payload: bytes, _stamp_ns: int, _writer: int) -> None:
        try:
            damping = lowcmd_is_damping(LOWCMD_WIRE.from_cdr(payload))
        except ValueError:
            return  # malformed: not a command the robot would apply, so not a sign of life
        with self._lock:
            pending = bool(self.watchdog.estop_since_ns)
            self.watchdog.lowcmd_seen(time.monotonic_ns(), damping)
            confirmed = pending and not self.watchdog.estop_since_ns
        if confirmed:
            self.node.get_logger().info("e-stop confirmed: the deploy node sends damping")

    def _on_beat(self, payload: bytes, _stamp_ns: int, _writer: int) -> None:
        """Each beat of the deploy node's control loop is answered with a grant while watching."""
        try:
            beat = decode_beat(payload)
        except ValueError:
            return
        now = time.monotonic_ns()
        with self._lock:
            if not self.watchdog.beat_received(beat, now):
                return
            pending = bool(self.watchdog.estop_since_ns)
            state = Supervision.ESTOP if pending else Supervision.WATCHING
            self._send_grant(Grant(state, beat.session, beat.seq, self.watchdog.lease_ns,
                                   self.estop_source if pending else "", self.estops))
            self.watchdog.grant_sent(now)

    def _send_grant(self, grant: Grant) -> None:
        self._grants.write(encode_grant(grant))

    def _on_deploy_process(self, msg: Any) -> None:
        """``host:pid`` of a (re)started deploy process: watch it for exit when on this host."""
        host, _, pid = msg.data.rpartition(":")
        if host != socket.gethostname() or not pid.isdigit():
            return  # another machine: silence detection only
        try:
            pidfd = os.pidfd_open(int(pid))
        except OSError as exc:  # already gone, or no pidfd support
            self.node.get_logger().warning(f"cannot watch deploy process {pid}: {exc}")
            return
        self.node.get_logger().info(f"watching deploy process {pid} for exit")
        with self._lock:
            self.watchdog.new_deploy_process()
        threading.Thread(target=self._wait_exit, args=(pidfd, int(pid)), name="asap-deploy-exit", daemon=True).start()

    def _wait_exit(self, pidfd: int, pid: int) -> None:
        select.select([pidfd], [], [])  # readable once the process has exited
        os.close(pidfd)
        with self._lock:
            self.watchdog.exited = f"deploy process {pid} exited"
        self._wake.set()

    def _on_estop_service(self, _request: Any, response: Any) -> Any:
        forwarded = self.estop("~/estop service")
        target = self._deploy_estop.srv_name
        response.success = True
        response.message = (f"e-stop forwarded to {target}" if forwarded else f"{target} not reachable") + (
            f"; damping expected on rt/lowcmd within {self.params['estop_obey_ms']:g} ms, else the supervisor "
            f"streams it (supervisor {self.state})")
        return response

    def _on_reset_service(self, _request: Any, response: Any) -> Any:
        with self._lock:
            if self.state != TAKEOVER:
                response.success, response.message = True, "not streaming damping; nothing to reset"
                return response
            refusal = self.watchdog.release_refusal(time.monotonic_ns())
            if refusal is not None:
                response.success = False
                response.message = f"reset refused: {refusal}; damping continues"
                return response
            self.state, self.reason = WATCHING, ""
            self.watchdog.release(self._last_write_ns)
            self._forward_pending = False
            self._send_grant(Grant(Supervision.WATCHING, 0, 0, self.watchdog.lease_ns, "", self.estops))
        self._publish_state()
        response.success, response.message = True, "stopped streaming damping; the deploy node may write again"
        return response

    def estop(self, source: str) -> bool:
        """E-stop from any source: in the next grant and forwarded to the deploy node (True if it
        was reachable now; else retried until it acknowledges); damping must follow on rt/lowcmd
        within ``estop_obey_ms``."""
        self.node.get_logger().warning(f"e-stop from {source}")
        with self._lock:
            if self.state == TAKEOVER:
                return False  # already streaming damping; the takeover holds every deploy process
            self.watchdog.estop_requested(time.monotonic_ns())
            self.estop_source = f"e-stop from {source}"
            self.estops += 1
            self._forward_pending = True
        self._wake.set()
        return self._forward()

    def _forward(self) -> bool:
        """Call the deploy node's e-stop service unless a call is in flight; False if it is not
        discovered (yet)."""
        if not self._deploy_estop.service_is_ready():
            return False
        with self._lock:
            if self._forward_in_flight():
                return True
            self._forward_sent_s = time.monotonic()
            future = self._forward_future = self._deploy_estop.call_async(self._deploy_estop.srv_type.Request())
        future.add_done_callback(self._on_forward_done)  # may run at once: outside the lock
        return True

    def _forward_in_flight(self) -> bool:
        future = self._forward_future  # rclpy: a cancelled future is not done()
        return future is not None and not (future.done() or future.cancelled())

    def _on_forward_done(self, future: Any) -> None:
        response = future.result()
        if response is not None and response.success:
            with self._lock:
                self._forward_pending = False

    def _retry_forward(self) -> None:
        """Re-send an unacknowledged e-stop (watchdog thread, every ``FORWARD_RETRY_S``)."""
        if not self._forward_pending or self.state == TAKEOVER:
            return
        waited_s = time.monotonic() - self._forward_sent_s
        in_flight = self._forward_in_flight()
        if in_flight and waited_s >= self.FORWARD_TIMEOUT_S:
            self._forward_future.cancel()  # request or response lost: send again
            in_flight = False
        if not in_flight and waited_s >= self.FORWARD_RETRY_S:
            self._forward()

    # --- watchdog thread -----------------------------------------------------------------
    def start(self) -> None:
        """Start the watchdog and robot-state threads; start-up objects are frozen out of garbage
        collection (as in :meth:`asap_ros.runtime.control_loop.ControlLoop.start`) so no collection
        stalls a takeover."""
        gc.freeze()
        self._thread.start()
        self._robot_thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(2.0)
        self._robot_thread.join(2.0)
        for endpoint in (self._beat_reader, self._lowcmd_reader, self._lowstate):
            endpoint.close()

    def _run(self) -> None:
        repeat_at = 0.0
        while not self._stop.is_set():
            self._retry_forward()
            if self.state == TAKEOVER:
                if time.monotonic() >= repeat_at:
                    repeat_at = time.monotonic() + self.TAKEOVER_REPEAT_S
                    self._send_grant(Grant(Supervision.TAKEOVER, 0, 0, self.watchdog.lease_ns, self.reason))
                with self._lock:
                    first_write_ns = self.watchdog.first_write_ns()
                if time.monotonic_ns() >= first_write_ns:
                    self._write_damping()
                    self._stop.wait(self._period_s)
                else:  # the deploy node may still write: wait for its lease to run out, or its word
                    self._stop.wait(min(self._period_s, (first_write_ns - time.monotonic_ns()) / 1e9))
                continue
            now = time.monotonic_ns()
            with self._lock:
                reason = self.watchdog.due_reason(now)
                next_ns = self.watchdog.next_check_ns(now, self.IDLE_CHECK_NS)
            if reason is not None and not self.watchdog.exited:
                self._stop.wait(self.RECHECK_S)
                with self._lock:
                    reason = self.watchdog.due_reason(time.monotonic_ns())
            if reason is not None:
                self._take_over(reason)
                repeat_at = time.monotonic() + self.TAKEOVER_REPEAT_S
                continue
            timeout_s = max(0.0, (next_ns - time.monotonic_ns()) / 1e9)
            self._wake.wait(min(timeout_s, self.FORWARD_RETRY_S) if self._forward_pending else timeout_s)
            self._wake.clear()

    def _take_over(self, reason: str) -> None:
        """Stop granting and tell every deploy process, before anything slow (logging)."""
        with self._lock:
            self.state, self.reason = TAKEOVER, reason
            self.watchdog.take_over()
            self._forward_pending = False  # the TAKEOVER grant holds every deploy process
        self._send_grant(Grant(Supervision.TAKEOVER, 0, 0, self.watchdog.lease_ns, reason))
        self.node.get_logger().error(f"taking over rt/lowcmd with damping: {reason}")
        self._publish_state()

    def _write_damping(self) -> None:
        if self._mode_machine is None:
            return  # never heard the robot: a LowCmd needs its mode_machine
        self._writer.write(self._encoder.encode_cdr(self._damping, self._mode_machine))
        self._last_write_ns = time.monotonic_ns()
        self.lowcmd_writes += 1

    # --- outputs ---------------------------------------------------------------------------
    def _publish_state(self) -> None:
        from std_msgs.msg import String

        self._state_pub.publish(String(data=f"{self.state}: {self.reason}" if self.reason else self.state))

    def _publish_writes(self) -> None:
        from std_msgs.msg import UInt64

        if self.lowcmd_writes != self._published_writes:
            self._published_writes = self.lowcmd_writes
            self._writes_pub.publish(UInt64(data=self._published_writes))


def watch_terminal(supervisor: SupervisorNode) -> None:
    """E-stop on every ENTER typed on an interactive stdin (runs on a daemon thread)."""
    print("asap_supervisor: press ENTER to e-stop", file=sys.stderr, flush=True)
    for _line in sys.stdin:
        supervisor.estop("terminal")


def main(argv: list[str] | None = None) -> int:
    """Console script ``asap_supervisor``."""
    import rclpy
    from rclpy.executors import ExternalShutdownException

    rclpy.init(args=argv)
    node = rclpy.create_node(NODE_NAME)
    try:
        supervisor = SupervisorNode(node)
    except AsapError as exc:
        print(f"{NODE_NAME}: refusing to start: {exc}", file=sys.stderr)
        node.destroy_node()
        rclpy.try_shutdown()
        return 2
    supervisor.start()
    if supervisor.params["terminal_estop"] and sys.stdin is not None and sys.stdin.isatty():
        threading.Thread(target=watch_terminal, args=(supervisor,), name="asap-terminal", daemon=True).start()
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        supervisor.stop()
        print(f"{NODE_NAME}: {supervisor.lowcmd_writes} rt/lowcmd writes", file=sys.stderr)
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
