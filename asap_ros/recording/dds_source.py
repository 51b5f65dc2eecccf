"""Raw CDR samples of the recorded DDS topics, stamped on arrival, from one reader thread.

Each sample's bytes are kept as received (XCDR1 is ROS 2 CDR, see :mod:`.msgdefs`); a sample
in another encoding (XCDR2 from a peer that chose it) is re-encoded as XCDR1 first.
Readers keep a deep history, so a briefly busy writer thread loses nothing; the DDS writers
never wait for this reader.

The robot's writers (and the runtime's ``rt/lowcmd``) keep only their last sample, so a datagram
the kernel drops because the recorder's socket receive buffer is full is lost for good, reliable
reader or not. :class:`RecorderDomain` gives the recorder process its own Cyclone DDS domain with
a large socket receive buffer, which rides out a stall of the whole recorder process.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from xml.sax.saxutils import quoteattr

from cyclonedds._clayer import ddspy_take  # the C layer under DataReader.take, without deserialising
from cyclonedds.core import DDSException, InstanceState, ReadCondition, SampleState, ViewState, WaitSet
from cyclonedds.domain import Domain, DomainParticipant
from cyclonedds.qos import Policy, Qos
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration
from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowCmd_, LowState_

from asap_ros.core.errors import AsapError
from asap_ros.recording.topics import DDS_TOPICS, RecordedTopic
from asap_ros.runtime.dds import close_entity
from asap_ros.runtime.step_topics import POLICY_STEP_TOPIC, TRANSITION_TOPIC, ModeTransition_, PolicyStep_

Sink = Callable[[str, int, bytes, int], None]
"""``sink(bag_topic, log_time_ns, cdr, publish_time_ns)``."""

IDL_TYPES: dict[str, type] = {
    "rt/lowstate": LowState_,
    "rt/lowcmd": LowCmd_,
    POLICY_STEP_TOPIC: PolicyStep_,
    TRANSITION_TOPIC: ModeTransition_,
}
BEST_EFFORT_TOPICS = frozenset({"rt/lowstate"})
"""Written by the robot's firmware: a best-effort reader matches whatever reliability it offers."""
READER_DEPTH = 5000
"""Samples per reader held for the reader thread: 10 s of LowState, more than the socket buffer holds."""
TAKE_BATCH = 256
_MASK = SampleState.Any | ViewState.Any | InstanceState.Any
_ROS_CDR_HEADERS = (b"\x00\x00", b"\x00\x01")  # CDR big / little endian (XCDR1, final types)


RMEM_MAX = Path("/proc/sys/net/core/rmem_max")


class RecorderDomain:
    """This process's Cyclone DDS domain for recording: ``interface`` as the SDK configures it,
    and UDP sockets asking for ``receive_buffer_bytes`` (Linux grants twice the request, capped
    at twice ``net.core.rmem_max``). Only for a process without unitree channels
    (:func:`asap_ros.runtime.dds.init_channels` creates the domain with the SDK's configuration)."""

    def __init__(self, domain_id: int, interface: str, receive_buffer_bytes: int) -> None:
        xml = (
            '<CycloneDDS><Domain Id="any"><General><Interfaces>'
            f'<NetworkInterface name={quoteattr(interface)} priority="default" multicast="default"/>'
            '</Interfaces></General><Internal>'
            f'<SocketReceiveBufferSize max="{int(receive_buffer_bytes)}B"/>'
            "</Internal></Domain></CycloneDDS>"
        )
        try:
            self._domain = Domain(domain_id, xml)
            self.participant = DomainParticipant(domain_id)
        except DDSException as exc:
            raise AsapError(f"DDS initialisation failed (domain {domain_id}, interface {interface!r}): {exc}") from exc
        self.receive_buffer_bytes = receive_buffer_bytes

    def capped_note(self) -> str | None:
        """Why the OS grants less receive buffer than asked (``None`` when it does not, or cannot tell)."""
        if not RMEM_MAX.exists():
            return None
        rmem_max = int(RMEM_MAX.read_text())
        if rmem_max >= self.receive_buffer_bytes:
            return None
        return (f"net.core.rmem_max is {rmem_max} bytes: the DDS socket receive buffer gets less than the "
                f"{self.receive_buffer_bytes} bytes asked for (receive_buffer_mb), so a shorter stall of the "
                f"recorder loses samples; raise it: sysctl -w net.core.rmem_max={self.receive_buffer_bytes}")

    def close(self) -> None:
        close_entity(self.participant)
        close_entity(self._domain)


def ros_cdr(payload: bytes, idl_type: type) -> bytes:
    """The payload as ROS 2 CDR (XCDR1): unchanged when it already is, else re-encoded."""
    if payload[:2] in _ROS_CDR_HEADERS:
        return payload
    return idl_type.deserialize(payload).serialize(use_version_2=False)


class DdsSource:
    """Takes every sample of ``topics`` (DDS name -> bag topic) and hands it to ``sink``."""

    def __init__(
        self,
        sink: Sink,
        participant: DomainParticipant,
        on_error: Callable[[str], None],
        topics: Mapping[str, RecordedTopic] = DDS_TOPICS,
    ) -> None:
        """``on_error(text)`` is called (on the reader thread) if taking samples fails; the thread then ends."""
        self._sink = sink
        self._on_error = on_error
        self._waitset = WaitSet(participant)
        self._readers: list[tuple[DataReader, str, type]] = []
        for dds_name, recorded in topics.items():
            idl_type = IDL_TYPES[dds_name]
            reliability = (
                Policy.Reliability.BestEffort
                if dds_name in BEST_EFFORT_TOPICS
                else Policy.Reliability.Reliable(duration(seconds=1))
            )
            qos = Qos(reliability, Policy.History.KeepLast(READER_DEPTH))
            reader = DataReader(participant, Topic(participant, dds_name, idl_type), qos=qos)
            self._waitset.attach(ReadCondition(reader, _MASK))
            self._readers.append((reader, recorded.name, idl_type))
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="recorder-dds", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                self._waitset.wait(duration(milliseconds=200))
                self._take_all()
        except Exception as exc:  # noqa: BLE001 -- reported: the recording must not go silently empty
            self._on_error(f"DDS reader failed: {type(exc).__name__}: {exc}")

    def _take_all(self) -> None:
        for reader, bag_topic, idl_type in self._readers:
            while True:
                stamp_ns = time.time_ns()
                samples = ddspy_take(reader._ref, _MASK, TAKE_BATCH)
                if isinstance(samples, int):
                    raise DDSException(samples, f"taking {bag_topic}")
                for data, info in samples:
                    if info.valid_data:
                        self._sink(bag_topic, stamp_ns, ros_cdr(data, idl_type), info.source_timestamp)
                if len(samples) < TAKE_BATCH:
                    break

    def close(self) -> None:
        """Stop the thread after a last take, then delete the readers."""
        self._stopping.set()
        self._waitset.set_trigger(True)
        self._thread.join()
        self._take_all()
        close_entity(self._waitset)
        for reader, _, _ in self._readers:
            close_entity(reader)
