"""The ``rt/lowcmd`` lease (:mod:`asap_ros.core.lease`) on DDS.

``rt/asap/deploy_beat`` (:class:`DeployBeat_`, best effort): one per control step from the
deploy node's control thread. ``rt/asap/supervisor_grant`` (:class:`SupervisorGrant_`,
reliable, transient-local, keep-last 8): the supervisors' answers to each beat, and a TAKEOVER
for any deploy process that starts later. Both travel on the robot's DDS domain beside
``rt/lowcmd``, as raw XCDR1 packed and unpacked here with :mod:`struct` (no Python serialiser on
the control thread); the IDL structs say what peers see.
(No ``from __future__ import annotations``: cyclonedds resolves the field types at run time.)
"""

import hashlib
import os
import socket
import struct
from dataclasses import dataclass

import cyclonedds.idl.annotations as annotate
import cyclonedds.idl.types as types
from cyclonedds.core import Policy
from cyclonedds.idl import IdlStruct
from cyclonedds.qos import Qos
from cyclonedds.util import duration

from asap_ros.core.lease import COMMAND_TIMEOUT_NS, Beat, BeatFlag, Grant, Supervision, Verdict, WriteLease
from asap_ros.core.state_machine import Mode

__all__ = [
    "BEAT_QOS",
    "BEAT_TOPIC",
    "GRANT_QOS",
    "GRANT_TOPIC",
    "DeployBeat_",
    "LowCmdArbiter",
    "SupervisorGrant_",
    "decode_beat",
    "decode_grant",
    "encode_beat",
    "encode_grant",
    "host_id",
    "new_session",
]

BEAT_TOPIC = "rt/asap/deploy_beat"
GRANT_TOPIC = "rt/asap/supervisor_grant"
MODES = tuple(Mode)
"""Wire code of a mode: its index here."""
GRANT_DEPTH = 8
"""Grants kept for the deploy node's next step: every supervisor's, so the one it obeys is never
crowded out by another's (it takes them all, each step)."""

GRANT_QOS = Qos(
    Policy.Reliability.Reliable(duration(milliseconds=100)),
    Policy.Durability.TransientLocal,
    Policy.History.KeepLast(GRANT_DEPTH),
)
BEAT_DEPTH = 8
"""Beats a reader keeps until it takes them. The topic has no key, so one history holds every
writer's beats: two deploy processes stepping on the same grid beat within microseconds, and a
depth of 1 would keep only the later one, hiding the supervised process's beats from the supervisor."""
BEAT_QOS = Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(BEAT_DEPTH))


@dataclass
@annotate.final
class DeployBeat_(IdlStruct, typename="asap_ros.msg.dds_.DeployBeat_"):
    session: types.uint64
    """Random id of the deploy process."""
    seq: types.uint64
    """Control step counter of that process."""
    supervisor: types.uint64
    """Session of the supervisor it obeys (0: none)."""
    host: types.uint64
    """Hash of its host name (:func:`host_id`)."""
    pid: types.uint32
    mode: types.uint8
    """Controller mode after the step (index into :data:`MODES`)."""
    flags: types.uint8
    """:class:`~asap_ros.core.lease.BeatFlag` bits."""


@dataclass
@annotate.final
class SupervisorGrant_(IdlStruct, typename="asap_ros.msg.dds_.SupervisorGrant_"):
    state: types.uint8
    """:class:`~asap_ros.core.lease.Supervision` value."""
    supervisor: types.uint64
    """Session of the granting supervisor."""
    session: types.uint64
    seq: types.uint64
    lease_ns: types.int64
    reason: str


_ENCAPSULATION = b"\x00\x01"  # XCDR1, little endian; then 2 option bytes: the padding count
_BEAT = struct.Struct("<QQQQIBB")
_GRANT = struct.Struct("<B7xQQQqI")


def _sample(body: bytes) -> bytes:
    """Header + ``body`` padded to 4 bytes, the padding counted in the options (XCDR)."""
    padding = -len(body) % 4
    return _ENCAPSULATION + bytes((0, padding)) + body + bytes(padding)


def _body(payload: bytes, what: str, least: int) -> bytes:
    body = payload[4:len(payload) - (payload[3] & 3)] if len(payload) >= 4 else b""
    if len(body) < least or payload[:2] != _ENCAPSULATION:
        raise ValueError(f"not a {what} sample ({len(payload)} bytes)")
    return body


def encode_beat(beat: Beat) -> bytes:
    return _sample(_BEAT.pack(beat.session, beat.seq, beat.supervisor, beat.host, beat.pid,
                              MODES.index(beat.mode), int(beat.flags)))


def decode_beat(payload: bytes) -> Beat:
    """ValueError on a sample that is not a :class:`DeployBeat_`."""
    body = _body(payload, "DeployBeat_", _BEAT.size)
    if len(body) != _BEAT.size:
        raise ValueError(f"not a DeployBeat_ sample ({len(payload)} bytes)")
    session, seq, supervisor, host, pid, mode, flags = _BEAT.unpack(body)
    if mode >= len(MODES):
        raise ValueError(f"DeployBeat_ mode code {mode} unknown")
    if flags & ~int(BeatFlag(31)):
        raise ValueError(f"DeployBeat_ flags 0x{flags:02x} unknown")
    return Beat(session, seq, MODES[mode], supervisor, BeatFlag(flags), pid, host)


