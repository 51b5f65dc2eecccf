"""The real-time control thread: absolute deadlines around the pure :class:`Controller`.

One step: wake on the deadline, take the newest ``LowState`` that arrived after it (waiting
at most ``state_wait_s``), decode, ``Controller.step``, encode and write the ``LowCmd``.
Samples travel as raw XCDR1 bytes both ways (:class:`asap_ros.runtime.dds.RawReader` /
:class:`~asap_ros.runtime.dds.RawWriter`): the SDK's Python (de)serialiser (~0.5 ms) never runs here.
Nothing slow runs here: each step leaves a :class:`StepRecord` in a bounded queue that a
second thread hands to the sinks (DDS/ROS publishers, statistics). An e-stop wakes the loop
at once, so the damping command goes out without waiting for the next deadline.
"""

from __future__ import annotations

import collections
import gc
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from asap_ros.core.controller import Controller, StepOutput
from asap_ros.core.state import RobotState
from asap_ros.core.state_machine import EStop, Mode, Reset
from asap_ros.g1.codec import LowCmdEncoder, decode_lowstate_cdr
from asap_ros.runtime.lease import Verdict

Sink = Callable[["StepRecord"], None]


@dataclass
class StepRecord:
    """What one control step did, for publishers and recorders (off the control path)."""

    stamp_ns: int
    """System time at which the LowCmd was written."""
    control_tick: int
    output: StepOutput
    lowstate_tick: int
    lowstate_stamp_ns: int
    mocap_stamp_ns: int
    compute_ns: int
    latency_ns: int
    """LowCmd write time minus the arrival time of the LowState it was built from."""
    late: bool
    written: bool = True
    """The LowCmd went out (False: withheld, the supervisor holds rt/lowcmd or granted nothing)."""
    fault_latched: bool = False
    """DAMPING latched on this step: its command is the first damping command (a fault found in the
    step, an e-stop accepted since the previous step, or the supervisor's takeover)."""


class Arbiter(Protocol):
    """Whether this process may write rt/lowcmd now (:class:`asap_ros.runtime.arbitration.LowCmdArbiter`)."""

    def verdict(self, now_ns: int) -> Verdict: ...

    def beat(self, mode: Mode) -> None: ...

    def operator_reset(self) -> None: ...


class StateSource(Protocol):
    """Where the loop gets raw ``LowState`` samples with their arrival stamps."""

    def newest(self) -> tuple[bytes | None, int]: ...

    def next_arrival(self, timeout_s: float) -> tuple[bytes | None, int]: ...


