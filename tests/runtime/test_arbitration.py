"""The lease's wire codec (beats and grants as raw XCDR1) against cyclonedds' own serialiser."""

from __future__ import annotations

import pytest

from asap_ros.core.lease import Beat, BeatFlag, Grant, Supervision
from asap_ros.core.state_machine import Mode
from asap_ros.runtime.arbitration import (
    DeployBeat_,
    SupervisorGrant_,
    decode_beat,
    decode_grant,
    encode_beat,
    encode_grant,
    host_id,
)

LEASE = 150_000_000


@pytest.mark.parametrize("beat", [
    Beat(2**63 - 1, 12345, Mode.HOLD, 0x51, BeatFlag.WRITING | BeatFlag.HEARS_ROBOT, 4242, host_id("robot")),
    Beat(1, 0, Mode.DAMPING, 0, BeatFlag.YIELDED | BeatFlag.ESTOP_HELD | BeatFlag.TOOK_BACK, 2**32 - 1, 2**64 - 1),
])
def test_beat_codec_matches_cyclonedds(beat: Beat) -> None:
    payload = encode_beat(beat)
    sample = DeployBeat_(session=beat.session, seq=beat.seq, supervisor=beat.supervisor, host=beat.host, pid=beat.pid,
                         mode=list(Mode).index(beat.mode), flags=int(beat.flags))
    assert DeployBeat_.deserialize(payload) == sample
    assert decode_beat(payload) == decode_beat(sample.serialize()) == beat


@pytest.mark.parametrize("reason", ["", "deploy silent for 203.0 ms", "é-stop ✓"])
def test_grant_codec_matches_cyclonedds(reason: str) -> None:
    grant = Grant(Supervision.ESTOP, 0x51, 5, 6, LEASE, reason)
    payload = encode_grant(grant)
    sample = SupervisorGrant_(state=1, supervisor=0x51, session=5, seq=6, lease_ns=LEASE, reason=reason)
    assert SupervisorGrant_.deserialize(payload) == sample
    assert decode_grant(payload) == decode_grant(sample.serialize()) == grant


@pytest.mark.parametrize("payload, problem", [
    (b"", "not a SupervisorGrant_"),
    (b"\x00\x01\x00\x00", "not a SupervisorGrant_"),
    (encode_grant(Grant(Supervision.WATCHING, 1, 1, 1, 1, "xyzw"))[:-4], "reason is malformed"),
    (b"\x00\x01\x00\x00" + bytes([9]) + bytes(43) + b"\x01\x00\x00\x00\x00\x00\x00\x00", "malformed"),
    (encode_grant(Grant(Supervision.WATCHING, 0, 1, 1, LEASE, "")), "names no supervisor"),
    (encode_grant(Grant(Supervision.WATCHING, 1, 1, 1, 0, "")), "no lease"),
])
def test_malformed_grants_are_refused(payload: bytes, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        decode_grant(payload)


def test_malformed_beats_are_refused() -> None:
    beat = Beat(1, 1, Mode.HOLD, 0, BeatFlag.NONE, 1, 1)
    with pytest.raises(ValueError, match="not a DeployBeat_"):
        decode_beat(encode_beat(beat)[:-4])
    body = encode_beat(beat)
    with pytest.raises(ValueError, match="mode code 200"):
        decode_beat(body[:40] + bytes([200]) + body[41:])
    with pytest.raises(ValueError, match="flags 0x80 unknown"):
        decode_beat(body[:41] + bytes([0x80]) + body[42:])


def test_host_id_tells_hosts_apart_and_is_stable() -> None:
    assert host_id("robot") == host_id("robot") != host_id("laptop")
    assert 0 < host_id() < 2**64