def encode_grant(grant: Grant) -> bytes:
    reason = grant.reason.encode() + b"\x00"
    return _sample(_GRANT.pack(int(grant.state), grant.supervisor, grant.session, grant.seq, grant.lease_ns,
                               len(reason)) + reason)


def decode_grant(payload: bytes) -> Grant:
    """ValueError on a sample that is not a :class:`SupervisorGrant_`."""
    body = _body(payload, "SupervisorGrant_", _GRANT.size)
    state, supervisor, session, seq, lease_ns, length = _GRANT.unpack_from(body)
    reason = body[_GRANT.size:]
    if length < 1 or len(reason) != length or reason[-1] != 0:
        raise ValueError("SupervisorGrant_ reason is malformed")
    if supervisor == 0 or lease_ns <= 0:
        raise ValueError(f"SupervisorGrant_ names no supervisor or no lease (supervisor {supervisor}, lease {lease_ns} ns)")
    try:
        return Grant(Supervision(state), supervisor, session, seq, lease_ns, reason[:-1].decode())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"SupervisorGrant_ is malformed: {exc}") from exc


def new_session() -> int:
    """A random, non-zero 63-bit id for this process (deploy node or supervisor)."""
    return int.from_bytes(os.urandom(8), "little") >> 1 or 1


def host_id(hostname: str | None = None) -> int:
    """A 64-bit hash of the host name: a supervisor watches the deploy process for exit only on
    the same host."""
    name = socket.gethostname() if hostname is None else hostname
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")


class LowCmdArbiter:
    """Deploy side: every grant taken and a verdict at the start of each control step, the write
    permission checked at the instant of each write, one beat after each step.

    Call :meth:`verdict` and :meth:`beat` from the control thread only; :meth:`allows_write`,
    :meth:`refusal` and :meth:`reset_refusal` from any (they read the newest verdict).
    Needs :func:`asap_ros.runtime.dds.init_channels` first.
    """

    def __init__(self, period_ns: int, lease_ns: int = 150_000_000, command_timeout_ns: int = COMMAND_TIMEOUT_NS) -> None:
        """``lease_ns``: the longest lease any grant gives (the deploy node's ``lease_ms``);
        ``command_timeout_ns``: the robot's (``command_timeout_ms``)."""
        from asap_ros.runtime.dds import PolledReader, RawWriter
        from asap_ros.runtime.dds_lease import configured_lease_ns

        self.lease = WriteLease(new_session(), period_ns, lease_ns=lease_ns, command_timeout_ns=command_timeout_ns,
                                dds_lease_ns=configured_lease_ns())
        self._beats = RawWriter(BEAT_TOPIC, DeployBeat_, BEAT_QOS)
        self._grants = PolledReader(GRANT_TOPIC, SupervisorGrant_, GRANT_QOS, depth=GRANT_DEPTH)
        self._seq = 0
        self._pid = os.getpid()
        self._host = host_id()
        self.malformed_grants = 0

    def verdict(self, now_ns: int) -> Verdict:
        grants = []
        for payload, participant in self._grants.take_all_with_writers():
            try:
                grants.append((decode_grant(payload), participant))
            except ValueError:
                self.malformed_grants += 1
        self.lease.receive_all(grants, now_ns)
        return self.lease.verdict(now_ns)

    def wrote(self, now_ns: int) -> None:
        """A command went out at ``now_ns`` (the command timeout counts from it)."""
        self.lease.wrote(now_ns)

    def command_gap_fault(self, now_ns: int) -> str | None:
        """Why a command written now must be damping: the previous one is older than the robot's
        command timeout (None: it is not)."""
        return self.lease.command_gap_fault(now_ns)

    def estop_taken(self, now_ns: int) -> None:
        """An e-stop was taken (any thread): Reset is refused until the supervisor answers after it."""
        self.lease.estop_taken(now_ns)

    def beat(self, mode: Mode, now_ns: int, wrote: bool, hears_robot: bool) -> None:
        """One beat, sent at ``now_ns`` (the control loop's monotonic clock)."""
        self._seq += 1
        lease = self.lease
        lease.beat(self._seq, now_ns)
        flags = lease.beat_flags(wrote, hears_robot)
        self._beats.write(encode_beat(Beat(lease.session, self._seq, mode, lease.supervisor, flags, self._pid, self._host)))

    def allows_write(self, now_ns: int) -> bool:
        """Whether a write at ``now_ns`` stays within the newest verdict's lease."""
        return self.lease.allows_write(now_ns)

    def refusal(self) -> str | None:
        """Why Stand/Start must be refused now, as of the latest control step."""
        return self.lease.last_verdict.refusal

    def reset_refusal(self) -> str | None:
        """Why Reset must be refused now (a held e-stop, a takeover, no supervisor)."""
        return self.lease.last_verdict.reset_refusal

    def close(self) -> None:
        self._beats.close()
        self._grants.close()
