"""DDS set-up for unitree_sdk2py channels, and raw (pre-serialised) readers and writers.

unitree_sdk2py's channel factory is process-global: :func:`init_channels` initialises it
once per process (Cyclone DDS on the given network interface, ``lo`` for a simulator on this
machine) and refuses a second, different domain or interface.

:class:`RawWriter`, :class:`RawReader` and :class:`PolledReader` move XCDR1 bytes on a typed
topic without the Python (de)serialiser, which costs about 0.5 ms per hg ``LowState_``: the
simulator and the control loop use them with :mod:`asap_ros.g1.layout`'s wire layouts. Peers see
ordinary samples of the topic's type.
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from collections.abc import Callable

from cyclonedds._clayer import ddspy_take, ddspy_write  # the C layer under DataWriter.write / DataReader.take
from cyclonedds.core import DDSException, GuardCondition, InstanceState, ReadCondition, SampleState, ViewState, WaitSet
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter
from cyclonedds.qos import Policy, Qos
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic

from asap_ros.core.errors import AsapError
from asap_ros.runtime.scheduling import fifo_permitted, run_realtime

DEFAULT_INTERFACE = "lo"
RECEIVE_THREADS = ("recv", "recvUC", "recvMC", "dq.user", "dq.builtins", "tev")
"""Cyclone DDS's threads that receive and deliver samples (and send the acknowledgements of
reliable ones): with a ``receive_priority`` they run SCHED_FIFO, so a sample reaches its reader
however busy the machine's ordinary threads are."""
CLOSE_WAIT_S = 5.0
"""How long closing a reader waits for its thread (a handler call in progress) to finish."""

_lock = threading.Lock()
_initialised: tuple[int, str] | None = None
_participant: DomainParticipant | None = None


def cyclone_config(interface: str, receive_priority: int = 0) -> str:
    """The Cyclone DDS configuration of this process's domain: the network interface, and with
    ``receive_priority`` > 0 the :data:`RECEIVE_THREADS` under SCHED_FIFO at that priority
    (``$__IF_NAME__$`` stands for the interface, as in unitree_sdk2py's own template)."""
    threads = "".join(
        f'<Thread Name="{name}"><Scheduling><Class>realtime</Class><Priority>{receive_priority}</Priority>'
        "</Scheduling></Thread>" for name in RECEIVE_THREADS) if receive_priority > 0 else ""
    return ('<?xml version="1.0" encoding="UTF-8" ?><CycloneDDS><Domain Id="any"><General><Interfaces>'
            '<NetworkInterface name="$__IF_NAME__$" priority="default" multicast="default"/></Interfaces></General>'
            f"{'<Threads>' + threads + '</Threads>' if threads else ''}</Domain></CycloneDDS>").replace(
                "$__IF_NAME__$", interface)


def init_channels(domain: int, interface: str = DEFAULT_INTERFACE, receive_priority: int = 0) -> None:
    """Initialise unitree_sdk2py's channel factory once for this process, with this project's
    Cyclone configuration (:func:`cyclone_config`; the SDK's own also writes a trace file).

    Repeating the same call is a no-op; a different domain or interface raises
    :class:`AsapError` (the factory cannot be re-initialised). ``receive_priority`` counts only
    at the first call (Cyclone starts its threads once).
    """
    global _initialised
    if not 0 <= domain <= 232:
        raise AsapError(f"DDS domain id must be 0..232, got {domain}")
    if not 0 <= receive_priority <= 99:
        raise AsapError(f"DDS receive thread priority must be 0..99, got {receive_priority}")
    with _lock:
        if _initialised == (domain, interface):
            return
        if _initialised is not None:
            raise AsapError(
                f"unitree channels already initialised on domain {_initialised[0]} interface "
                f"{_initialised[1]!r} in this process; cannot switch to domain {domain} interface "
                f"{interface!r} (use a separate process)"
            )
        import unitree_sdk2py.core.channel as sdk_channel

        # the SDK fills its template with the interface name; ours carries the thread scheduling
        sdk_channel.ChannelConfigHasInterface = cyclone_config("$__IF_NAME__$", receive_priority)
        if receive_priority > 0 and not fifo_permitted():
            sdk_channel.ChannelConfigHasInterface = cyclone_config("$__IF_NAME__$")
        try:
            sdk_channel.ChannelFactoryInitialize(domain, interface)
        except Exception as exc:  # the SDK raises a bare Exception
            raise AsapError(f"DDS initialisation failed (domain {domain}, interface {interface!r}): {exc}") from exc
        _initialised = (domain, interface)


