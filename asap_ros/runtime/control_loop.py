"""The real-time control thread: absolute deadlines around the pure :class:`Controller`.

Real-time contract of one step (as ros2_control's ``update(time, period)``): wake on the
deadline (multiples of the period on the monotonic clock), take the newest ``LowState`` (waiting at most ``state_wait_s``, only when none arrived
since the previous step), decode, ``Controller.step``, encode and write the ``LowCmd``. Bounded
work, no I/O but the DDS write, no allocation beyond the step's arrays; nothing slow runs here:
each step leaves a :class:`StepRecord` in a bounded queue that a second thread hands to the
sinks. Samples travel as raw XCDR1 bytes both ways (:class:`asap_ros.runtime.dds.PolledReader` /
:class:`~asap_ros.runtime.dds.RawWriter`): the SDK's Python (de)serialiser never runs here.

An e-stop never waits for a step: :meth:`ControlLoop.request` latches it and writes the damping
LowCmd itself; from then on nothing but damping is written until an accepted Reset, and the
controller takes the EStop at its next step. An exception escaping a step (a bug, a broken
writer) latches DAMPING with the exception as the reason and the loop streams damping from
then on (:attr:`ControlLoop.fatal_error`). Durations come from the monotonic clock of the
loop's :class:`~asap_ros.runtime.clock.Clock`; system time only stamps records.

With an arbiter (the rt/lowcmd lease, :mod:`asap_ros.runtime.arbitration`) every write, the
step's, the e-stop's and the last resort's damping alike, is checked against the lease at the
instant of the write, under the lock that serialises writes: a step that outlived its lease
(a slow actor, a stall between its verdict and its write) writes nothing and latches DAMPING.
A fault in the lease's verdict latches DAMPING like an e-stop; when the supervisor has gone
silent the verdict makes the loop stream damping on its own.
"""

from __future__ import annotations

import collections
import dataclasses
import gc
import logging
import math
import os
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from asap_ros.core.controller import Controller, StepOutput
from asap_ros.core.errors import ConfigError, RejectedRequest
from asap_ros.core.lease import Verdict, Writer
from asap_ros.core.state import RobotState
from asap_ros.core.state_machine import EStop, Mode, Reset, Transition, describe
from asap_ros.g1.codec import LowCmdEncoder, decode_lowstate_cdr
from asap_ros.runtime.clock import SYSTEM_CLOCK, Clock
from asap_ros.runtime.fault_injection import FaultInjection
from asap_ros.runtime.scheduling import name_os_thread, on_grid, run_realtime
from asap_ros.runtime.thread_times import ProcTimes

Sink = Callable[["StepRecord"], None]
CONTROL_THREAD = "asap-control"
_log = logging.getLogger(__name__)


SINK_ERRORS_KEPT = 100
"""Sink errors kept for diagnostics (the oldest)."""


def run_sinks(sinks: list[Sink], record: StepRecord, errors: list[str]) -> None:
    """``sink(record)`` for each sink; a sink that raises is noted in ``errors`` (at most
    :data:`SINK_ERRORS_KEPT`) and the others still run."""
    for sink in sinks:
        try:
            sink(record)
        except Exception as exc:  # a broken sink must not stop the others
            if len(errors) < SINK_ERRORS_KEPT:
                errors.append(f"{getattr(sink, '__qualname__', sink)}: {exc!r}")


