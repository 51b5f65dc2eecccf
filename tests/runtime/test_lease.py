"""The rt/lowcmd lease: the deploy node's verdicts and the supervisor's watchdog (pure logic), and
the raw wire codec of beats and grants against cyclonedds' own serialiser."""

from __future__ import annotations

import pytest

from asap_ros.core.state_machine import Mode
from asap_ros.runtime.arbitration import (
    Beat,
    DeployBeat_,
    SupervisorGrant_,
    decode_beat,
    decode_grant,
    encode_beat,
    encode_grant,
)
from asap_ros.runtime.lease import HANDOVER_GAP_NS, Grant, Supervision, WriteLease
from asap_ros.runtime.watchdog import Watchdog

MS = 1_000_000
LEASE = 150 * MS
MARGIN = 40 * MS
SESSION = 77


def granted(lease: WriteLease, seq: int, state: Supervision = Supervision.WATCHING, reason: str = "") -> None:
    lease.receive(Grant(state, SESSION, seq, LEASE, reason))


def test_no_write_before_a_grant_and_none_for_another_process():
    lease = WriteLease(SESSION, MARGIN)
    lease.beat(1, 0)
    verdict = lease.verdict(1 * MS)
    assert not verdict.may_write and verdict.fault is None and "no grant" in verdict.refusal
    lease.receive(Grant(Supervision.WATCHING, SESSION + 1, 1, LEASE, ""))  # the previous deploy process's
    verdict = lease.verdict(2 * MS)
    assert not verdict.may_write and verdict.fault is None


def test_a_grant_lets_it_write_until_the_margin_then_damping_then_nothing():
    lease = WriteLease(SESSION, MARGIN)
    lease.beat(1, 0)
    granted(lease, 1)
    for seq in range(2, 9):  # the control loop beats every step; no grant answers them
        lease.beat(seq, (seq - 1) * 20 * MS)
    assert lease.verdict(LEASE - MARGIN - 1).may_write and lease.verdict(LEASE - MARGIN - 1).fault is None
    margin = lease.verdict(LEASE - MARGIN)
    assert margin.may_write and "no grant from the supervisor for 110 ms" in margin.fault
    expired = lease.verdict(LEASE)
    assert not expired.may_write and expired.fault and expired.refusal


def test_a_stale_grant_delivered_after_a_stall_grants_nothing_and_the_supervisor_is_heard_first():
    """SIGSTOP for 8 s: the grant that waited in the socket names a beat sent 8 s ago. The
    process writes nothing and waits one lease for the supervisor's word before blaming it."""
    lease = WriteLease(SESSION, MARGIN)
    lease.beat(1, 0)
    granted(lease, 1)
    verdict = lease.verdict(8000 * MS)  # first step after the stall
    assert not verdict.may_write and verdict.fault is None
    lease.beat(2, 8000 * MS)
    lease.receive(Grant(Supervision.TAKEOVER, 0, 0, LEASE, "deploy silent for 210.0 ms (no rt/lowcmd)"))
    verdict = lease.verdict(8020 * MS)
    assert not verdict.may_write and verdict.fault.startswith("supervisor took over rt/lowcmd (deploy silent")


def test_after_a_stall_with_no_word_from_the_supervisor_silence_is_a_fault_one_lease_later():
    lease = WriteLease(SESSION, MARGIN)
    lease.beat(1, 0)
    granted(lease, 1)
    assert lease.verdict(8000 * MS).fault is None
    for step in range(1, 8):
        lease.beat(1 + step, 8000 * MS + step * 20 * MS)
    verdict = lease.verdict(8000 * MS + LEASE)
    assert not verdict.may_write and "8150 ms" in verdict.fault


def test_a_beat_overwritten_in_the_history_grants_nothing():
    lease = WriteLease(SESSION, MARGIN, history=4)
    for seq in range(1, 10):
        lease.beat(seq, seq * MS)
    granted(lease, 2)  # slot reused by beat 6
    assert not lease.verdict(10 * MS).may_write