def initialised_domain() -> int:
    """The domain :func:`init_channels` set up; :class:`AsapError` before it was called."""
    if _initialised is None:
        raise AsapError("DDS not initialised: call asap_ros.runtime.dds.init_channels(domain, interface) first")
    return _initialised[0]


def participant() -> DomainParticipant:
    """This process's own participant on the initialised domain (for raw readers/writers)."""
    global _participant
    domain = initialised_domain()
    with _lock:
        if _participant is None:
            _participant = DomainParticipant(domain)
        return _participant


class RawWriter:
    """Writes already serialised XCDR1 samples (with encapsulation header) to a typed topic."""

    def __init__(self, topic: str, idl_type: type, qos: Qos | None = None) -> None:
        dp = participant()
        self._writer = DataWriter(dp, Topic(dp, topic, idl_type), qos=qos)
        self.written = 0
        """Samples written so far (benchmarks compare it with what a recorder got)."""

    def write(self, payload: bytes) -> None:
        """Publish one sample; ``payload`` length must be a multiple of 4 (XCDR1 alignment)."""
        ret = ddspy_write(self._writer._ref, payload)
        if ret < 0:
            raise DDSException(ret, "raw write")
        self.written += 1

    def matched(self) -> int:
        """Number of matched readers."""
        return len(self._writer.get_matched_subscriptions())

    def close(self) -> None:
        close_entity(self._writer)


PayloadHandler = Callable[[bytes, int, int], None]
"""``handler(payload, stamp_ns, writer)``: called on the reader's own thread for every received
sample; ``writer`` is the DDS publication handle of the sample's writer (one per writer)."""


_ANY_SAMPLE = SampleState.Any | ViewState.Any | InstanceState.Any


def _waitset_on_new_data(dp: DomainParticipant, reader: DataReader) -> WaitSet:
    """A waitset that wakes when ``reader`` has samples not yet taken."""
    waitset = WaitSet(dp)
    waitset.attach(ReadCondition(reader, SampleState.NotRead | ViewState.Any | InstanceState.Any))
    return waitset


def matched_participant(reader: DataReader, cache: dict[int, bytes], writer: int) -> bytes:
    """The DDS participant (GUID prefix, 16 bytes) of writer handle ``writer`` that ``reader``
    matched; ``b""`` if it is no longer matched. Kept in ``cache``: the handle stays the writer's."""
    known = cache.get(writer)
    if known is None:
        endpoint = reader.get_matched_publication_data(writer)
        known = endpoint.participant_key.bytes if endpoint is not None else b""
        if known:
            cache[writer] = known
    return known


