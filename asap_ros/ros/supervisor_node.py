"""``asap_supervisor``: the e-stop that survives a crashed or hung ``asap_deploy``.

E-stop sources: the ``estop`` topic (std_msgs/Empty), the ``~/estop`` service
(std_srvs/Trigger), a button combo on the G1 wireless remote (``LowState.wireless_remote``)
and ENTER on an interactive terminal. Each is forwarded to ``/<deploy_node>/estop``, and the
forward is retried every ``FORWARD_RETRY_S`` until the deploy node acknowledges it (a service
not yet discovered, or a lost request, only delays it).

The supervisor watches ``rt/lowcmd`` (unitree DDS) and the deploy node's ``~/heartbeat``.
It takes over, streaming damping ``LowCmd`` (kp 0, the controller's damping kd,
``mode_machine`` from the newest CRC-valid ``LowState``, CRC set) to ``rt/lowcmd`` until
``~/reset``, when

- the deploy process exits (same host: watched through a pidfd of the pid it announces on
  its latched ``~/process`` topic, so a ``kill -9`` is seen at once), or
- it has heard from the deploy node and then neither a LowCmd nor a heartbeat arrives for
  ``takeover_after_ms`` (process hung or starved), or
- after an e-stop, no LowCmd with kp 0 on every motor arrives within ``estop_obey_ms``.

While the deploy node is healthy it never writes: ``lowcmd_writes`` counts every write and is
published on ``~/lowcmd_writes`` (latched) with the state on ``~/state`` (latched).
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

from asap_ros.errors import AsapError
from asap_ros.g1 import LOWCMD_WIRE, LOWSTATE_WIRE, LowCmdEncoder, damping_command, record_crc
from asap_ros.paths import config_file
from asap_ros.remote import ComboDetector, decode_remote, parse_combo
from asap_ros.ros.params import SUPERVISOR_PARAMS, NodeParams, help_requested, load_defaults
from asap_ros.state import NUM_MOTORS

NODE_NAME = "asap_supervisor"
WATCHING = "WATCHING"
TAKEOVER = "TAKEOVER"


def lowcmd_is_damping(record: Any) -> bool:
    """A C-layout LowCmd record that applies no position stiffness (kp 0 on every G1 motor)."""
    return not record["motor_cmd"]["kp"][:NUM_MOTORS].any()


class Watchdog:
    """The takeover decision (pure timing logic, clock passed in; no I/O).

    ``deploy_seen`` / ``estop_requested`` / ``damping_seen`` are fed by the DDS and ROS
    callbacks; :meth:`due_reason` says whether to take over now, :meth:`next_check_ns` when
    to look again.
    """

    ARM_AFTER_NS = 1_000_000_000
    """Silence counts only once a deploy process has been heard this long (start-up stalls)."""

    def __init__(self, takeover_after_ns: int, estop_obey_ns: int):
        self.takeover_after_ns = takeover_after_ns
        self.estop_obey_ns = estop_obey_ns
        self.first_deploy_ns = 0
        """First LowCmd or heartbeat of the current deploy process (0 = not heard yet)."""
        self.last_deploy_ns = 0
        """Newest LowCmd or heartbeat from the deploy node (0 = never heard from it)."""
        self.estop_since_ns = 0
        """When an unconfirmed e-stop was requested (0 = none pending)."""
        self.exited: str | None = None
        """Set when the deploy process was seen to exit (same host only)."""

    def deploy_seen(self, now_ns: int) -> None:
        self.first_deploy_ns = self.first_deploy_ns or now_ns
        self.last_deploy_ns = max(self.last_deploy_ns, now_ns)

    def new_deploy_process(self) -> None:
        """A (re)started deploy process announced itself: its start-up is not silence yet."""
        self.exited = None
        self.first_deploy_ns = 0

    def estop_requested(self, now_ns: int) -> None:
        if not self.estop_since_ns:
            self.estop_since_ns = now_ns

    def damping_seen(self, now_ns: int) -> None:
        if self.estop_since_ns and now_ns >= self.estop_since_ns:
            self.estop_since_ns = 0

    def deploy_alive(self, now_ns: int) -> bool:
        """Heard from the deploy node within ``takeover_after_ns``."""
        return bool(self.last_deploy_ns) and now_ns - self.last_deploy_ns < self.takeover_after_ns

    @property
    def armed(self) -> bool:
        """Silence detection is on: the current deploy process has been heard for a while."""
        return bool(self.first_deploy_ns) and self.last_deploy_ns - self.first_deploy_ns >= self.ARM_AFTER_NS

    def due_reason(self, now_ns: int) -> str | None:
        """Why to take over at ``now_ns``, or None."""
        if self.exited:
            return self.exited
        if self.estop_since_ns and now_ns - self.estop_since_ns >= self.estop_obey_ns:
            return f"deploy did not send damping within {self.estop_obey_ns / 1e6:g} ms of an e-stop"
        if self.armed and now_ns - self.last_deploy_ns >= self.takeover_after_ns:
            silent_ms = (now_ns - self.last_deploy_ns) / 1e6
            return f"deploy silent for {silent_ms:.1f} ms (no rt/lowcmd, no heartbeat)"
        return None

    def next_check_ns(self, now_ns: int, idle_ns: int) -> int:
        """The next instant at which :meth:`due_reason` could change (at most ``idle_ns`` away)."""
        candidates = [now_ns + idle_ns]
        if self.armed:
            candidates.append(self.last_deploy_ns + self.takeover_after_ns)
        if self.estop_since_ns:
            candidates.append(self.estop_since_ns + self.estop_obey_ns)
        return min(candidates)


class SupervisorNode:
    """The supervisor's DDS readers/writer, ROS interface and watchdog thread."""

    IDLE_CHECK_NS = 50_000_000
    RECHECK_S = 0.01
    LOWSTATE_POLL_S = 0.01
    """The newest LowState (remote buttons, mode_machine) is read this often, not all 500 per
    second: a button press lasts far longer, and each sample costs Python time."""
    FORWARD_RETRY_S = 0.05
    """While an e-stop is not acknowledged by the deploy node, send it again this often."""
    FORWARD_TIMEOUT_S = 1.0
    """A forwarded e-stop call unanswered this long is taken as lost and sent again."""
    """Before taking over for silence, let this process's own DDS/ROS threads deliver anything
    queued while it was itself starved of CPU, then look again."""

    def __init__(self, node: Any):
        from rclpy.qos import DurabilityPolicy, QoSProfile, qos_profile_sensor_data
        from std_msgs.msg import Empty, String, UInt64
        from std_srvs.srv import Trigger

        from asap_ros.controller import load_controller_config

        self.node = node
        self.params = NodeParams(node, SUPERVISOR_PARAMS,
                                 load_defaults(config_file("supervisor.yaml"), NODE_NAME, SUPERVISOR_PARAMS))
        p = self.params
        self._combo = ComboDetector(parse_combo(p["estop_combo"], p.source, "estop_combo"))
        self._damping = damping_command(load_controller_config(p["controller_config"] or None).damping_kd)
        self._encoder = LowCmdEncoder()
        self._period_s = 1.0 / p["damping_rate_hz"]
        self.watchdog = Watchdog(int(p["takeover_after_ms"] * 1e6), int(p["estop_obey_ms"] * 1e6))
        self.state = WATCHING
        self.reason = ""
        self.lowcmd_writes = 0
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
        node.create_subscription(UInt64, f"/{deploy}/heartbeat", self._on_heartbeat, qos_profile_sensor_data)
        node.create_subscription(String, f"/{deploy}/process", self._on_deploy_process, latched)
        node.create_subscription(Empty, "estop", lambda _msg: self.estop("estop topic"), 10)
        node.create_service(Trigger, "~/estop", self._on_estop_service)
        node.create_service(Trigger, "~/reset", self._on_reset_service)
        node.create_timer(0.1, self._publish_writes)
        self._published_writes = -1
        self._publish_state()
        self._writer = self._open_lowcmd_channels(p["dds_domain"], p["network_interface"])
        self._thread = threading.Thread(target=self._run, name="asap-supervisor", daemon=True)
        self._robot_thread = threading.Thread(target=self._watch_robot, name="asap-robot-state", daemon=True)

    def _open_lowcmd_channels(self, domain: int, interface: str) -> Any:
        """rt/lowcmd writer (created now, so a takeover needs no discovery) and raw readers."""
        from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowCmd_, LowState_

        from asap_ros.dds import PolledReader, RawReader, RawWriter, init_channels

        init_channels(domain, interface)
        writer = RawWriter("rt/lowcmd", LowCmd_)
        # raw bytes: the SDK's Python deserialiser would cost ~0.5 ms per LowState;
        # rt/lowcmd from other processes only: this process's own damping stream is not the deploy's
        self._lowstate = PolledReader("rt/lowstate", LowState_)
        self._lowcmd_reader = RawReader("rt/lowcmd", LowCmd_, self._on_lowcmd, ignore_local=True)
        return writer

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

    def _on_lowcmd(self, payload: bytes, stamp_ns: int) -> None:
        if self.state == TAKEOVER:
            return  # our own stream (or a recovered deploy): the takeover holds until reset
        try:
            damping = lowcmd_is_damping(LOWCMD_WIRE.from_cdr(payload))
        except ValueError:
            return  # malformed: not a command the robot would apply, so not a sign of life
        with self._lock:
            self.watchdog.deploy_seen(stamp_ns)
            if damping:
                self.watchdog.damping_seen(stamp_ns)

    def _on_heartbeat(self, _msg: Any) -> None:
        with self._lock:
            self.watchdog.deploy_seen(time.time_ns())

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
            if self.watchdog.exited or not self.watchdog.deploy_alive(time.time_ns()):
                response.success = False
                response.message = (f"reset refused: {self.watchdog.exited or 'no heartbeat from the deploy node'}; "
                                    "damping continues until a deploy node runs again")
                return response
            self.state, self.reason = WATCHING, ""
            self.watchdog.estop_since_ns = 0
            self._forward_pending = False
            self.watchdog.exited = None
        self._publish_state()
        response.success, response.message = True, "stopped streaming damping; watching again"
        return response

    def estop(self, source: str) -> bool:
        """E-stop from any source: forward to the deploy node (True if it was reachable now;
        else retried until it acknowledges) and expect damping on rt/lowcmd within
        ``estop_obey_ms``."""
        self.node.get_logger().warning(f"e-stop from {source}")
        with self._lock:
            self.watchdog.estop_requested(time.time_ns())
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
        if not self._forward_pending:
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
        collection (as in :meth:`asap_ros.control_loop.ControlLoop.start`) so no collection
        stalls a takeover."""
        gc.freeze()
        self._thread.start()
        self._robot_thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(2.0)
        self._robot_thread.join(2.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._retry_forward()
            if self.state == TAKEOVER:
                self._write_damping()
                self._stop.wait(self._period_s)
                continue
            now = time.time_ns()
            with self._lock:
                reason = self.watchdog.due_reason(now)
                next_ns = self.watchdog.next_check_ns(now, self.IDLE_CHECK_NS)
            if reason is not None and not self.watchdog.exited:
                self._stop.wait(self.RECHECK_S)
                with self._lock:
                    reason = self.watchdog.due_reason(time.time_ns())
            if reason is not None:
                self._take_over(reason)
                continue
            timeout_s = max(0.0, (next_ns - time.time_ns()) / 1e9)
            self._wake.wait(min(timeout_s, self.FORWARD_RETRY_S) if self._forward_pending else timeout_s)
            self._wake.clear()

    def _take_over(self, reason: str) -> None:
        with self._lock:
            self.state, self.reason = TAKEOVER, reason
        self._write_damping()  # first command before any logging
        self.node.get_logger().error(f"taking over rt/lowcmd with damping: {reason}")
        self._publish_state()
        if self._deploy_estop.service_is_ready():  # in case the deploy node comes back
            self._deploy_estop.call_async(self._deploy_estop.srv_type.Request())

    def _write_damping(self) -> None:
        if self._mode_machine is None:
            return  # never heard the robot: a LowCmd needs its mode_machine
        self._writer.write(self._encoder.encode_cdr(self._damping, self._mode_machine))
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

    if help_requested(argv, NODE_NAME, __doc__.splitlines()[0], SUPERVISOR_PARAMS, config_file("supervisor.yaml")):
        return 0
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
