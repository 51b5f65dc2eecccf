"""``asap_supervisor``: the e-stop that survives a crashed or hung ``asap_deploy``.

E-stop sources: the ``estop`` topic (std_msgs/Empty), the ``~/estop`` service
(std_srvs/Trigger), a button combo on the G1 wireless remote (``LowState.wireless_remote``)
and ENTER on an interactive terminal. An e-stop is **held**: the supervisor's grants say ESTOP
until ``~/reset`` (refused while the combo is held, or while the deploy node
has not answered the e-stop forwarded to it), so the deploy node refuses Reset, Stand and
Start meanwhile; it is also forwarded to ``/<deploy_node>/estop``, retried every
``FORWARD_RETRY_S`` until acknowledged (again after ``FORWARD_LOST_S`` if lost).

The decisions are :class:`~asap_ros.core.supervisor.SupervisorCore`'s (pure, stepped every
``1 / damping_rate_hz`` on the watchdog thread); this node is its DDS and ROS adapter: beats,
rt/lowcmd samples (with their writer's DDS participant) and other supervisors' grants in, grants
and the damping stream out (kp 0, the controller's damping kd, ``mode_machine`` from the newest
CRC-valid ``LowState``, CRC set), the deploy process watched for exit through a pidfd of the pid
its beats carry (same host). Exactly one process writes ``rt/lowcmd`` at any instant
(:mod:`asap_ros.core.lease`). A second supervisor is SECONDARY: it forwards its e-stops (to the
deploy node and on the ``estop`` topic) and never grants nor writes. State on ``~/state``
(latched ``AUTHORITY: detail``), writes counted on ``~/lowcmd_writes`` (latched). Every thread
has a last-resort handler: an exception stops the grants (the deploy node's lease runs out: it
latches DAMPING and streams damping itself) and is reported as ``FAILED: ...`` on ``~/state``.
"""

from __future__ import annotations

import collections
import gc
import os
import select
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from asap_ros.config.node_params import SUPERVISOR
from asap_ros.core.beat_gaps import BeatGaps
from asap_ros.core.errors import ConfigError
from asap_ros.core.remote import ComboDetector, decode_remote, parse_combo
from asap_ros.core.supervisor import Authority, SupervisorCore, SupervisorTiming, timing_problem
from asap_ros.g1.codec import LowCmdEncoder, damping_command
from asap_ros.g1.crc import record_crc
from asap_ros.g1.layout import LOWCMD_TOPIC, LOWCMD_WIRE, LOWSTATE_TOPIC, LOWSTATE_WIRE
from asap_ros.ros.node_main import EXIT_OK, NodeBehaviour, run_node
from asap_ros.ros.parameters import NodeParams
from asap_ros.runtime.arbitration import decode_beat, decode_grant, encode_grant, host_id, new_session
from asap_ros.runtime.scheduling import GIL_SWITCH_INTERVAL_S, below, half_a_period_off, name_os_thread, run_realtime

__all__ = ["NODE_NAME", "SupervisorNode", "main"]

NODE_NAME = "asap_supervisor"
TAKEOVER = "TAKEOVER"


def lowcmd_is_damping(record: Any) -> bool:
    """A C-layout LowCmd record that applies no position stiffness (kp 0 on every G1 motor)."""
    return not record["motor_cmd"]["kp"][:29].any()


