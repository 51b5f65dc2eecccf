"""The control loop in a process of its own, apart from rclpy: ``python -m asap_ros.runtime.control_process FD``.

``asap_deploy`` starts it (:class:`~asap_ros.runtime.loop_process.LoopProcess`) and talks to it over
one :class:`~asap_ros.runtime.loop_link.Link` (the socket ``FD``). Here run only the loop's own
parts: :class:`~asap_ros.runtime.wiring.DdsControl` (Cyclone, the control thread, the rt/lowcmd
lease, the mocap stamps, the step topics) and the thread answering the node. No rclpy: no write
through ROS can hold the GIL the control thread needs.

Messages from the node (each answered ``("reply", id, ok, value)``): ``("start", id)``,
``("request", id, request)`` (an operator request; refused: ``ok`` False and the reason),
``("status", id)`` (:class:`~asap_ros.runtime.loop_link.LoopStatus`), ``("stats", id)``
(:class:`~asap_ros.runtime.control_loop.LoopStats`), ``("recent", id)`` (the newest steps'
timing, :meth:`~asap_ros.runtime.control_loop.ControlLoop.recent_steps`), ``("stop", id, reason)``. To the node, from
the loop's sink thread without ever waiting (a lagging node loses them, the loop never waits for
it): ``("step", record, state)`` per control step.

The node's end of the link gone (it ended, however) or SIGTERM: e-stop, damping for
:data:`SHUTDOWN_DAMPING_S`, stop, exit 0; the supervisor's lease then runs out and it takes over.
SIGINT is ignored: a terminal's Ctrl-C reaches the node too, and the node stops this process.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

from asap_ros.core.errors import AsapError, RejectedRequest
from asap_ros.core.state_machine import EStop, Reset, Stand, Start, describe
from asap_ros.runtime.loop_link import Link, LinkClosed, LoopStatus
from asap_ros.runtime.scheduling import below, name_os_thread, run_realtime

__all__ = [
    "EXIT_REFUSED", "REQUEST_THREAD", "SERVING_THREAD", "SHUTDOWN_DAMPING_S", "LoopServer", "build_controller_from_values",
    "controller_config_with_overrides", "main", "too_late",
]

SHUTDOWN_DAMPING_S = 0.1
"""On a stop the loop e-stops and writes damping this long before it ends, s."""
SPEC_TIMEOUT_S = 10.0
"""The node sends the loop's settings at once; without them in this time, s, the process ends."""
SERVING_THREAD = "asap-serve"
"""The process's main thread: it answers the node and applies e-stops (the kernel's name for it too)."""
REQUEST_THREAD = "asap-requests"
"""The thread that applies the node's other operator requests (each waits for the step lock)."""
EXIT_REFUSED = 2
"""A setting or file refused (the node loaded the same ones first: a race with an edited file)."""


def too_late(message: tuple[Any, ...], now_ns: int) -> str | None:
    """Why a ``("request", id, request, deadline_ns)`` message must not be applied at ``now_ns``:
    its deadline (monotonic, this host's) passed, so the node has reported it refused, or will
    before an answer could reach it. None: apply it."""
    if len(message) < 4 or now_ns < message[3]:
        return None
    return (f"{describe(message[2])} not applied: it reached the control loop {(now_ns - message[3]) / 1e6:.0f} ms "
            "past its deadline (the node reports it refused)")


def controller_config_with_overrides(config: Any, values: Mapping[str, Any], source: str) -> Any:
    """The controller config with every non-zero override parameter of ``asap_deploy`` applied."""
    import dataclasses

    from asap_ros.core.errors import ConfigError

    safety_keys = ("max_state_age_ms", "max_tilt_deg", "max_temperature_c", "max_start_temperature_c")
    if values["stand_up_duration_s"]:
        config = dataclasses.replace(config, stand_up_duration_s=values["stand_up_duration_s"])
    safety = dataclasses.replace(config.safety, **{k: values[k] for k in safety_keys if values[k]})
    problem = safety.temperature_order_problem()
    if problem is not None:
        raise ConfigError(source, *problem)
    return dataclasses.replace(config, safety=safety)