def _describe_exception(exc: BaseException) -> str:
    """``ZeroDivisionError('division by zero') at controller.py:231 in command``."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return repr(exc)
    last = frames[-1]
    return f"{exc!r} at {os.path.basename(last.filename)}:{last.lineno} in {last.name}"


@dataclass
class StepRecord:
    """What one control step did, for publishers and recorders (off the control path)."""

    stamp_ns: int
    """System time at which the LowCmd was written (data stamp)."""
    control_tick: int
    output: StepOutput
    lowstate_tick: int
    lowstate_stamp_ns: int
    """System time at which that LowState arrived (0: the step had none)."""
    mocap_stamp_ns: int
    compute_ns: int
    latency_ns: int
    """LowCmd write time minus the arrival time of the LowState it was built from (monotonic clock)."""
    late: bool
    written: bool = True
    """The LowCmd went out (False: withheld, the supervisor holds rt/lowcmd or granted nothing)."""
    fault_latched: bool = False
    """DAMPING latched on this step: its command is the first damping command (a fault found in the
    step, an e-stop since the previous step, the lease's fault, the last resort)."""


class Arbiter(Protocol):
    """Whether this process may write rt/lowcmd (:class:`asap_ros.runtime.arbitration.LowCmdArbiter`).

    :meth:`verdict` (at the start of a step) and :meth:`beat` (after it) are called from the
    control thread only; :meth:`allows_write` (read-only: the newest verdict's lease),
    :meth:`wrote`, :meth:`command_gap_fault` and :meth:`estop_taken` from any thread, under the
    loop's write lock, at the instant of each write or e-stop.
    """

    def verdict(self, now_ns: int) -> Verdict: ...

    def beat(self, mode: Mode, now_ns: int, wrote: bool, hears_robot: bool) -> None: ...

    def allows_write(self, now_ns: int) -> bool: ...

    def wrote(self, now_ns: int) -> None: ...

    def command_gap_fault(self, now_ns: int) -> str | None: ...

    def estop_taken(self, now_ns: int) -> None: ...


class StateSource(Protocol):
    """Where the loop gets raw ``LowState`` samples with their arrival stamps:
    ``(payload, stamp_ns, arrival_ns)``, system time and monotonic clock of one instant."""

    def newest(self) -> tuple[bytes | None, int, int]: ...

    def next_arrival(self, timeout_s: float) -> tuple[bytes | None, int, int]: ...


class LatestState:
    """A :class:`StateSource` fed by another thread calling :meth:`put` (an in-process robot).

    On DDS the loop reads :class:`asap_ros.dds.PolledReader` itself instead: a listener
    feeding ``put`` would run Python on Cyclone's receive thread.
    """

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._payload: bytes | None = None
        self._stamp_ns = 0
        self._arrival_ns = 0
        self._seq = 0

    def put(self, payload: bytes) -> None:
        """Keep only the newest sample, stamped (both clocks) on its arrival here."""
        stamp_ns, arrival_ns = self._clock.time_ns(), self._clock.monotonic_ns()
        with self._cond:
            self._payload, self._stamp_ns, self._arrival_ns = payload, stamp_ns, arrival_ns
            self._seq += 1
            self._cond.notify_all()

    def newest(self) -> tuple[bytes | None, int, int]:
        """``(payload, stamp_ns, arrival_ns)`` of the newest sample (``None`` before the first)."""
        with self._cond:
            return self._payload, self._stamp_ns, self._arrival_ns

    def next_arrival(self, timeout_s: float) -> tuple[bytes | None, int, int]:
        """The first sample to arrive after this call, or the newest one after ``timeout_s``."""
        with self._cond:
            seq = self._seq
            self._cond.wait_for(lambda: self._seq > seq, timeout=timeout_s)
            return self._payload, self._stamp_ns, self._arrival_ns


def control_period_s(controller: Controller, period_s: float | None = None) -> float:
    """``period_s``, by default the controller's actors' ``control_dt``."""
    period_s = controller.control_dt if period_s is None else period_s
    if period_s is None:
        raise ValueError("period_s is needed for a controller without actors")
    return period_s


def check_control_rate(rate_hz: float, controller: Controller, source: str, key: str = "control_rate_hz") -> None:
    """ConfigError unless ``rate_hz`` is the rate the controller's actors were trained at."""
    dt = controller.control_dt
    if dt is not None and not math.isclose(rate_hz * dt, 1.0, rel_tol=1e-6):
        spec = (next(iter(controller.policies.values()), None) or controller.hold_policy).spec
        problem = (f"must match the actors' control_dt {dt:g} s ({1 / dt:g} Hz, phase.control_dt in {spec.source}): "
                   "an actor stepped at another rate sees another phase and other dynamics")
        raise ConfigError(source, key, problem, rate_hz)


def existing_cpu(cpu: int) -> int:
    """``cpu`` if this machine has it, else ``ValueError`` naming the CPUs it has."""
    count = os.cpu_count() or 1
    if not 0 <= cpu < count:
        raise ValueError(f"CPU {cpu} does not exist (this machine has CPUs 0-{count - 1})")
    return cpu


@dataclass(frozen=True)
class Percentiles:
    """p50, p99 and max of one timing, microseconds."""

    p50_us: float
    p99_us: float
    max_us: float


@dataclass(frozen=True)
class LateSplit:
    """Where the late steps' time went, ms, summed over them: from each one's deadline to its end
    (a wait for a LowState left out), split by the control thread's ``/proc/thread-self/schedstat``,
    read once at the end of every step (~4 us, the GIL held). The parts add up to that time, except
    that ``ran_ms`` and ``cpu_wait_ms`` count from the previous step's end (its last bookkeeping,
    some us, before it sleeps) and ``off_cpu_ms`` is never negative."""

    ran_ms: float = 0.0
    """On a CPU: the step's own work (a slow actor call, decoding, DDS writes)."""
    cpu_wait_ms: float = 0.0
    """Runnable but waiting for a CPU, once the wake-up timer fired or within the step: threads of
    equal or higher priority (the simulator's, DDS receive threads, another process's) held both CPUs."""
    off_cpu_ms: float = 0.0
    """Neither running nor runnable: the timer's slack, the GIL (another thread of the process
    holding it) at the wake-up or within the step, a lock, a page fault, or its vCPU taken by the host."""


@dataclass(frozen=True)
class LoopStats:
    """The control loop's statistics at one instant (:meth:`ControlLoop.stats`)."""

    steps: int
    """Steps run (each left a :class:`StepRecord`)."""
    written: int
    withheld: int
    """Steps whose LowCmd the lease withheld (a takeover, no grant, a lease outlived)."""
    outlived_lease: int
    """Steps whose lease ran out between their verdict and their write (each latched DAMPING)."""
    written_past_lease: int
    """Writes that returned after the lease they were checked under had ended: the process stalled
    inside the write, and the command may have reached the robot late (each latched DAMPING)."""
    late_steps: int
    """Steps finished more than ``late_after_s`` past their deadline, not counting a wait for a
    state (none had arrived since the previous step: the state-age limit judges the stream)."""
    longest_late_run: int
    skipped_periods: int
    decode_errors: int
    write_errors: int
    last_write_error: str | None
    dropped_records: int
    latency: Percentiles | None
    """LowState taken -> LowCmd written, over the retained steps that wrote one built from a state."""
    compute: Percentiles | None
    """Wake-up -> LowCmd written, same steps."""
    wake_late: Percentiles | None
    """Wake-up minus deadline, every retained step (what the machine does to the thread)."""
    state_waits: int = 0
    """Steps that found no LowState newer than the previous step's and waited for one."""
    state_wait: Percentiles | None = None
    """How long those steps waited (at most ``state_wait_s``)."""
    gc_max_ms: float = 0.0
    """The longest garbage collection so far (run on the sink thread right after a step)."""
    late_woke: int = 0
    """Late steps whose thread woke more than ``late_after_s`` past the deadline: it did not get
    to run (the machine, or another thread of the process holding the GIL)."""
    late_in_gc: int = 0
    """Late steps that a garbage collection on the sink thread overlapped (it holds the GIL)."""
    late_split: LateSplit = LateSplit()
    """Where the late steps' time went, from the control thread's own schedstat."""
    ran_us_per_step: float = 0.0
    """The control thread's time on a CPU per step on the grid, mean over every step since its
    first (its schedstat, as :class:`LateSplit`; e-stop steps off the grid included)."""
    cpu_wait_us_per_step: float = 0.0
    """Its time runnable but waiting for a CPU per step, the same way: what threads of equal or
    higher priority took from it, late or not."""

    def as_dict(self) -> dict[str, Any]:
        """Flat keys for diagnostics and run summaries (``deadline_misses``, ``latency_p99_us``, ...)."""
        flat: dict[str, Any] = {
            "steps": self.steps, "written": self.written, "withheld": self.withheld,
            "outlived_lease": self.outlived_lease, "written_past_lease": self.written_past_lease,
            "deadline_misses": self.late_steps,
            "longest_late_run": self.longest_late_run, "skipped_periods": self.skipped_periods,
            "decode_errors": self.decode_errors, "write_errors": self.write_errors,
            "dropped_records": self.dropped_records,
        }  # fmt: skip
        flat["state_waits"], flat["gc_max_ms"] = self.state_waits, self.gc_max_ms
        flat["late_woke"], flat["late_in_gc"] = self.late_woke, self.late_in_gc
        flat.update({f"late_{name}": value for name, value in dataclasses.asdict(self.late_split).items()})
        flat["ran_us_per_step"], flat["cpu_wait_us_per_step"] = self.ran_us_per_step, self.cpu_wait_us_per_step
        for name, value in (("latency", self.latency), ("compute", self.compute), ("wake_late", self.wake_late),
                            ("state_wait", self.state_wait)):
            if value is not None:
                flat.update({f"{name}_p50_us": value.p50_us, f"{name}_p99_us": value.p99_us,
                             f"{name}_max_us": value.max_us})
        return flat


RECENT_STEPS = 12
"""Steps whose timing is kept for :meth:`ControlLoop.recent_steps`."""


class _Timing:
    """Fixed-size rings and counters behind :class:`LoopStats` (control thread writes, others read)."""

    def __init__(self, capacity: int = 1 << 16) -> None:
        self.latency_ns = np.zeros(capacity, dtype=np.int64)
        self.compute_ns = np.zeros(capacity, dtype=np.int64)
        self.wake_late_ns = np.zeros(capacity, dtype=np.int64)
        self.state_wait_ns = np.zeros(capacity, dtype=np.int64)
        self.timed = 0
        self.woken = 0
        self.state_waits = 0
        self.recent: collections.deque[tuple[int, int, int, int]] = collections.deque(maxlen=RECENT_STEPS)
        """(wake-up lateness, wait for a state, the step's own time, finish lateness) of the newest
        steps, ns: why a run of late steps was late."""
        self.late_steps = self.late_run = self.longest_late_run = self.skipped_periods = 0
        self.late_woke = self.late_in_gc = 0
        self.late_ran_ns = self.late_cpu_wait_ns = self.late_off_cpu_ns = 0
        self.cpu_first: tuple[int, int, int] | None = None
        self.cpu_last: tuple[int, int, int] = (0, 0, 0)
        self.cpu_steps = 0

    def woke(self, late_ns: int) -> None:
        self.wake_late_ns[self.woken % len(self.wake_late_ns)] = late_ns
        self.woken += 1

    def waited(self, wait_ns: int) -> None:
        self.state_wait_ns[self.state_waits % len(self.state_wait_ns)] = wait_ns
        self.state_waits += 1

    def step(self, latency_ns: int, compute_ns: int) -> None:
        i = self.timed % len(self.latency_ns)
        self.latency_ns[i], self.compute_ns[i] = latency_ns, compute_ns
        self.timed += 1

    def finished(self, late: bool, woke_late: bool, in_gc: bool, split: tuple[int, int, int] = (0, 0, 0)) -> None:
        """One step ended; ``split``: its ``(ran, cpu_wait, off_cpu)`` ns, summed when it was late."""
        self.late_run = self.late_run + 1 if late else 0
        self.late_steps += late
        self.late_woke += late and woke_late
        self.late_in_gc += late and in_gc
        self.longest_late_run = max(self.longest_late_run, self.late_run)
        if late:
            self.late_ran_ns += split[0]
            self.late_cpu_wait_ns += split[1]
            self.late_off_cpu_ns += split[2]

    def cpu(self, times: tuple[int, int, int]) -> None:
        """The control thread's cumulative times at a grid step's end (the first one: the baseline)."""
        if self.cpu_first is None:
            self.cpu_first = times
        else:
            self.cpu_steps += 1
        self.cpu_last = times

    def cpu_per_step_us(self) -> tuple[float, float]:
        """(on a CPU, waiting for one) per grid step since the first, us."""
        if self.cpu_first is None or not self.cpu_steps:
            return 0.0, 0.0
        first, last, steps = self.cpu_first, self.cpu_last, self.cpu_steps
        return (last[0] - first[0]) / steps / 1e3, (last[1] - first[1]) / steps / 1e3

    def late_split(self) -> LateSplit:
        return LateSplit(self.late_ran_ns / 1e6, self.late_cpu_wait_ns / 1e6, self.late_off_cpu_ns / 1e6)

    @staticmethod
    def percentiles(ring: np.ndarray, count: int) -> Percentiles | None:
        n = min(count, len(ring))
        if not n:
            return None
        p50, p99, pmax = np.percentile(ring[:n], [50, 99, 100]) / 1e3
        return Percentiles(float(p50), float(p99), float(pmax))


class Collector:
    """Python's garbage collection, run by the sink thread right after each control step instead
    of on whichever thread allocates (the control thread, mid-step, among them).

    Young objects every step, middle-aged every :data:`MIDDLE_EVERY` steps, all every
    :data:`FULL_EVERY` (objects frozen at start are never scanned); each collection timed.
    """

    MIDDLE_EVERY = 10
    FULL_EVERY = 1500
    """Steps between full collections (30 s at 50 Hz)."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._steps = 0
        self._owned = False
        self.max_ms = 0.0
        self.began_ns = self.ended_ns = 0
        """Monotonic start and end of the newest collection (``ended_ns`` < ``began_ns``: running)."""

    def take_over(self) -> None:
        """Stop Python's automatic collection (process-wide): from now on :meth:`after_step` collects."""
        self._owned = gc.isenabled()
        gc.disable()

    def give_back(self) -> None:
        if self._owned:
            gc.enable()
            self._owned = False

    def after_step(self) -> None:
        self._steps += 1
        generation = 2 if self._steps % self.FULL_EVERY == 0 else 1 if self._steps % self.MIDDLE_EVERY == 0 else 0
        self.began_ns = began = self._clock.monotonic_ns()
        gc.collect(generation)
        self.ended_ns = ended = self._clock.monotonic_ns()
        self.max_ms = max(self.max_ms, (ended - began) / 1e6)

    def overlapped(self, since_ns: int, until_ns: int) -> bool:
        """Whether the newest collection ran at some instant in [since_ns, until_ns]."""
        began, ended = self.began_ns, self.ended_ns
        return began <= until_ns and (ended < began or ended >= since_ns)


class ControlLoop:
    """Runs a :class:`Controller` at a fixed rate on its own thread.

    ``write_lowcmd(payload)`` is the only output on the control path: the DDS write of the
    LowCmd as raw XCDR1 bytes (``RawWriter("rt/lowcmd", LowCmd_).write``); ``states`` the
    input (``PolledReader("rt/lowstate", LowState_)`` on DDS; default a :class:`LatestState`
    to ``put`` samples into). ``period_s`` defaults to the actors' ``control_dt`` and must match
    it. ``last_state`` is the newest decoded state, for publishers on other threads (read it,
    never mutate it). ``fault_injection`` (test support, :mod:`asap_ros.runtime.fault_injection`)
    is None in operation.

    Two locks: the step lock, held while the controller computes a step (and while it applies
    an operator request), and the small write lock around each ``write_lowcmd`` and the lease
    check just before it. An e-stop takes only the write lock (:meth:`request`). An exception
    escaping a step latches DAMPING for good (:attr:`fatal_error`) and the loop streams damping
    every period while the writer works. ``arbiter`` (optional): the rt/lowcmd lease; a
    withheld write still leaves a StepRecord (``written`` False), a failed one none. ``mocap``
    (optional): the newest mocap pose's stamp (ns, 0: none; :class:`~asap_ros.runtime.mocap.MocapStamps`),
    asked once per step after its write, for the step's record.
    """

    def __init__(
        self,
        controller: Controller,
        write_lowcmd: Callable[[bytes], None],
        period_s: float | None = None,
        state_wait_s: float = 0.004,
        late_after_s: float = 0.005,
        realtime_priority: int = 0,
        cpus: frozenset[int] = frozenset(),
        record_queue: int = 1024,
        states: StateSource | None = None,
        clock: Clock = SYSTEM_CLOCK,
        fault_injection: FaultInjection | None = None,
        arbiter: Arbiter | None = None,
        mocap: Callable[[], int] | None = None,
    ) -> None:
        period_s = control_period_s(controller, period_s)
        check_control_rate(1.0 / period_s, controller, "ControlLoop", "1 / period_s")
        self.controller = controller
        self.fault_injection = fault_injection
        """Test support (:mod:`asap_ros.runtime.fault_injection`); None in operation."""
        self.clock = clock if fault_injection is None else fault_injection.clock(clock)
        self.states = states if states is not None else LatestState(self.clock)
        self.mocap_stamp_ns = 0
        """Stamp (ns) of the newest mocap pose (0: none), set from ``mocap`` after each write."""
        self._mocap = mocap
        self.last_state: RobotState | None = None
        self.fatal_error: str | None = None
        """Why the control loop stopped running the controller (an exception escaped a step, or
        the thread ended); DAMPING is streamed from then on and no request but EStop is accepted."""
        self._write = write_lowcmd
        self._arbiter = arbiter
        self._timing = _Timing()
        self._written = self._withheld = self._outlived = self._written_past_lease = self._decode_errors = self._write_errors = 0
        self._last_write_error: str | None = None
        self._encoder = LowCmdEncoder()
        self._damping_encoder = LowCmdEncoder()
        self._damping = controller.damping_command
        self._damping_payload: bytes | None = None
        """The damping LowCmd for the robot's mode_machine, encoded in advance for the e-stop."""
        self._max_state_age_ns = int(controller.config.safety.max_state_age_ms * 1e6)
        self._period_ns = int(round(period_s * 1e9))
        self._state_wait_s = state_wait_s
        self._late_after_ns = int(late_after_s * 1e9)
        self._priority = realtime_priority
        self._cpus = cpus
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._damping_only = False
        """Set by an e-stop (a fatal error, an outlived lease), under the write lock: nothing but
        damping is written until an accepted Reset."""
        self._pending_estop: EStop | None = None
        self._fatal_output: StepOutput | None = None
        self._last_damping = controller.mode is Mode.DAMPING
        """The previous step's command was damping (:attr:`StepRecord.fault_latched` marks the first)."""
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._records: collections.deque[StepRecord] = collections.deque(maxlen=record_queue)
        self._records_ready = threading.Condition()
        self._sinks: list[Sink] = []
        self._threads: list[threading.Thread] = []
        self._mode_machine: int | None = None
        self._tick = 0
        self._taken_arrival_ns = -1
        self._last_wait_ns = 0
        """Arrival stamp of the sample the previous step took (a step waits only for a newer one)."""
        self._dropped_records = 0
        self._collector = Collector(self.clock)
        self._thread_times = ProcTimes(steal=False)
        """The control thread's schedstat (opened by its first call, on that thread): :class:`LateSplit`."""
        self.scheduling_note: str | None = None
        """Why the control thread runs without the requested priority or CPU (set by :meth:`start`)."""
        self._scheduled = threading.Event()
        self.sink_errors: list[str] = []
        if fault_injection is not None:
            fault_injection.install(controller)
            _log.warning("fault injection active (test support only): %s", fault_injection.describe())

    # --- operator side (any thread) -------------------------------------------------
    def request(self, req: Any) -> None:
        """Validate and apply an operator request; raises RejectedRequest, state unchanged.

        An EStop never waits for a running step: it is latched, the damping LowCmd is written
        at once from this thread, and the controller takes the EStop at its next step. Any
        other request waits for the step lock and applies a latched EStop first.
        """
        if isinstance(req, EStop):
            self._latch(req, write_now=True)
            return
        with self._lock:
            self._apply_pending_estop()
            if self.fatal_error is not None:
                raise RejectedRequest(
                    f"{describe(req)} refused: the control loop failed ({self.fatal_error}); it streams damping "
                    "until asap_deploy is restarted")
            self.controller.request(req, self.clock.monotonic_ns(), self.clock.time_ns())
            if isinstance(req, Reset):
                with self._write_lock:
                    self._damping_only = self._pending_estop is not None

    def _latch(self, req: EStop, write_now: bool) -> None:
        """Latch ``req``: damping only from now on; with ``write_now`` the damping LowCmd goes out
        from this thread at once, if the lease allows a write at this instant."""
        with self._write_lock:
            self._damping_only = True
            if self._pending_estop is None:
                self._pending_estop = req
            if self._arbiter is not None:
                self._arbiter.estop_taken(self.clock.monotonic_ns())
            if write_now and self._damping_payload is not None:
                try:
                    self._write_within_lease(self._damping_payload)
                except Exception as exc:  # the control thread retries every period
                    self._count_write_error(exc)
        self._wake.set()

    def _allows_write(self) -> bool:
        """A write now stays within the lease (write lock held)."""
        return self._arbiter is None or self._arbiter.allows_write(self.clock.monotonic_ns())

    @property
    def mode(self) -> Mode:
        """The controller's mode, or DAMPING as soon as an e-stop is latched or the loop failed."""
        if self.fatal_error is not None or self._pending_estop is not None:
            return Mode.DAMPING
        return self.controller.mode

    @property
    def fault_reason(self) -> str | None:
        """Why DAMPING: the loop's failure, the controller's latched reason, or a latched e-stop."""
        pending = self._pending_estop
        return (self.fatal_error or self.controller.fault_reason
                or (f"e-stop: {pending.reason}" if pending is not None else None))

    @property
    def alive(self) -> bool:
        """The control thread runs (after :meth:`start`, until :meth:`stop` or its death)."""
        return any(t.name == CONTROL_THREAD and t.is_alive() for t in self._threads)

    def add_sink(self, sink: Sink) -> None:
        """Call ``sink(record)`` for every step, from the sink thread, never the control thread."""
        self._sinks.append(sink)

    def stats(self) -> LoopStats:
        """The statistics now (any thread; the rings are read as they are)."""
        t = self._timing
        ran_us, cpu_wait_us = t.cpu_per_step_us()
        return LoopStats(
            steps=self._tick, written=self._written, withheld=self._withheld, outlived_lease=self._outlived,
            written_past_lease=self._written_past_lease,
            late_steps=t.late_steps, longest_late_run=t.longest_late_run, skipped_periods=t.skipped_periods,
            decode_errors=self._decode_errors, write_errors=self._write_errors,
            last_write_error=self._last_write_error, dropped_records=self._dropped_records,
            latency=t.percentiles(t.latency_ns, t.timed), compute=t.percentiles(t.compute_ns, t.timed),
            wake_late=t.percentiles(t.wake_late_ns, t.woken), state_waits=t.state_waits,
            state_wait=t.percentiles(t.state_wait_ns, t.state_waits), gc_max_ms=self._collector.max_ms,
            late_woke=t.late_woke, late_in_gc=t.late_in_gc, late_split=t.late_split(),
            ran_us_per_step=ran_us, cpu_wait_us_per_step=cpu_wait_us,
        )  # fmt: skip

    def recent_steps(self) -> str:
        """The newest steps' timing, ms, oldest first: ``wake +0.1 / wait 0.0 / step 1.2 = 1.3``
        each (wake-up after the deadline, waiting for a state, the step itself, finish after the
        deadline): why a run of late steps was late."""
        return ", ".join(f"wake +{w / 1e6:.1f} / wait {s / 1e6:.1f} / step {c / 1e6:.1f} = {f / 1e6:.1f}"
                         for w, s, c, f in list(self._timing.recent))

    def wake_lateness_ns(self) -> np.ndarray:
        """Wake-up minus deadline of the retained steps, oldest first (benchmarks)."""
        t = self._timing
        ring, n = t.wake_late_ns, t.woken
        return ring[:n].copy() if n <= len(ring) else np.roll(ring, -(n % len(ring)))

    # --- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        """Start the control and sink threads. Freezes the objects that exist now (``gc.freeze``)
        and hands garbage collection to the sink thread (:class:`Collector`): a collection holds
        the GIL on whichever thread allocates (a full one over a ROS node's start-up objects ~17 ms,
        a young one 2-7 ms on this machine), so it runs right after a step, not inside one."""
        gc.freeze()
        self._collector.take_over()
        self._threads = [
            threading.Thread(target=self._run, name=CONTROL_THREAD, daemon=True),
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
        try:
            self._set_thread_scheduling()
        finally:
            self._scheduled.set()
        try:
            self._loop()
        except BaseException as exc:  # the thread ends: no more LowCmd, records or lease beats
            self.fatal_error = self.fatal_error or f"control thread ended: {exc!r}"
            raise
        finally:
            self._thread_times.close()

    def _loop(self) -> None:
        clock, timing, thread_times = self.clock, self._timing, self._thread_times
        # deadlines on multiples of the period of the monotonic clock: another process's periodic
        # thread can sleep to them (the floor probe) or keep off them (the step probe)
        deadline = on_grid(clock.monotonic_ns(), self._period_ns)
        ended = thread_times()
        while not self._stop.is_set():
            woken = self._wake.wait(max(0.0, (deadline - clock.monotonic_ns()) / 1e9))
            if self._stop.is_set():
                break
            if woken:  # an e-stop: a step at once, off the grid
                self._wake.clear()
                self._guarded_step(self.states.newest, late=False)
                ended = thread_times()
                continue
            now = clock.monotonic_ns()
            timing.woke(now - deadline)
            self._last_wait_ns = 0
            self._guarded_step(self._take, timing.late_run > 0)
            finished = clock.monotonic_ns()
            previous, ended = ended, thread_times()
            timing.cpu(ended)
            # late: the loop's own lateness past late_after_s; a wait for a state that had not come
            # (at most state_wait_s) is the robot stream's delay, which the state-age limit judges
            late = finished - self._last_wait_ns > deadline + self._late_after_ns
            split = (0, 0, 0)
            if late:  # from the previous step's end to this one's, the state wait left out
                ran, queued = ended[0] - previous[0], ended[1] - previous[1]
                split = (ran, queued, max(0, finished - deadline - self._last_wait_ns - ran - queued))
            timing.finished(late, now - deadline > self._late_after_ns,
                            late and self._collector.overlapped(deadline, finished), split)
            timing.recent.append((now - deadline, self._last_wait_ns, finished - now - self._last_wait_ns,
                                  finished - deadline))
            deadline += self._period_ns
            if finished >= deadline:  # overran whole periods: skip them, keep the phase grid
                following = on_grid(finished, self._period_ns, deadline)
                timing.skipped_periods += int((following - deadline) // self._period_ns)
                deadline = following

    def _take(self) -> tuple[bytes | None, int, int]:
        """The newest LowState; only when none arrived since the previous step, the next one to
        arrive within ``state_wait_s`` (the robot's 500 Hz stream leaves one waiting every 2 ms)."""
        sample = self.states.newest()
        if sample[0] is None or sample[2] == self._taken_arrival_ns:
            began = self.clock.monotonic_ns()
            sample = self.states.next_arrival(self._state_wait_s)
            self._last_wait_ns = self.clock.monotonic_ns() - began
            if self._taken_arrival_ns >= 0:  # (before the robot's first state: no wait counted)
                self._timing.waited(self._last_wait_ns)
        if sample[0] is not None:
            self._taken_arrival_ns = sample[2]
        return sample

    def _guarded_step(self, take: Callable[[], tuple[bytes | None, int, int]], late: bool) -> None:
        """One step; an exception escaping it is the last-resort path, never the thread's end."""
        try:
            self._step(*take(), late)
        except Exception as exc:
            self._on_step_error(exc)

    def _step(self, payload: bytes | None, stamp_ns: int, arrival_ns: int, late: bool) -> None:
        clock = self.clock
        started = clock.monotonic_ns()
        state = self._decode(payload, stamp_ns, arrival_ns)
        if state is not None and state.crc_ok:
            self._set_mode_machine(state.mode_machine)
            self.last_state = state
        verdict = self._arbiter.verdict(clock.monotonic_ns()) if self._arbiter is not None else None
        if self._fatal_output is not None:
            output = self._fatal_output
        else:
            with self._lock:
                self._apply_pending_estop()
                if verdict is not None and verdict.fault is not None and self.controller.mode is not Mode.DAMPING:
                    self.controller.request(EStop(verdict.fault), clock.monotonic_ns(), clock.time_ns())
                faults = self.fault_injection
                if faults is not None:
                    faults.before_step(self._tick + 1)
                output = self.controller.step(state, clock.monotonic_ns(), late, clock.time_ns())
                if faults is not None:
                    faults.after_step(output)  # a slow step stalls here: between its verdict and its write
        if self._mode_machine is None:
            self._beat(output.mode, wrote=False)
            return  # never heard from the robot: a LowCmd needs its mode_machine
        output, damping, wrote = self._write_command(output, verdict, started)
        self._beat(output.mode, wrote)  # not after a write that raised: the lease runs out, the supervisor takes over
        written = clock.monotonic_ns()
        latency = written - arrival_ns if state is not None else 0
        compute = written - started
        if state is not None and wrote:
            self._timing.step(latency, compute)
        if self._mocap is not None:
            self.mocap_stamp_ns = self._mocap()
        self._record(output, damping, state, stamp_ns, compute, latency, late, wrote)

    def _beat(self, mode: Mode, wrote: bool) -> None:
        if self._arbiter is not None:
            now = self.clock.monotonic_ns()
            state = self.last_state
            hears_robot = state is not None and now - state.arrival_ns <= self._max_state_age_ns
            self._arbiter.beat(mode, now, wrote, hears_robot)

    def _write_command(self, output: StepOutput, verdict: Verdict | None, started_ns: int) -> tuple[StepOutput, bool, bool]:
        """Write the step's command (damping when an e-stop is latched or the loop streams damping
        on its own) if the lease allows a write at this instant. Returns what the step commands,
        whether that is damping, and whether it was written."""
        assert self._mode_machine is not None  # the caller checks: a LowCmd needs the robot's mode_machine
        payload: bytes | None = self._encoder.encode_cdr(output.command, self._mode_machine)
        own_damping = verdict is not None and verdict.writer is Writer.OWN_DAMPING
        with self._write_lock:
            gap = None
            if self._arbiter is not None and not self._damping_only and self._allows_write():
                gap = self._arbiter.command_gap_fault(self.clock.monotonic_ns())
            if gap is not None:  # the motors went limp: no stiff command on an old state
                self._damping_only = True
                if self._pending_estop is None:
                    self._pending_estop = EStop(gap)
            if (self._damping_only or own_damping) and output.command is not self._damping:
                payload, output = self._damping_payload, dataclasses.replace(output, command=self._damping)
            wrote = self._write_within_lease(payload)
            if not wrote:
                self._withheld += 1
                if verdict is not None and verdict.may_write and not self._damping_only:
                    self._outlive(verdict, started_ns)
            damping = self._damping_only or output.mode is Mode.DAMPING or own_damping
        return output, damping, wrote

    def _write_within_lease(self, payload: bytes) -> bool:
        """Write ``payload`` if the lease allows a write now (write lock held); whether it did.

        A write that returned after the lease it was checked under had ended may have reached the
        robot late, beside the supervisor's damping: no check before the write closes that window
        (a process stopped inside it). Such a write is counted and latches DAMPING with the
        write's duration as the reason."""
        began_ns = self.clock.monotonic_ns()
        if not self._allows_write():
            return False
        self._write(payload)
        self._written += 1
        if self._arbiter is not None:
            self._arbiter.wrote(began_ns)
        if self._allows_write():
            return True
        self._written_past_lease += 1
        self._damping_only = True
        if self._pending_estop is None:
            took_ms = (self.clock.monotonic_ns() - began_ns) / 1e6
            self._pending_estop = EStop(f"a LowCmd write returned after its lease had ended: it took {took_ms:.0f} ms "
                                        "(the process stalled inside it); the command may have reached the robot late")
        return True

    def _outlive(self, verdict: Verdict, started_ns: int) -> None:
        """The lease the step began under ran out before its write (write lock held): the command
        is dropped and DAMPING latched; the controller takes it at the next step."""
        self._outlived += 1
        now = self.clock.monotonic_ns()
        reason = (f"control step outlived its lease: began {(now - started_ns) / 1e6:.0f} ms ago, lease ended "
                  f"{(now - verdict.write_until_ns) / 1e6:.0f} ms ago; its command was not written")
        self._damping_only = True
        if self._pending_estop is None:
            self._pending_estop = EStop(reason)

    def _record(self, output: StepOutput, damping: bool, state: RobotState | None, stamp_ns: int, compute: int,
                latency: int, late: bool, written: bool) -> None:
        fault_latched, self._last_damping = damping and not self._last_damping, damping
        self._tick += 1
        if len(self._records) == self._records.maxlen:
            self._dropped_records += 1
        self._records.append(
            StepRecord(
                stamp_ns=self.clock.time_ns(),
                control_tick=self._tick,
                output=output,
                lowstate_tick=state.tick if state is not None else 0,
                lowstate_stamp_ns=stamp_ns if state is not None else 0,
                mocap_stamp_ns=self.mocap_stamp_ns,
                compute_ns=compute,
                latency_ns=latency,
                late=late,
                written=written,
                fault_latched=fault_latched,
            )
        )
        with self._records_ready:
            self._records_ready.notify()

    def _apply_pending_estop(self) -> None:
        """Hand a latched EStop to the controller (step lock held)."""
        with self._write_lock:
            req, self._pending_estop = self._pending_estop, None
        if req is not None:
            self.controller.request(req, self.clock.monotonic_ns(), self.clock.time_ns())

    def _set_mode_machine(self, mode_machine: int) -> None:
        """Encode with the robot's newest mode_machine (a LowCmd with another is ignored by the
        robot; a change while the motors are powered is a fault of the controller's safety check)."""
        if mode_machine != self._mode_machine:
            payload = self._damping_encoder.encode_cdr(self._damping, mode_machine)
            with self._write_lock:
                self._mode_machine, self._damping_payload = mode_machine, payload

    def _on_step_error(self, exc: Exception) -> None:
        """Last resort: latch DAMPING with the exception as the reason and stream damping from now on."""
        if self._fatal_output is not None:  # already streaming damping: the write itself fails
            self._count_write_error(exc)
            return
        reason = f"control step raised {_describe_exception(exc)}"
        self.fatal_error = reason
        with self._write_lock:
            self._damping_only = True
        try:
            transition = self.controller.fail(reason, self.clock.time_ns())
        except Exception:  # the controller is broken: report the switch without it
            transition = None
        if transition is None:
            transition = Transition(Mode.DAMPING, Mode.DAMPING, reason, self.clock.time_ns())
        first = StepOutput(command=self._damping, mode=Mode.DAMPING, policy=None, transition=transition, fault=reason)
        self._fatal_output = dataclasses.replace(first, transition=None)
        if self._mode_machine is None:
            return
        try:
            _, _, wrote = self._write_command(first, None, self.clock.monotonic_ns())
        except Exception as write_exc:
            self._count_write_error(write_exc)
            return
        self._record(first, True, None, 0, 0, 0, False, wrote)

    def _count_write_error(self, exc: Exception) -> None:
        self._write_errors += 1
        self._last_write_error = repr(exc)

    def _decode(self, payload: bytes | None, stamp_ns: int, arrival_ns: int) -> RobotState | None:
        """A malformed sample is treated like one with a bad CRC: counted, its content never used."""
        if payload is None:
            return None
        try:
            return decode_lowstate_cdr(payload, stamp_ns, arrival_ns)
        except ValueError:
            self._decode_errors += 1
            return RobotState(stamp_ns=stamp_ns, arrival_ns=arrival_ns, crc_ok=False)

    def _set_thread_scheduling(self) -> None:
        """SCHED_FIFO and CPU pinning of the control thread (Linux applies both per thread)."""
        notes = []
        if self._cpus:
            try:
                os.sched_setaffinity(0, self._cpus)
            except OSError as exc:  # e.g. a cpuset without that CPU
                notes.append(f"cannot pin the control thread to CPU {sorted(self._cpus)} ({exc.strerror}); not pinned")
        refused = run_realtime(self._priority)
        if refused:
            notes.append(refused)
        self.scheduling_note = "; ".join(notes) or None

    # --- sink thread -----------------------------------------------------------------
    def _drain(self) -> None:
        name_os_thread()
        while True:
            with self._records_ready:
                self._records_ready.wait_for(lambda: self._records or self._stop.is_set(), 0.1)
            drained = bool(self._records)
            while self._records:
                run_sinks(self._sinks, self._records.popleft(), self.sink_errors)
            if drained:
                self._collector.after_step()
            if self._stop.is_set():
                self._collector.give_back()
                return