class RawReader:
    """Hands each received sample's XCDR1 bytes (with header) and its arrival stamp to a handler.

    The handler runs on a thread of this reader, which waits in a waitset with the GIL
    released; Cyclone's receive thread never runs Python. (A listener would: it then waits for
    the GIL whenever another thread holds it, stalling all reception in the process, and a
    write from this process on the same topic, which holds the GIL, would deadlock.) Samples
    queue in the reader's history (``depth``) while the handler runs. A handler exception is
    counted in ``handler_errors`` (the newest in ``last_handler_error``); the reader goes on.
    """

    def __init__(
        self, topic: str, idl_type: type, handler: PayloadHandler, depth: int = 64, ignore_local: bool = False,
        qos: Qos | None = None, realtime_priority: int = 0, start: bool = True, source_stamps: bool = False,
    ) -> None:
        """``qos`` is added to keep-last ``depth`` (and ignore-local), its policies winning;
        ``source_stamps``: the handler also gets the writer's source timestamp (ns, its wall
        clock at the write) as a fourth argument;
        ``realtime_priority`` > 0 runs the handler thread under SCHED_FIFO (``scheduling_note``
        says why not, when refused); ``start`` False: the handler runs only after :meth:`start`
        (for a handler that needs the reader itself, e.g. :meth:`participant_of`)."""
        dp = participant()
        policies = Qos(Policy.History.KeepLast(depth), *([Policy.IgnoreLocal.Participant] if ignore_local else []))
        self._handler = handler
        self._source_stamps = source_stamps
        self._depth = depth
        self._participants: dict[int, bytes] = {}
        self._reader = DataReader(dp, Topic(dp, topic, idl_type), qos=policies + qos if qos else policies)
        self._waitset = _waitset_on_new_data(dp, self._reader)
        self._closing = GuardCondition(dp)
        self._waitset.attach(self._closing)
        self._stop = False
        self._closed = False
        self._closed_by_handler = False
        self.handler_errors = 0
        self.last_handler_error: str | None = None
        self._priority = realtime_priority
        self.scheduling_note: str | None = None
        self._thread = threading.Thread(target=self._run, name=f"dds {topic}", daemon=True)
        _open_readers.add(self)
        if start:
            self.start()

    def start(self) -> None:
        """Start handing samples to the handler (samples that came before wait in the history)."""
        self._thread.start()

    def _run(self) -> None:
        self.scheduling_note = run_realtime(self._priority)
        self._read()
        if self._closed_by_handler:  # nobody else can delete them once this thread has left
            self._delete()

    def _read(self) -> None:
        while not self._stop:
            self._waitset.wait(1_000_000_000)
            stamp_ns = time.time_ns()
            samples = ddspy_take(self._reader._ref, _ANY_SAMPLE, self._depth)
            if isinstance(samples, int):
                raise DDSException(samples, "raw take")
            for data, info in samples:
                if info.valid_data and not self._stop:
                    try:
                        if self._source_stamps:
                            self._handler(data, stamp_ns, info.publication_handle, info.source_timestamp)
                        else:
                            self._handler(data, stamp_ns, info.publication_handle)
                    except Exception as exc:  # one bad sample must not end the reader
                        self.handler_errors += 1
                        self.last_handler_error = repr(exc)

    def participant_of(self, writer: int) -> bytes:
        """The DDS participant (GUID prefix, 16 bytes) of a writer handle this reader matched;
        ``b""`` if it is no longer matched. Cached: the handle stays the writer's."""
        return matched_participant(self._reader, self._participants, writer)

    def close(self) -> None:
        """Stop the thread (after a running handler call returns), then delete the reader
        (idempotent). A thread still running after ``CLOSE_WAIT_S`` keeps its entities: deleting
        a waitset or reader that a thread is still using crashes the process."""
        if self._closed:
            return
        self._closed = True
        self._stop = True
        self._closing.set(True)
        if threading.current_thread() is self._thread:
            self._closed_by_handler = True  # the thread deletes them on its way out
            return
        if self._thread.ident is None:  # never started
            self._delete()
            return
        self._thread.join(CLOSE_WAIT_S)
        if not self._thread.is_alive():
            self._delete()

    def _delete(self) -> None:
        close_entity(self._waitset)
        close_entity(self._closing)
        close_entity(self._reader)


_open_readers: weakref.WeakSet[RawReader] = weakref.WeakSet()


@atexit.register
def _close_open_readers() -> None:
    """A reader thread still waiting in Cyclone when the interpreter shuts Cyclone down crashes
    the process: stop any reader its owner did not close."""
    for reader in list(_open_readers):
        reader.close()