class LatestState:
    """A :class:`StateSource` fed by another thread calling :meth:`put` (an in-process robot).

    On DDS the loop reads :class:`asap_ros.runtime.dds.PolledReader` itself instead: a listener
    feeding ``put`` would run Python on Cyclone's receive thread.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._payload: bytes | None = None
        self._stamp_ns = 0
        self._seq = 0

    def put(self, payload: bytes, stamp_ns: int) -> None:
        """DDS callback: keep only the newest sample, with the stamp taken on its arrival."""
        with self._cond:
            self._payload, self._stamp_ns = payload, stamp_ns
            self._seq += 1
            self._cond.notify_all()

    def newest(self) -> tuple[bytes | None, int]:
        """``(payload, stamp_ns)`` of the newest sample (``None`` before the first)."""
        with self._cond:
            return self._payload, self._stamp_ns

    def next_arrival(self, timeout_s: float) -> tuple[bytes | None, int]:
        """The first sample to arrive after this call, or the newest one after ``timeout_s``."""
        with self._cond:
            seq = self._seq
            self._cond.wait_for(lambda: self._seq > seq, timeout=timeout_s)
            return self._payload, self._stamp_ns


def existing_cpu(cpu: int) -> int:
    """``cpu`` if this machine has it, else ``ValueError`` naming the CPUs it has."""
    count = os.cpu_count() or 1
    if not 0 <= cpu < count:
        raise ValueError(f"CPU {cpu} does not exist (this machine has CPUs 0-{count - 1})")
    return cpu


class TimingStats:
    """Fixed-size rings of step latency and compute time, and the deadline-miss count."""

    def __init__(self, capacity: int = 1 << 16) -> None:
        self.latency_ns = np.zeros(capacity, dtype=np.int64)
        self.compute_ns = np.zeros(capacity, dtype=np.int64)
        self.count = 0
        self.deadline_misses = 0
        self.skipped_periods = 0

    def add(self, latency_ns: int, compute_ns: int) -> None:
        i = self.count % len(self.latency_ns)
        self.latency_ns[i] = latency_ns
        self.compute_ns[i] = compute_ns
        self.count += 1

    def summary(self) -> dict[str, float]:
        """Percentiles in microseconds over the retained steps (those built from a LowState)."""
        n = min(self.count, len(self.latency_ns))
        result: dict[str, float] = {
            "steps": self.count,
            "deadline_misses": self.deadline_misses,
            "skipped_periods": self.skipped_periods,
        }
        if n:
            for name, ring in (("latency", self.latency_ns), ("compute", self.compute_ns)):
                p50, p99, pmax = np.percentile(ring[:n], [50, 99, 100]) / 1e3
                result.update({f"{name}_p50_us": p50, f"{name}_p99_us": p99, f"{name}_max_us": pmax})
        return result


class ControlLoop:
    """Runs a :class:`Controller` at a fixed rate on its own thread.

    ``write_lowcmd(payload)`` is the only output on the control path: the DDS write of the
    LowCmd as raw XCDR1 bytes (``RawWriter("rt/lowcmd", LowCmd_).write``); ``states`` the
    input (``PolledReader("rt/lowstate", LowState_)`` on DDS; default a :class:`LatestState`
    to ``put`` samples into). ``last_state`` is the newest decoded state, for publishers on
    other threads (read it, never mutate it).
    """

    def __init__(
        self,
        controller: Controller,
        write_lowcmd: Callable[[bytes], None],
        period_s: float = 0.02,
        state_wait_s: float = 0.004,
        late_after_s: float = 0.005,
        realtime_priority: int = 0,
        cpus: frozenset[int] = frozenset(),
        record_queue: int = 1024,
        states: StateSource | None = None,
        arbiter: Arbiter | None = None,
    ) -> None:
        self.controller = controller
        self.states = states if states is not None else LatestState()
        self.stats = TimingStats()
        self.mocap_stamp_ns = 0
        self.last_state: RobotState | None = None
        self.decode_errors = 0
        self._write = write_lowcmd
        self._arbiter = arbiter
        self.withheld = 0
        """Steps whose LowCmd the arbiter withheld."""
        self._encoder = LowCmdEncoder()
        self._period_ns = int(round(period_s * 1e9))
        self._state_wait_s = state_wait_s
        self._late_after_ns = int(late_after_s * 1e9)
        self._priority = realtime_priority
        self._cpus = cpus
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._records: collections.deque[StepRecord] = collections.deque(maxlen=record_queue)
        self._records_ready = threading.Condition()
        self._sinks: list[Sink] = []
        self._threads: list[threading.Thread] = []
        self._mode_machine: int | None = None
        self._last_mode = controller.mode
        self._tick = 0
        self._dropped_records = 0
        self.scheduling_note: str | None = None
        """Why the control thread runs without the requested priority or CPU (set by :meth:`start`)."""
        self._scheduled = threading.Event()
        self.sink_errors: list[str] = []

    # --- operator side (any thread) -------------------------------------------------
    def request(self, req: Any) -> None:
        """Validate and apply an operator request; raises RejectedRequest, state unchanged."""
        with self._lock:
            self.controller.request(req, time.time_ns())
            if isinstance(req, Reset) and self._arbiter is not None:
                self._arbiter.operator_reset()
        if isinstance(req, EStop):
            self._wake.set()

    def add_sink(self, sink: Sink) -> None:
        """Call ``sink(record)`` for every step, from the sink thread, never the control thread."""
        self._sinks.append(sink)

    @property
    def dropped_records(self) -> int:
        """Step records a slow sink thread lost (the queue is bounded)."""
        return self._dropped_records

    # --- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        """Start the control and sink threads. Freezes the objects that exist now (``gc.freeze``):
        a collection runs on whichever thread allocates, holding the GIL, and a full one over
        a ROS node's start-up objects takes ~17 ms; frozen, later ones scan only newer objects."""
        gc.freeze()
        self._threads = [
            threading.Thread(target=self._run, name="asap-control", daemon=True),
            threading.Thread(target=self._drain, name="asap-sinks", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        self._scheduled.wait(1.0)  # so scheduling_note is known on return

    def stop(self, timeout_s: float = 2.0) -> None:
        self._stop.set()
        self._wake.set()
        with self._records_ready:
            self._records_ready.notify_all()
        for thread in self._threads:
            thread.join(timeout_s)

    # --- control thread --------------------------------------------------------------
    def _run(self) -> None:
        self._set_thread_scheduling()
        self._scheduled.set()
        late = False
        deadline = time.monotonic_ns() + self._period_ns
        while not self._stop.is_set():
            woken = self._wake.wait(max(0.0, (deadline - time.monotonic_ns()) / 1e9))
            if self._stop.is_set():
                break
            if woken:
                self._wake.clear()
                self._step(*self.states.newest(), late=False)
                continue
            # a sample arriving after the deadline: fresh, and its arrival starts the latency
            self._step(*self.states.next_arrival(self._state_wait_s), late)
            finished = time.monotonic_ns()
            late = finished > deadline + self._late_after_ns
            if late:
                self.stats.deadline_misses += 1
            deadline += self._period_ns
            if finished >= deadline:  # overran whole periods: skip them, keep the phase grid
                skipped = (finished - deadline) // self._period_ns + 1
                self.stats.skipped_periods += int(skipped)
                deadline += skipped * self._period_ns

    def _step(self, payload: bytes | None, arrival_ns: int, late: bool) -> None:
        started = time.time_ns()
        state = self._decode(payload, arrival_ns)
        if state is not None and state.crc_ok:
            self._mode_machine = state.mode_machine
            self.last_state = state
        verdict = self._arbiter.verdict(time.monotonic_ns()) if self._arbiter is not None else None
        with self._lock:
            if verdict is not None and verdict.fault is not None and self.controller.mode is not Mode.DAMPING:
                self.controller.request(EStop(verdict.fault), time.time_ns())
            output = self.controller.step(state, time.time_ns(), late)
        fault_latched = output.mode is Mode.DAMPING and self._last_mode is not Mode.DAMPING
        self._last_mode = output.mode
        if self._arbiter is not None:
            self._arbiter.beat(output.mode)
        if self._mode_machine is None:
            return  # never heard from the robot: a LowCmd needs its mode_machine
        may_write = verdict is None or verdict.may_write
        if may_write:
            self._write(self._encoder.encode_cdr(output.command, self._mode_machine))
        else:
            self.withheld += 1
        written = time.time_ns()
        latency = written - arrival_ns if state is not None else 0
        compute = written - started
        if state is not None and may_write:
            self.stats.add(latency, compute)
        self._tick += 1
        if len(self._records) == self._records.maxlen:
            self._dropped_records += 1
        self._records.append(
            StepRecord(
                stamp_ns=written,
                control_tick=self._tick,
                output=output,
                lowstate_tick=state.tick if state is not None else 0,
                lowstate_stamp_ns=arrival_ns if state is not None else 0,
                mocap_stamp_ns=self.mocap_stamp_ns,
                compute_ns=compute,
                latency_ns=latency,
                late=late,
                written=may_write,
                fault_latched=fault_latched,
            )
        )
        with self._records_ready:
            self._records_ready.notify()

    def _decode(self, payload: bytes | None, arrival_ns: int) -> RobotState | None:
        """A malformed sample is treated like one with a bad CRC: counted, its content never used."""
        if payload is None:
            return None
        try:
            return decode_lowstate_cdr(payload, arrival_ns)
        except ValueError:
            self.decode_errors += 1
            return RobotState(stamp_ns=arrival_ns, crc_ok=False)

    def _set_thread_scheduling(self) -> None:
        """SCHED_FIFO and CPU pinning of the control thread (Linux applies both per thread)."""
        notes = []
        if self._cpus:
            try:
                os.sched_setaffinity(0, self._cpus)
            except OSError as exc:  # e.g. a cpuset without that CPU
                notes.append(f"cannot pin the control thread to CPU {sorted(self._cpus)} ({exc.strerror}); not pinned")
        if self._priority > 0 and hasattr(os, "sched_setscheduler"):
            try:
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self._priority))
            except PermissionError:
                notes.append("SCHED_FIFO not permitted; running at normal priority")
        self.scheduling_note = "; ".join(notes) or None

    # --- sink thread -----------------------------------------------------------------
    def _drain(self) -> None:
        while True:
            with self._records_ready:
                self._records_ready.wait_for(lambda: self._records or self._stop.is_set(), 0.1)
            while self._records:
                record = self._records.popleft()
                for sink in self._sinks:
                    try:
                        sink(record)
                    except Exception as exc:  # a broken sink must not stop the others
                        if len(self.sink_errors) < 100:
                            self.sink_errors.append(f"{getattr(sink, '__qualname__', sink)}: {exc!r}")
            if self._stop.is_set():
                return