def test_estop_grant_latches_damping_once_per_estop_and_keeps_writing():
    lease = WriteLease(SESSION, MARGIN)
    lease.beat(1, 0)
    lease.receive(Grant(Supervision.ESTOP, SESSION, 1, LEASE, "e-stop from terminal", estop=1))
    verdict = lease.verdict(5 * MS)
    assert verdict.may_write and verdict.fault == "supervisor e-stop (e-stop from terminal)"
    assert lease.verdict(6 * MS).fault is None  # read again after an operator Reset: nothing new
    lease.beat(2, 20 * MS)
    lease.receive(Grant(Supervision.ESTOP, SESSION, 2, LEASE, "e-stop from estop topic", estop=2))
    assert lease.verdict(25 * MS).fault == "supervisor e-stop (e-stop from estop topic)"


def test_an_estop_granted_before_an_operator_reset_latches_nothing_after_it():
    """The e-stop reached the deploy node first by the forwarded service; its grant, for a beat
    sent before the operator's Reset, arrives after it."""
    lease = WriteLease(SESSION, MARGIN)
    lease.beat(1, 0)
    lease.beat(2, 20 * MS)
    lease.operator_reset(last_seq=2)
    lease.receive(Grant(Supervision.ESTOP, SESSION, 2, LEASE, "e-stop from estop topic", estop=1))
    verdict = lease.verdict(25 * MS)
    assert verdict.may_write and verdict.fault is None


def test_takeover_latches_damping_writes_nothing_and_is_acknowledged():
    lease = WriteLease(SESSION, MARGIN)
    lease.beat(1, 0)
    granted(lease, 1)
    assert not lease.yielded
    lease.receive(Grant(Supervision.TAKEOVER, 0, 0, LEASE, "deploy silent for 203.0 ms (no rt/lowcmd)"))
    verdict = lease.verdict(1 * MS)
    assert not verdict.may_write and lease.yielded
    assert verdict.fault == "supervisor took over rt/lowcmd (deploy silent for 203.0 ms (no rt/lowcmd))"
    assert "reset the supervisor first" in verdict.refusal


def test_session_must_be_positive():
    with pytest.raises(ValueError):
        WriteLease(0, MARGIN)


@pytest.mark.parametrize("beat", [Beat(2**63 - 1, 12345, Mode.HOLD, False), Beat(1, 0, Mode.DAMPING, True)])
def test_beat_codec_matches_cyclonedds(beat):
    payload = encode_beat(beat)
    sample = DeployBeat_(session=beat.session, seq=beat.seq, mode=list(Mode).index(beat.mode), yielded=beat.yielded)
    assert DeployBeat_.deserialize(payload) == sample
    assert decode_beat(payload) == decode_beat(sample.serialize()) == beat


@pytest.mark.parametrize("reason", ["", "deploy silent for 203.0 ms", "é-stop ✓"])
def test_grant_codec_matches_cyclonedds(reason):
    grant = Grant(Supervision.ESTOP, 5, 6, LEASE, reason, estop=3)
    payload = encode_grant(grant)
    sample = SupervisorGrant_(state=1, session=5, seq=6, lease_ns=LEASE, estop=3, reason=reason)
    assert SupervisorGrant_.deserialize(payload) == sample
    assert decode_grant(payload) == decode_grant(sample.serialize()) == grant


@pytest.mark.parametrize("payload", [b"", b"\x00\x01\x00\x00", encode_grant(Grant(Supervision.WATCHING, 1, 1, 1, "x"))[:-4],
                                     b"\x00\x01\x00\x00" + bytes([9]) + bytes(39)])
def test_malformed_grants_are_refused(payload):
    with pytest.raises(ValueError):
        decode_grant(payload)


def test_malformed_beats_are_refused():
    with pytest.raises(ValueError):
        decode_beat(encode_beat(Beat(1, 1, Mode.HOLD, False))[:-1])
    with pytest.raises(ValueError, match="mode code 200"):
        decode_beat(b"\x00\x01\x00\x02" + bytes(16) + bytes([200, 0, 0, 0]))


