"""``asap_deploy``'s side of its control process (:mod:`asap_ros.runtime.control_process`).

:class:`LoopProcess` starts the process, hands it the node's settings and offers the node what a
:class:`~asap_ros.runtime.control_loop.ControlLoop` in the same process offered: operator requests,
the mode, status, statistics, the newest state and step records for sinks. Step records arrive on
a receiving thread and reach the sinks from a thread of their own, newest kept when the sinks lag.
The process's end (a crash, a kill) is seen at once on the link: from then on the loop reads as
DAMPING with ``control process ended (exit code N)`` and every request is refused; nothing of
this node writes rt/lowcmd then and the supervisor's lease watch takes over.
"""

from __future__ import annotations

import collections
import itertools
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

from asap_ros.core.errors import AsapError, RejectedRequest
from asap_ros.core.state_machine import describe
from asap_ros.runtime.control_loop import Sink, run_sinks
from asap_ros.runtime.loop_link import Link, LinkClosed, LoopStatus
from asap_ros.runtime.scheduling import name_os_thread

__all__ = ["REPLY_TIMEOUT_S", "START_TIMEOUT_S", "LoopProcess"]

START_TIMEOUT_S = 60.0
"""The control process loads the actors and joins DDS within this, s, or the node refuses to start."""
REPLY_TIMEOUT_S = 2.0
APPLY_MARGIN_S = 0.5
"""An operator request not taken up within ``REPLY_TIMEOUT_S`` less this is refused unapplied
(the answer then still arrives within the reply timeout)."""
"""The longest wait for an answer of the control process, s (it answers in under a millisecond)."""
STOP_TIMEOUT_S = 5.0
"""The control process damps and ends within this after a stop, s, or it is killed."""
STEP_QUEUE = 1024
"""Step records waiting for the sinks, newest kept (20 s at 50 Hz)."""