def build_controller_from_values(values: Mapping[str, Any], source: str) -> tuple[Any, Any, Any]:
    """``(robot, controller config, controller)`` from ``asap_deploy``'s parameter values;
    :class:`~asap_ros.core.errors.ConfigError` naming ``source`` on a bad one."""
    from asap_ros.config.controller import load_controller_config
    from asap_ros.config.policy_spec import resolve_policy_files
    from asap_ros.config.robot import load_robot_model
    from asap_ros.runtime.control_loop import check_control_rate
    from asap_ros.runtime.policies import build_controller, load_policies

    robot = load_robot_model(values["robot_config"] or None)
    config = controller_config_with_overrides(load_controller_config(values["controller_config"] or None), values, source)
    policies = load_policies(resolve_policy_files(values["policies"], source), robot, values["assets_dir"] or None, source)
    controller = build_controller(robot, policies, config)
    check_control_rate(values["control_rate_hz"], controller, source)
    return robot, config, controller


class LoopServer:
    """The control loop of one ``asap_deploy`` and the answers to its node (see the module)."""

    def __init__(self, spec: Mapping[str, Any], link: Link) -> None:
        from asap_ros.runtime.fault_injection import FaultInjection
        from asap_ros.runtime.wiring import DdsControl

        values, source = spec["values"], spec["source"]
        sys.setswitchinterval(values["switch_interval_ms"] / 1e3)
        _robot, _config, controller = build_controller_from_values(values, source)
        priority = values["realtime_priority"]
        self.dds = DdsControl(
            controller,
            values["dds_domain"],
            values["network_interface"],
            period_s=1.0 / values["control_rate_hz"],
            state_wait_s=values["state_wait_ms"] / 1e3,
            late_after_s=values["late_after_ms"] / 1e3,
            realtime_priority=priority,
            cpus=frozenset(spec["cpus"]),
            supervised=values["supervised"],
            lease_s=values["lease_ms"] / 1e3,
            command_timeout_s=values["command_timeout_ms"] / 1e3,
            fault_injection=FaultInjection.from_env(),
            # one above: after a stall of the process they deliver the queued supervisor word before
            # the first step judges (else it blames the state's age for the supervisor's takeover)
            receive_priority=priority + 1 if priority else 0,
            mocap_topic=spec["mocap_topic"],
        )
        self.loop = self.dds.loop
        self.link = link
        self._requests: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        """Operator requests other than EStop, for :data:`REQUEST_THREAD` (they wait for the step lock)."""
        self.unsent_steps = 0
        """Step messages dropped because the node's end was full (it lagged)."""
        self.loop.add_sink(self._send_step)
        # loaded at normal priority; now this thread and every thread it starts (the loop's sink
        # thread, the request thread) one below the control thread (scheduling.below)
        self.scheduling_note = run_realtime(below(priority))

    # --- the loop's sink thread ----------------------------------------------------------------
    def _send_step(self, record: Any) -> None:
        """Sink: the step to the node, never waiting; a full link drops it (counted)."""
        try:
            if not self.link.send(("step", record, self.loop.last_state), block=False):
                self.unsent_steps += 1
        except LinkClosed:
            self.unsent_steps += 1

    # --- the node's requests (the serving thread) -------------------------------------------------
    def apply(self, request: Any) -> str:
        """Apply one operator request; the accepted answer, or :class:`RejectedRequest` with the
        reason (the supervisor's lease: no Stand/Start without a current grant, no Reset while it
        holds an e-stop or streams damping)."""
        arbiter = self.dds.arbiter
        objection = None
        if arbiter is not None and isinstance(request, (Stand, Start)):
            objection = arbiter.refusal()
        elif arbiter is not None and isinstance(request, Reset):
            objection = arbiter.reset_refusal()
        if objection is not None:
            raise RejectedRequest(f"{describe(request)} refused: {objection}")
        self.loop.request(request)
        return f"{describe(request)} accepted; mode {self.loop.mode.name}"

    def status(self) -> LoopStatus:
        loop, arbiter = self.loop, self.dds.arbiter
        supervisor = "unsupervised"
        if arbiter is not None:
            supervisor = f"obeys supervisor {arbiter.lease.supervisor:x}" if arbiter.lease.supervisor else "no supervisor obeyed"
        return LoopStatus(
            mode=loop.mode.name, fault=loop.fault_reason, motion=loop.controller.motion,
            motion_abort=loop.controller.motion_abort,
            fatal_error=loop.fatal_error or (None if loop.alive else "control thread not running"),
            alive=loop.alive, sink_errors=tuple(loop.sink_errors), supervisor=supervisor,
            unsent_steps=self.unsent_steps,
        )  # fmt: skip

    def answer(self, message: tuple[Any, ...]) -> tuple[bool, Any]:
        """``(ok, value)`` for one message other than ``stop``."""
        kind = message[0]
        if kind == "start":
            self.loop.start()
            injection = self.loop.fault_injection
            notes = [note for note in (self.scheduling_note, self.loop.scheduling_note) if note]
            return True, {"scheduling_note": "; ".join(notes) or None,
                          "fault_injection": injection.describe() if injection is not None else None}
        if kind == "request":
            late = too_late(message, time.monotonic_ns())
            if late is not None:
                return False, late
            try:
                return True, self.apply(message[2])
            except RejectedRequest as exc:
                return False, str(exc)
        if kind == "status":
            return True, self.status()
        if kind == "stats":
            return True, self.loop.stats()
        if kind == "recent":
            return True, self.loop.recent_steps()
        return False, f"unknown message {kind!r}"

    def serve(self, stop: threading.Event) -> int:
        """Answer the node until it says stop, its end closes or ``stop`` is set; then damp and end.

        An EStop is applied on this thread at once (it takes only the loop's write lock); every
        other operator request goes to :data:`REQUEST_THREAD`, since it waits for the step lock,
        so an e-stop never waits behind one."""
        requests = threading.Thread(target=self._apply_requests, name=REQUEST_THREAD, daemon=True)
        requests.start()
        reason, stop_id = "asap_deploy ended: its control process damps and stops", None
        while not stop.is_set():
            try:
                message = self.link.receive(0.1)
            except LinkClosed:
                break
            if message is None:
                continue
            if message[0] == "stop":
                _kind, stop_id, reason = message
                break
            if message[0] == "request" and not isinstance(message[2], EStop):
                self._requests.put(message)
            elif not self._reply(message):
                break
        self._requests.put(None)
        summary = self.shut_down(reason)
        if stop_id is not None:
            try:
                self.link.send(("reply", stop_id, True, summary))
            except LinkClosed:
                pass
        return 0

    def _reply(self, message: tuple[Any, ...]) -> bool:
        """Answer one message; False when the node's end is gone."""
        ok, value = self.answer(message)
        try:
            self.link.send(("reply", message[1], ok, value))
        except LinkClosed:
            return False
        return True

    def _apply_requests(self) -> None:
        name_os_thread()
        while (message := self._requests.get()) is not None:
            if not self._reply(message):
                return

    def shut_down(self, reason: str) -> dict[str, Any]:
        """E-stop, damping for :data:`SHUTDOWN_DAMPING_S`, the loop stopped and the endpoints closed;
        what was written per DDS topic and the loop's statistics."""
        if self.loop.alive:
            self.loop.request(EStop(reason))
            time.sleep(SHUTDOWN_DAMPING_S)
        self.loop.stop()
        summary = {"written": self.dds.written(), "stats": self.loop.stats().as_dict(), "unsent_steps": self.unsent_steps}
        self.dds.close()
        return summary


def main(argv: list[str] | None = None) -> int:
    """Serve the link on socket ``argv[0]`` (a file descriptor number) until told to stop."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].isdigit():
        print("usage: python -m asap_ros.runtime.control_process FD (asap_deploy starts it)", file=sys.stderr)
        return EXIT_REFUSED
    threading.current_thread().name = SERVING_THREAD  # the kernel's name once it is scheduled (LoopServer)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    link = Link(socket.socket(fileno=int(args[0])))
    try:
        message = link.receive(SPEC_TIMEOUT_S)
    except LinkClosed:
        return EXIT_REFUSED
    if message is None or message[0] != "spec":
        print(f"control process: expected the loop's settings first, got {message!r}", file=sys.stderr)
        return EXIT_REFUSED
    try:
        server = LoopServer(message[1], link)
    except AsapError as exc:
        link.send(("refused", str(exc)))
        return EXIT_REFUSED
    link.send(("ready", {"pid": os.getpid()}))
    return server.serve(stop)


if __name__ == "__main__":
    sys.exit(main())