class SupervisorNode(NodeBehaviour):
    """The supervisor's DDS readers/writers, ROS interface and threads around its core."""

    LOWSTATE_POLL_NS = 10_000_000
    """The newest LowState (remote buttons, mode_machine) is read every 10 ms, not all 500 per
    second: a button press lasts far longer, and each sample costs Python time."""
    FORWARD_RETRY_S = 0.05
    """While the deploy node's e-stop service is not discovered, look for it this often."""
    FORWARD_LOST_S = 0.5
    """A forwarded e-stop still unanswered while the deploy node's control loop has beaten for this
    long since it was sent is lost (sent before the reader matched, or to a process that exited)
    and is sent again. A stopped node does not beat: it gets no queue of copies when it resumes."""
    PUBLISH_S = 0.05
    """State, counters and the core's events are published and logged this often (ROS timer)."""

    def __init__(self, node: Any, params: NodeParams):
        from rclpy.qos import DurabilityPolicy, QoSProfile
        from std_msgs.msg import Empty, String, UInt64
        from std_srvs.srv import Trigger

        from asap_ros.config.controller import load_controller_config

        self.node = node
        self.params = params
        p = self.params
        problem = timing_problem(p["takeover_after_ms"], p["lease_ms"])
        if problem is not None:
            raise ConfigError(p.source, problem[0], problem[1], p["lease_ms"])
        if p["realtime_priority"] and p["receive_priority"] >= p["realtime_priority"]:
            raise ConfigError(p.source, "receive_priority", f"must be below realtime_priority ({p['realtime_priority']}): "
                              "the watchdog must run whatever its readers are doing", p["receive_priority"])
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)  # the watchdog waits at most that for the GIL
        self._combo = ComboDetector(parse_combo(p["estop_combo"], p.source, "estop_combo"))
        self._combo_name = f"wireless remote {'+'.join(sorted(self._combo.combo))}"
        self._damping = damping_command(load_controller_config(p["controller_config"] or None).damping_kd)
        self._encoder = LowCmdEncoder()
        self.session = new_session()
        timing = SupervisorTiming(takeover_after_ns=int(p["takeover_after_ms"] * 1e6),
                                  estop_obey_ns=int(p["estop_obey_ms"] * 1e6), lease_ns=int(p["lease_ms"] * 1e6),
                                  write_period_ns=int(1e9 / p["damping_rate_hz"]))
        self.core = SupervisorCore(self.session, timing, host_id(), started_ns=time.monotonic_ns())
        self.lowcmd_writes = 0
        self.stale_writes_dropped = 0
        """Damping writes dropped because the process stalled between the core's step and the write."""
        self.failed: str | None = None
        """Why a thread of this node died (its last-resort handler): no grant goes out any more."""
        self._mode_machine: int | None = None
        self.crc_bad_lowstates = 0
        self.unknown_mode_writes_skipped = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watched_pid = 0
        self._beat_gaps = BeatGaps()
        """Which side each gap of over three periods in the supervised process's beats was on (logged)."""
        self._forward_pending = False
        self._forward_future: Any = None
        self._forward_sent_ns = 0
        self._log: collections.deque[tuple[str, str]] = collections.deque(maxlen=200)
        """(severity, text) written by any thread, logged by the publish timer."""

        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self._state_pub = node.create_publisher(String, "~/state", latched)
        self._writes_pub = node.create_publisher(UInt64, "~/lowcmd_writes", latched)
        self._estop_pub = node.create_publisher(Empty, "estop", 10)
        deploy = p["deploy_node"].strip("/")
        # one single-threaded executor: every callback here is short (none waits for a lock held long)
        self._deploy_estop = node.create_client(Trigger, f"/{deploy}/estop")
        node.create_subscription(Empty, "estop", lambda _msg: self.estop("estop topic", republish=False), 10)
        node.create_service(Trigger, "~/estop", self._on_estop_service)
        node.create_service(Trigger, "~/reset", self._on_reset_service)
        node.create_timer(self.PUBLISH_S, self._guarded("publisher", self._publish))
        self._published: tuple[str, int] | None = None
        self._forward_reachable = False
        """Whether the deploy node's e-stop service was discovered at the last publish (logged on change)."""
        self._open_channels(p["dds_domain"], p["network_interface"])
        self._threads = [
            threading.Thread(target=self._guarded("watchdog", self._run), name="asap-watchdog", daemon=True),
            threading.Thread(target=self._guarded("robot state", self._watch_robot), name="asap-robot", daemon=True),
        ]
        self._publish()

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

        others = below(self.params["realtime_priority"])
        if others:  # the node's other threads (executor, remote-button watch) just below its watchdog
            note = run_realtime(others)
            if note:
                self._log.append(("warning", note))
        # the receivers of the deploy node's beats and commands below its control thread: each step's
        # writes wake them, and above it they would preempt the step that sent them
        receive = self.params["receive_priority"]
        init_channels(domain, interface, receive_priority=receive)
        self._writer = RawWriter(LOWCMD_TOPIC, LowCmd_)
        self._grants = RawWriter(GRANT_TOPIC, SupervisorGrant_, GRANT_QOS)
        # raw bytes: the SDK's Python deserialiser would cost ~0.5 ms per LowState;
        # other participants only: this process's own damping stream and grants are not the deploy's
        self._lowstate = PolledReader(LOWSTATE_TOPIC, LowState_)
        # started once assigned: their handlers look the writer's participant up on the reader itself
        self._lowcmd_reader = RawReader(LOWCMD_TOPIC, LowCmd_, self._guarded("rt/lowcmd", self._on_lowcmd),
                                        ignore_local=True, realtime_priority=receive, start=False)
        self._beat_reader = RawReader(BEAT_TOPIC, DeployBeat_, self._guarded("beats", self._on_beat), qos=BEAT_QOS,
                                      realtime_priority=receive, start=False, source_stamps=True)
        self._grant_reader = RawReader(GRANT_TOPIC, SupervisorGrant_, self._guarded("grants", self._on_grant),
                                       qos=GRANT_QOS, ignore_local=True, realtime_priority=receive, start=False)
        for reader in (self._lowcmd_reader, self._beat_reader, self._grant_reader):
            reader.start()

    # --- last resort ---------------------------------------------------------------------
    def _guarded(self, what: str, body: Callable[..., None]) -> Callable[..., None]:
        """``body`` with the last-resort handler: an exception latches :attr:`failed` (no grant
        goes out any more, the damping stream stops: the deploy node's lease runs out and it
        streams damping itself) and is reported."""
        def guarded(*args: Any) -> None:
            try:
                body(*args)
            except Exception as exc:
                if self.failed is None:
                    self.failed = f"{what} raised {exc!r}"
                    text = f"FAILED: {self.failed}; no grant or damping from this supervisor any more, restart it"
                    self._log.append(("error", text))
                    print(f"{NODE_NAME}: {text}", file=sys.stderr, flush=True)  # also when the publisher failed
        return guarded

    # --- inputs (DDS and executor threads) -------------------------------------------------
    def _watch_robot(self) -> None:
        """Every ``LOWSTATE_POLL_NS``: the newest LowState, if new (its own thread)."""
        name_os_thread()
        seen_ns = 0
        # half a poll period off the control loop's deadlines, as the watchdog (:meth:`_run`)
        while not self._stop.wait(max(0, half_a_period_off(time.monotonic_ns(), self.LOWSTATE_POLL_NS)
                                      - time.monotonic_ns()) / 1e9):
            payload, stamp_ns, _arrival_ns = self._lowstate.newest()
            if payload is not None and stamp_ns != seen_ns:
                seen_ns = stamp_ns
                self._on_lowstate(payload)

    def _on_lowstate(self, payload: bytes) -> None:
        try:
            record = LOWSTATE_WIRE.from_cdr(payload)
        except ValueError:
            return  # malformed: like a bad CRC, never used
        if int(record["crc"]) != record_crc(record):
            self.crc_bad_lowstates += 1  # never used: the core hears no robot (no armed, no takeover decision)
            return
        self._mode_machine = int(record["mode_machine"])
        self._combo.update(decode_remote(record["wireless_remote"].tobytes()))
        held = self._combo.held
        with self._lock:
            pressed = self.core.remote(held, self._combo_name, time.monotonic_ns())
        if pressed:
            self.estop(self._combo_name, latched=True)

    def _on_lowcmd(self, payload: bytes, _stamp_ns: int, writer: int) -> None:
        try:
            damping = lowcmd_is_damping(LOWCMD_WIRE.from_cdr(payload))
        except ValueError:
            return  # malformed: not a command the robot would apply, so not a sign of life
        participant = self._lowcmd_reader.participant_of(writer)
        with self._lock:
            self.core.on_lowcmd(participant, damping, time.monotonic_ns())

    def _on_beat(self, payload: bytes, stamp_ns: int, writer: int, source_ns: int) -> None:
        """Each beat of the deploy node's control loop is answered at once (a grant or nothing)."""
        try:
            beat = decode_beat(payload)
        except ValueError:
            return
        participant = self._beat_reader.participant_of(writer)
        if self.failed is not None:
            return
        with self._lock:
            grant = self.core.on_beat(beat, participant, time.monotonic_ns())
            if grant is not None:
                self._grants.write(encode_grant(grant))
            deploy = self.core.deploy
        if deploy is not None and deploy.session == beat.session:  # the process supervised, not a stray one
            gap = self._beat_gaps.taken(beat.session, beat.seq, source_ns, stamp_ns)
            if gap:
                self._log.append(("warning", gap))
        if deploy is not None and deploy.pid != self._watched_pid and deploy.host == self.core.host:
            self._watch_exit(deploy.pid)

    def _on_grant(self, payload: bytes, _stamp_ns: int, _writer: int) -> None:
        try:
            grant = decode_grant(payload)
        except ValueError:
            return
        with self._lock:
            self.core.on_grant(grant, time.monotonic_ns())

    def _watch_exit(self, pid: int) -> None:
        """Watch the deploy process on this host for exit (a pidfd is readable once it exited)."""
        self._watched_pid = pid
        try:
            pidfd = os.pidfd_open(pid)
        except OSError as exc:  # already gone, or no pidfd support
            self._log.append(("warning", f"cannot watch deploy process {pid}: {exc}"))
            return
        self._log.append(("info", f"watching deploy process {pid} for exit"))

        def wait() -> None:
            select.select([pidfd], [], [])
            os.close(pidfd)
            with self._lock:
                self.core.on_exit(pid, time.monotonic_ns())
                self._forward_future = None  # its request died with the process: nothing to wait for

        threading.Thread(target=self._guarded("exit watch", wait), name="asap-deploy-exit", daemon=True).start()

    def _on_estop_service(self, _request: Any, response: Any) -> Any:
        forwarded = self.estop("~/estop service")
        target = self._deploy_estop.srv_name
        response.success = True
        response.message = (f"e-stop forwarded to {target}" if forwarded else f"{target} not reachable") + (
            f"; damping expected on rt/lowcmd within {self.params['estop_obey_ms']:g} ms, else the supervisor "
            f"streams it (supervisor {self.core.describe()})")
        return response

    def _on_reset_service(self, _request: Any, response: Any) -> Any:
        with self._lock:
            before = self.core.authority, self.core.estop_reason
            unanswered = self._deploy_estop.srv_name if self._forward_in_flight() else None
            refusal = self.core.reset(time.monotonic_ns(), unanswered)
        if refusal is not None:
            response.success, response.message = False, f"reset refused: {refusal}; damping continues"
        elif before == (Authority.WATCHING, None):
            response.success, response.message = True, "not streaming damping and no e-stop held; nothing to reset"
        else:
            self._forward_pending = False
            response.success = True
            response.message = ("e-stop released; " if before[1] else "") + (
                "handing rt/lowcmd back: the deploy node may write again" if before[0] is Authority.TAKEOVER
                else "the deploy node may be reset")
        self._log.append(("info" if response.success else "warning", f"~/reset: {response.message}"))
        self._publish()
        return response

    def estop(self, source: str, republish: bool = True, latched: bool = False) -> bool:
        """E-stop from any source: held at the supervisor (a SECONDARY republishes it on the
        ``estop`` topic for the one with authority) and forwarded to the deploy node (True if it
        was reachable now; else retried until it acknowledges)."""
        self._log.append(("warning", f"e-stop from {source}"))
        with self._lock:
            held = self.core.has_authority if latched else self.core.estop(source, time.monotonic_ns())
        if not held and republish:  # for the supervisor with authority (a combo it cannot read, too)
            from std_msgs.msg import Empty

            self._estop_pub.publish(Empty())
        self._forward_pending = True
        return self._forward()

    def _forward(self, again: bool = False) -> bool:
        """Call the deploy node's e-stop service unless a call is in flight (``again``: even so);
        False if it is not discovered (yet)."""
        if not self._deploy_estop.service_is_ready():
            return False
        with self._lock:
            if self._forward_in_flight() and not again:
                return True
            self._forward_sent_ns = time.monotonic_ns()
            future = self._forward_future = self._deploy_estop.call_async(self._deploy_estop.srv_type.Request())
        future.add_done_callback(self._on_forward_done)  # may run at once: outside the lock
        return True

    def _forward_in_flight(self) -> bool:
        future = self._forward_future  # rclpy: a cancelled future is not done()
        return future is not None and not (future.done() or future.cancelled())

    def _on_forward_done(self, future: Any) -> None:
        if future is self._forward_future:  # the newest call answered: applied, or refused by a damping node
            self._forward_pending = False

    def _retry_forward(self) -> None:
        """Send an e-stop whose forward found no deploy node yet, or was lost (watchdog thread)."""
        if not self._forward_pending:
            return
        now_ns = time.monotonic_ns()
        if self._forward_in_flight():
            deploy = self.core.deploy
            if deploy is None or deploy.beat_ns - self._forward_sent_ns < self.FORWARD_LOST_S * 1e9:
                return
        elif now_ns - self._forward_sent_ns < self.FORWARD_RETRY_S * 1e9:
            return
        self._forward_sent_ns = now_ns
        self._forward(again=True)

    # --- watchdog thread -----------------------------------------------------------------
    def start(self) -> None:
        """Start the watchdog and robot-state threads (and, on an interactive terminal, the ENTER
        e-stop); start-up objects are frozen out of garbage collection (as in
        :meth:`asap_ros.runtime.control_loop.ControlLoop.start`) so no collection stalls a takeover."""
        gc.freeze()
        for thread in self._threads:
            thread.start()
        if self.params["terminal_estop"] and sys.stdin is not None and sys.stdin.isatty():
            threading.Thread(target=watch_terminal, args=(self,), name="asap-terminal", daemon=True).start()

    def shutdown(self) -> int:
        self._stop.set()
        for thread in self._threads:
            if thread.ident is not None:
                thread.join(2.0)
        for endpoint in (self._beat_reader, self._lowcmd_reader, self._grant_reader, self._lowstate):
            endpoint.close()
        print(f"{NODE_NAME}: {self.lowcmd_writes} rt/lowcmd writes, {self.stale_writes_dropped} stale ones dropped",
              file=sys.stderr)
        return EXIT_OK

    def _run(self) -> None:
        """The core's step every write period: send the grant it asks for, then write damping."""
        refused = run_realtime(self.params["realtime_priority"])
        if refused:
            self._log.append(("warning", f"watchdog thread: {refused}"))
        period_ns = self.core.timing.write_period_ns
        while not self._stop.is_set() and self.failed is None:
            self._retry_forward()
            with self._lock:
                tick = self.core.step(time.monotonic_ns())
                if tick.grant is not None:
                    self._grants.write(encode_grant(tick.grant))
                if tick.write and self._mode_machine is None:  # a LowCmd needs the robot's mode_machine
                    self.unknown_mode_writes_skipped += 1
                    if self.unknown_mode_writes_skipped == 1:
                        self._log.append(("error", "damping write skipped: no CRC-valid rt/lowstate heard yet, so "
                                                   "the robot's mode_machine is unknown"))
                if tick.write and self._mode_machine is not None:
                    payload = self._encoder.encode_cdr(self._damping, self._mode_machine)
                    now = time.monotonic_ns()
                    if tick.allows_write(now):  # checked at the write: not after a stall since the step
                        self._writer.write(payload)
                        self.core.wrote(time.monotonic_ns())
                        self.lowcmd_writes += 1
                    else:
                        self.stale_writes_dropped += 1
                        self._log.append(("warning", f"damping write dropped: {(now - tick.write_until_ns) / 1e6:.1f} ms "
                                                     "past its step's write window (the supervisor stalled)"))
            # at (k + 1/2) write periods on the monotonic clock: above the deploy node's control thread,
            # this thread and the grants it sends keep half a period (5 ms) off each control deadline
            # (multiples of 20 ms) instead of preempting steps at a phase of their own; an overrun
            # skips to the next such instant
            next_ns = half_a_period_off(time.monotonic_ns(), period_ns)
            self._stop.wait(max(0.0, min(tick.next_ns, next_ns) - time.monotonic_ns()) / 1e9)

    # --- outputs ---------------------------------------------------------------------------
    def state_line(self) -> str:
        return f"FAILED: {self.failed}" if self.failed else self.core.describe(time.monotonic_ns())

    def _publish(self) -> None:
        """State and write count when changed; the core's events and the threads' notes logged."""
        from std_msgs.msg import String, UInt64

        with self._lock:
            events = self.core.drain_events()
            line = self.state_line()
        logger = self.node.get_logger()
        for text in events:
            _log(logger, "error" if text.startswith("taking over") else "info", text)
        while self._log:
            _log(logger, *self._log.popleft())
        reachable = self._deploy_estop.service_is_ready()
        if reachable != self._forward_reachable:
            self._forward_reachable = reachable
            target = self._deploy_estop.srv_name
            _log(logger, "info" if reachable else "warning",
                 f"e-stop forward path up: {target} discovered" if reachable
                 else f"e-stop forward path down: {target} no longer discovered")
        now = (line, self.lowcmd_writes)
        if self._published is None or now[0] != self._published[0]:
            self._state_pub.publish(String(data=line))
        if self._published is None or now[1] != self._published[1]:
            self._writes_pub.publish(UInt64(data=now[1]))
        self._published = now


def _log(logger: Any, severity: str, text: str) -> None:
    """One line at ``severity`` (rclpy refuses a call site whose severity changes: one site each)."""
    if severity == "error":
        logger.error(text)
    elif severity == "warning":
        logger.warning(text)
    else:
        logger.info(text)


def watch_terminal(supervisor: SupervisorNode) -> None:
    """E-stop on every ENTER typed on an interactive stdin (runs on a daemon thread)."""
    print("asap_supervisor: press ENTER to e-stop", file=sys.stderr, flush=True)
    for _line in sys.stdin:
        supervisor.estop("terminal")


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``asap_supervisor``."""
    return run_node(SUPERVISOR, __doc__.splitlines()[0], SupervisorNode, argv, executor="single")


if __name__ == "__main__":
    sys.exit(main())