class LoopProcess:
    """The control process of one ``asap_deploy``; ``spec``: its settings (``values``: the node's
    parameter values, ``source``, ``cpus``, ``mocap_topic``). Raises :class:`AsapError` with the
    process's reason when it refuses the settings or does not start.

    The process inherits the calling thread's scheduling: build this from a thread at normal
    priority (the process loads the actors and joins DDS there, never at a real-time priority
    where it would starve the supervisor's threads); it puts its own threads where they belong."""

    def __init__(self, spec: Mapping[str, Any], start_timeout_s: float = START_TIMEOUT_S) -> None:
        self._link, theirs = Link.pair()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "asap_ros.runtime.control_process", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),))
        theirs.close()
        self.pid = self._process.pid
        self.last_state: Any = None
        """The newest state the control loop decoded (from the newest step message)."""
        self.scheduling_note: str | None = None
        self.fault_injection: str | None = None
        """The fault injection the process runs (test support), described; None in operation."""
        self.ended: str | None = None
        """Why the process is gone (``control process ended (exit code N)``); None while it runs."""
        self.summary: dict[str, Any] | None = None
        """What the process said at its stop: ``written`` per DDS topic, ``stats``, ``unsent_steps``."""
        self._ids = itertools.count(1)
        self._replies: dict[int, tuple[bool, Any] | None] = {}
        """One slot per waiting call, None until its answer comes; an answer with no slot (its call
        gave up) is dropped."""
        self._answered = threading.Condition()
        self._steps: collections.deque[Any] = collections.deque(maxlen=STEP_QUEUE)
        self._steps_ready = threading.Condition()
        self._sinks: list[Sink] = []
        self.sink_errors: list[str] = []
        self.dropped_steps = 0
        try:
            self._link.send(("spec", dict(spec)))
            reply = self._link.receive(start_timeout_s)
        except LinkClosed:
            reply = None
        if reply is None or reply[0] != "ready":
            if reply is None:
                self._process.kill()
            code = self._process.wait(STOP_TIMEOUT_S)
            self._link.close()
            if reply is not None and reply[0] == "refused":
                raise AsapError(str(reply[1]))
            raise AsapError(f"the control process did not start within {start_timeout_s:g} s (exit code {code})")
        self._threads: list[threading.Thread] = []

    # --- what the node asks -----------------------------------------------------------------
    def start(self) -> None:
        """Start this side's threads (at the calling thread's scheduling, which they inherit) and the
        control loop; its scheduling note and fault injection are known on return."""
        self._threads = [threading.Thread(target=self._receive, name="asap-link", daemon=True),
                         threading.Thread(target=self._drain, name="asap-link-sinks", daemon=True)]
        for thread in self._threads:
            thread.start()
        info = self._call("start")
        self.scheduling_note = info["scheduling_note"]
        self.fault_injection = info["fault_injection"]

    def request(self, request: Any) -> str:
        """Apply an operator request in the control process; the accepted answer, or
        :class:`RejectedRequest` with the reason (also when the process is gone or silent)."""
        # applied only before this deadline (the same monotonic clock: one host), so that a request
        # this process reports refused after its reply timeout is never applied later
        deadline_ns = time.monotonic_ns() + int((REPLY_TIMEOUT_S - APPLY_MARGIN_S) * 1e9)
        try:
            ok, value = self._call_ok("request", request, deadline_ns)
        except (LinkClosed, TimeoutError) as exc:
            raise RejectedRequest(f"{describe(request)} refused: {exc}") from exc
        if not ok:
            raise RejectedRequest(str(value))
        return str(value)

    def status(self) -> LoopStatus:
        """The loop now; once the process is gone, DAMPING with why."""
        try:
            status: LoopStatus = self._call("status")
            return status
        except (LinkClosed, TimeoutError) as exc:
            reason = self.ended or f"control process silent: {exc}"
            return LoopStatus(mode="DAMPING", fault=reason, motion=None, motion_abort=None, fatal_error=reason,
                              alive=False, sink_errors=(), supervisor="")

    def stats(self) -> Any:
        """The loop's :class:`~asap_ros.runtime.control_loop.LoopStats`; None once the process is gone."""
        try:
            return self._call("stats")
        except (LinkClosed, TimeoutError):
            return None

    def recent_steps(self) -> str:
        """The newest steps' timing (why a run of late steps was late); '' once the process is gone."""
        try:
            return str(self._call("recent"))
        except (LinkClosed, TimeoutError):
            return ""

    def add_sink(self, sink: Sink) -> None:
        """Call ``sink(record)`` for every step record that arrives, from the sinks' thread."""
        self._sinks.append(sink)

    @property
    def alive(self) -> bool:
        return self.ended is None

    def stop(self, reason: str) -> dict[str, Any] | None:
        """E-stop and end the control process (it damps first); what it said at its stop
        (:attr:`summary`), None when it was gone already or did not answer."""
        if self.ended is None:
            try:
                self.summary = self._call("stop", reason, timeout_s=STOP_TIMEOUT_S)
            except (LinkClosed, TimeoutError):
                pass
        try:
            self._process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        with self._steps_ready:
            self._steps_ready.notify_all()
        for thread in self._threads:
            thread.join(STOP_TIMEOUT_S)
        self._link.close()
        return self.summary

    # --- the link ---------------------------------------------------------------------------
    def _call_ok(self, kind: str, *args: Any, timeout_s: float = REPLY_TIMEOUT_S) -> tuple[bool, Any]:
        """Send one message and wait for its answer ``(ok, value)``; :class:`LinkClosed` when the
        process is gone, :class:`TimeoutError` when it did not answer in time."""
        if self.ended is not None:
            raise LinkClosed(self.ended)
        ident = next(self._ids)
        with self._answered:
            self._replies[ident] = None
        try:
            self._link.send((kind, ident, *args))
            with self._answered:
                self._answered.wait_for(lambda: self._replies[ident] is not None or self.ended is not None, timeout_s)
        finally:
            with self._answered:
                answer = self._replies.pop(ident)
        if answer is not None:
            return answer
        if self.ended is not None:
            raise LinkClosed(self.ended)
        raise TimeoutError(f"the control process did not answer {kind} within {timeout_s:g} s")

    def _call(self, kind: str, *args: Any, timeout_s: float = REPLY_TIMEOUT_S) -> Any:
        ok, value = self._call_ok(kind, *args, timeout_s=timeout_s)
        if not ok:
            raise AsapError(f"the control process refused {kind}: {value}")
        return value

    def _receive(self) -> None:
        name_os_thread()
        while True:
            try:
                message = self._link.receive()
            except (LinkClosed, OSError):
                break
            if message[0] == "step":
                _kind, record, self.last_state = message
                with self._steps_ready:
                    if len(self._steps) == self._steps.maxlen:
                        self.dropped_steps += 1
                    self._steps.append(record)
                    self._steps_ready.notify()
            elif message[0] == "reply":
                _kind, ident, ok, value = message
                with self._answered:
                    if ident in self._replies:
                        self._replies[ident] = (ok, value)
                        self._answered.notify_all()
        code = self._process.wait()
        with self._answered:
            self.ended = f"control process ended (exit code {code})"
            self._answered.notify_all()
        with self._steps_ready:
            self._steps_ready.notify_all()

    def _drain(self) -> None:
        name_os_thread()
        while True:
            with self._steps_ready:
                self._steps_ready.wait_for(lambda: self._steps or self.ended is not None, 0.5)
                records = list(self._steps)
                self._steps.clear()
            for record in records:
                run_sinks(self._sinks, record, self.sink_errors)
            if self.ended is not None and not records:
                return