class PolledReader:
    """The newest raw sample of a topic, taken by the thread that asks for it.

    No listener: Cyclone's receive thread never waits for Python's GIL. (A Python listener at
    the robot's 500 Hz stalls reception in the whole process whenever another thread holds the
    GIL, and the control loop then finds no fresh state.) The waiting thread blocks in a waitset
    with the GIL released. Same interface as :class:`asap_ros.runtime.control_loop.LatestState`; one
    thread at a time. A sample is stamped when it is taken, on both clocks (system time for
    data, monotonic for its age): on arrival for one that wakes :meth:`next_arrival`, at most
    one reader poll late for one found already waiting.
    """

    def __init__(self, topic: str, idl_type: type, qos: Qos | None = None, depth: int = 4) -> None:
        """``qos``: default keep-last 1 (the newest sample is all that is read); ``depth``: the
        most samples one take returns."""
        dp = participant()
        self._depth = depth
        self._reader = DataReader(dp, Topic(dp, topic, idl_type), qos=qos or Qos(Policy.History.KeepLast(1)))
        self._waitset = _waitset_on_new_data(dp, self._reader)
        self._payload: bytes | None = None
        self._stamp_ns = 0
        self._arrival_ns = 0
        self._participants: dict[int, bytes] = {}
        self._in_use = threading.Lock()
        """Held while taking or waiting: :meth:`close` never deletes the entities under a reader."""
        self._closed = False

    def _take(self) -> list[bytes]:
        """The valid samples waiting in the reader, oldest first; the newest is kept (stamped now)."""
        samples = ddspy_take(self._reader._ref, _ANY_SAMPLE, self._depth)
        if isinstance(samples, int):
            raise DDSException(samples, "raw take")
        valid = [data for data, info in samples if info.valid_data]
        if valid:
            self._payload, self._stamp_ns, self._arrival_ns = valid[-1], time.time_ns(), time.monotonic_ns()
        return valid

    def newest(self) -> tuple[bytes | None, int, int]:
        """``(payload, stamp_ns, arrival_ns)`` of the newest sample (``None`` before the first)."""
        with self._in_use:
            if not self._closed:
                self._take()
            return self._payload, self._stamp_ns, self._arrival_ns

    def wait(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for a sample not yet taken (the GIL released); takes nothing."""
        with self._in_use:
            if not self._closed:
                self._waitset.wait(int(timeout_s * 1e9))

    def take_all(self) -> list[bytes]:
        """Every valid sample waiting, oldest first (at most the reader's history depth); the
        newest also becomes :meth:`newest`'s."""
        with self._in_use:
            return [] if self._closed else self._take()

    def take_all_with_writers(self) -> list[tuple[bytes, bytes]]:
        """As :meth:`take_all`, each sample with its writer's DDS participant (GUID prefix, 16
        bytes; ``b""`` if that writer is no longer matched). A writer's participant is looked up
        once, on its first sample."""
        with self._in_use:
            if self._closed:
                return []
            samples = ddspy_take(self._reader._ref, _ANY_SAMPLE, self._depth)
            if isinstance(samples, int):
                raise DDSException(samples, "raw take")
            valid = [(data, matched_participant(self._reader, self._participants, info.publication_handle))
                     for data, info in samples if info.valid_data]
            if valid:
                self._payload, self._stamp_ns, self._arrival_ns = valid[-1][0], time.time_ns(), time.monotonic_ns()
            return valid


    def next_arrival(self, timeout_s: float) -> tuple[bytes | None, int, int]:
        """The first sample to arrive after this call, or the newest one after ``timeout_s``."""
        with self._in_use:
            if self._closed:
                return self._payload, self._stamp_ns, self._arrival_ns
            self._take()  # waiting already: not the next arrival
            deadline_ns = time.monotonic_ns() + int(timeout_s * 1e9)
            while (left_ns := deadline_ns - time.monotonic_ns()) > 0:
                self._waitset.wait(left_ns)
                if self._take():
                    break
            return self._payload, self._stamp_ns, self._arrival_ns

    def close(self) -> None:
        """Delete the reader once no thread is taking from it or waiting on it (idempotent)."""
        with self._in_use:
            if self._closed:
                return
            self._closed = True
            close_entity(self._waitset)
            close_entity(self._reader)


def close_entity(entity) -> None:
    """Delete a cyclonedds entity now instead of at garbage collection (idempotent)."""
    entity.__del__()