# --- the supervisor's watchdog -------------------------------------------------------------

def dog() -> Watchdog:
    return Watchdog(takeover_after_ns=200 * MS, estop_obey_ns=60 * MS, lease_ns=LEASE)


def test_silence_counts_only_once_the_deploy_node_has_written():
    watchdog = dog()
    assert watchdog.due_reason(10**12) is None
    watchdog.lowcmd_seen(1000 * MS, damping=False)
    assert watchdog.due_reason(1199 * MS) is None
    assert watchdog.due_reason(1200 * MS) == "deploy silent for 200.0 ms (no rt/lowcmd)"
    assert watchdog.next_check_ns(1100 * MS, 50 * MS) == 1150 * MS


def test_estop_must_be_obeyed_with_damping_in_time():
    watchdog = dog()
    watchdog.lowcmd_seen(0, damping=False)
    watchdog.estop_requested(10 * MS)
    watchdog.lowcmd_seen(30 * MS, damping=False)
    assert "did not send damping within 60 ms" in watchdog.due_reason(70 * MS)
    watchdog.lowcmd_seen(40 * MS, damping=True)
    assert watchdog.due_reason(70 * MS) is None


def test_first_write_waits_for_the_lease_unless_the_deploy_node_yielded_or_exited():
    watchdog = dog()
    watchdog.lowcmd_seen(1000 * MS, damping=False)
    watchdog.grant_sent(1005 * MS)
    watchdog.take_over()
    assert watchdog.first_write_ns() == 1005 * MS + LEASE + HANDOVER_GAP_NS
    assert not watchdog.beat_received(Beat(SESSION, 9, Mode.DAMPING, True), 1030 * MS)  # no grant during takeover
    assert watchdog.first_write_ns() == 1000 * MS + HANDOVER_GAP_NS
    other = dog()
    other.lowcmd_seen(1000 * MS, damping=False)
    other.grant_sent(1005 * MS)
    other.exited = "deploy process 42 exited"
    other.take_over()
    assert other.first_write_ns() == 1000 * MS + HANDOVER_GAP_NS


def test_handing_back_needs_a_fresh_acknowledging_beat_in_passive_or_damping():
    watchdog = dog()
    watchdog.take_over()
    assert "no beat" in watchdog.release_refusal(0)
    watchdog.beat_received(Beat(SESSION, 1, Mode.HOLD, False), 10 * MS)
    assert "in HOLD" in watchdog.release_refusal(20 * MS)
    watchdog.beat_received(Beat(SESSION, 2, Mode.DAMPING, False), 30 * MS)
    assert "not yet acknowledged" in watchdog.release_refusal(40 * MS)
    watchdog.beat_received(Beat(SESSION, 3, Mode.DAMPING, True), 50 * MS)
    assert watchdog.release_refusal(60 * MS) is None
    assert "no beat" in watchdog.release_refusal(50 * MS + 500 * MS)
    watchdog.release(last_own_write_ns=70 * MS)
    assert not watchdog.beat_received(Beat(SESSION, 4, Mode.DAMPING, False), 80 * MS)  # within the handover gap
    assert watchdog.beat_received(Beat(SESSION, 5, Mode.DAMPING, False), 70 * MS + HANDOVER_GAP_NS)


def test_a_second_deploy_process_gets_no_grant_while_the_first_beats():
    watchdog = dog()
    assert watchdog.beat_received(Beat(1, 1, Mode.HOLD, False), 0)
    assert not watchdog.beat_received(Beat(2, 1, Mode.PASSIVE, False), 20 * MS)
    assert watchdog.beat_received(Beat(1, 2, Mode.HOLD, False), 40 * MS)
    assert watchdog.beat_received(Beat(2, 2, Mode.PASSIVE, False), 40 * MS + LEASE + HANDOVER_GAP_NS)
