"""The ``rt/lowcmd`` lease (:mod:`asap_ros.runtime.lease`) on DDS.

``rt/asap/deploy_beat`` (:class:`DeployBeat_`, best effort): one per control step from the
deploy node's control thread. ``rt/asap/supervisor_grant`` (:class:`SupervisorGrant_`,
reliable, transient-local, keep-last 1): the supervisor's answer to each beat, and its
takeover for any deploy process that starts later. Both travel on the robot's DDS domain
beside ``rt/lowcmd``, as raw XCDR1 packed and unpacked here with :mod:`struct` (no Python
serialiser on the control thread); the IDL structs say what peers see.
(No ``from __future__ import annotations``: cyclonedds resolves the field types at run time.)
"""

import os
import struct
import time
from dataclasses import dataclass

import cyclonedds.idl.annotations as annotate
import cyclonedds.idl.types as types
from cyclonedds.core import Policy
from cyclonedds.idl import IdlStruct
from cyclonedds.qos import Qos
from cyclonedds.util import duration

from asap_ros.core.state_machine import Mode
from asap_ros.runtime.lease import Grant, Supervision, Verdict, WriteLease

BEAT_TOPIC = "rt/asap/deploy_beat"
GRANT_TOPIC = "rt/asap/supervisor_grant"
MODES = tuple(Mode)
"""Wire code of a mode: its index here."""

GRANT_QOS = Qos(
    Policy.Reliability.Reliable(duration(milliseconds=100)),
    Policy.Durability.TransientLocal,
    Policy.History.KeepLast(1),
)
BEAT_QOS = Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(1))


@dataclass
@annotate.final
class DeployBeat_(IdlStruct, typename="asap_ros.msg.dds_.DeployBeat_"):
    session: types.uint64
    """Random id of the deploy process."""
    seq: types.uint64
    """Control step counter of that process."""
    mode: types.uint8
    """Controller mode after the step (index into :data:`MODES`)."""
    yielded: bool
    """The supervisor's takeover has been seen: this process writes nothing until handed back."""


@dataclass
@annotate.final
class SupervisorGrant_(IdlStruct, typename="asap_ros.msg.dds_.SupervisorGrant_"):
    state: types.uint8
    """:class:`~asap_ros.runtime.lease.Supervision` value."""
    session: types.uint64
    seq: types.uint64
    lease_ns: types.int64
    estop: types.uint32
    """Count of the supervisor's e-stops (see :attr:`asap_ros.runtime.lease.Grant.estop`)."""
    reason: str


_ENCAPSULATION = b"\x00\x01"  # XCDR1, little endian; then 2 option bytes: the padding count
_BEAT = struct.Struct("<QQB?")
_GRANT = struct.Struct("<B7xQQqII")


def _sample(body: bytes) -> bytes:
    """Header + ``body`` padded to 4 bytes, the padding counted in the options (XCDR)."""
    padding = -len(body) % 4
    return _ENCAPSULATION + bytes((0, padding)) + body + bytes(padding)


def _body(payload: bytes, what: str, least: int) -> bytes:
    body = payload[4:len(payload) - (payload[3] & 3)] if len(payload) >= 4 else b""
    if len(body) < least or payload[:2] != _ENCAPSULATION:
        raise ValueError(f"not a {what} sample ({len(payload)} bytes)")
    return body


@dataclass(frozen=True)
class Beat:
    session: int
    seq: int
    mode: Mode
    yielded: bool


def encode_beat(beat: Beat) -> bytes:
    return _sample(_BEAT.pack(beat.session, beat.seq, MODES.index(beat.mode), beat.yielded))


def decode_beat(payload: bytes) -> Beat:
    """ValueError on a sample that is not a :class:`DeployBeat_`."""
    body = _body(payload, "DeployBeat_", _BEAT.size)
    if len(body) != _BEAT.size:
        raise ValueError(f"not a DeployBeat_ sample ({len(payload)} bytes)")
    session, seq, mode, yielded = _BEAT.unpack(body)
    if mode >= len(MODES):
        raise ValueError(f"DeployBeat_ mode code {mode} unknown")
    return Beat(session, seq, MODES[mode], yielded)


def encode_grant(grant: Grant) -> bytes:
    reason = grant.reason.encode() + b"\x00"
    return _sample(_GRANT.pack(int(grant.state), grant.session, grant.seq, grant.lease_ns, grant.estop, len(reason))
                   + reason)


def decode_grant(payload: bytes) -> Grant:
    """ValueError on a sample that is not a :class:`SupervisorGrant_`."""
    body = _body(payload, "SupervisorGrant_", _GRANT.size)
    state, session, seq, lease_ns, estop, length = _GRANT.unpack_from(body)
    reason = body[_GRANT.size:]
    if length < 1 or len(reason) != length or reason[-1] != 0:
        raise ValueError("SupervisorGrant_ reason is malformed")
    try:
        return Grant(Supervision(state), session, seq, lease_ns, reason[:-1].decode(), estop)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"SupervisorGrant_ is malformed: {exc}") from exc


def new_session() -> int:
    """A random, non-zero 63-bit id for this deploy process."""
    return int.from_bytes(os.urandom(8), "little") >> 1 or 1


class LowCmdArbiter:
    """Deploy side: one beat per control step, the newest grant, a verdict before each write.

    Call :meth:`verdict` and :meth:`beat` from the control thread only; :meth:`refusal` from any.
    Needs :func:`asap_ros.dds.init_channels` first.
    """

    def __init__(self, damping_margin_ns: int) -> None:
        from asap_ros.runtime.dds import PolledReader, RawWriter

        self.lease = WriteLease(new_session(), damping_margin_ns)
        self._beats = RawWriter(BEAT_TOPIC, DeployBeat_, BEAT_QOS)
        self._grants = PolledReader(GRANT_TOPIC, SupervisorGrant_, GRANT_QOS)
        self._grant_payload: bytes | None = None
        self._seq = 0
        self.malformed_grants = 0
        self._last = Verdict(False)

    def verdict(self, now_ns: int) -> Verdict:
        payload, _stamp = self._grants.newest()
        if payload is not None and payload is not self._grant_payload:
            self._grant_payload = payload
            try:
                self.lease.receive(decode_grant(payload))
            except ValueError:
                self.malformed_grants += 1
        self._last = self.lease.verdict(now_ns)
        return self._last

    def beat(self, mode: Mode) -> None:
        self._seq += 1
        self.lease.beat(self._seq, time.monotonic_ns())
        self._beats.write(encode_beat(Beat(self.lease.session, self._seq, mode, self.lease.yielded)))

    def operator_reset(self) -> None:
        """The controller left DAMPING on an operator Reset (any thread)."""
        self.lease.operator_reset(self._seq)

    def refusal(self) -> str | None:
        """Why Stand/Start must be refused now, as of the latest control step."""
        return self._last.refusal

    def close(self) -> None:
        self._beats.close()
        self._grants.close()
