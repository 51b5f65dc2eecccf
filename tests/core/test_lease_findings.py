"""Each finding of the lease review, as one deterministic case on the pure cores at the shipped
timing (150 ms lease, 200 ms takeover, 60 ms e-stop window); the explorer's schedules for the same
findings are in test_lease_explorer.py."""

from __future__ import annotations

from asap_ros.core.lease import TAKEOVER_SILENCE_NS, Beat, BeatFlag, Grant, Supervision, WriteLease, Writer
from asap_ros.core.state_machine import Mode
from asap_ros.core.supervisor import NO_ROBOT, Authority, SupervisorCore, SupervisorTiming

MS = 1_000_000
PERIOD = 20 * MS
TIMING = SupervisorTiming(takeover_after_ns=200 * MS, estop_obey_ns=60 * MS, lease_ns=150 * MS)
HOST = 1
PRIMARY, SECONDARY = 0x51, 0x52


def beat(seq: int, supervisor: int, flags: BeatFlag = BeatFlag.WRITING | BeatFlag.HEARS_ROBOT,
         mode: Mode = Mode.HOLD) -> Beat:
    return Beat(0xD1, seq, mode, supervisor, flags, 4242, HOST)


def secondary_beside_a_primary(until_ns: int) -> tuple[SupervisorCore, int]:
    """A supervisor that heard the primary grant the deploy node every 10 ms until ``until_ns``."""
    core = SupervisorCore(SECONDARY, TIMING, HOST, started_ns=0)
    seq = 0
    for now in range(0, until_ns, 10 * MS):
        core.remote(False, "L2+B", now)
        if now % PERIOD == 0:
            seq += 1
            core.on_beat(beat(seq, PRIMARY), b"deploy", now)
            core.on_lowcmd(b"deploy", False, now + MS)
        core.on_grant(Grant(Supervision.WATCHING, PRIMARY, 0xD1, seq, TIMING.lease_ns, ""), now)
        core.step(now)
    assert core.authority is Authority.SECONDARY
    return core, seq


def test_n1_a_secondary_latches_an_estop_and_holds_it_when_it_takes_authority() -> None:
    core, seq = secondary_beside_a_primary(1000 * MS)
    assert core.estop("terminal", 1000 * MS) is False  # no authority: the node republishes it
    assert core.estop_reason == "e-stop from terminal"
    # the primary dies: the deploy node streams damping on its own, still naming it
    now = 1000 * MS
    for now in range(1000 * MS, 1400 * MS, 10 * MS):
        core.remote(False, "L2+B", now)
        if now % PERIOD == 0:
            seq += 1
            core.on_beat(beat(seq, PRIMARY, BeatFlag.WRITING | BeatFlag.TOOK_BACK | BeatFlag.HEARS_ROBOT,
                              Mode.DAMPING), b"deploy", now)
            core.on_lowcmd(b"deploy", True, now + MS)
        tick = core.step(now)
    assert core.authority is Authority.WATCHING
    assert tick.grant is not None and tick.grant.state is Supervision.ESTOP, tick
    assert core.reset(now) is None  # the operator's reset, at the one with authority, releases it


def test_n1_a_secondary_adopts_the_estop_a_deploy_node_holds_from_the_primary() -> None:
    core, seq = secondary_beside_a_primary(500 * MS)
    core.on_beat(beat(seq + 1, PRIMARY, BeatFlag.WRITING | BeatFlag.ESTOP_HELD | BeatFlag.HEARS_ROBOT, Mode.DAMPING),
                 b"deploy", 500 * MS)
    assert core.estop_reason is not None and "earlier supervisor" in core.estop_reason


def test_n1_a_watching_grant_of_a_new_supervisor_does_not_release_a_held_estop() -> None:
    lease = WriteLease(0xD1, PERIOD)
    lease.beat(1, 0)
    lease.receive(Grant(Supervision.ESTOP, PRIMARY, 0xD1, 1, TIMING.lease_ns, "e-stop from terminal"), b"p", MS)
    lease.beat(2, 200 * MS)  # the primary fell silent: another binds, granting WATCHING
    lease.receive(Grant(Supervision.WATCHING, SECONDARY, 0xD1, 2, TIMING.lease_ns, ""), b"s", 201 * MS)
    assert lease.supervisor == SECONDARY and lease.estop_held == "e-stop from terminal"
    assert lease.verdict(202 * MS).reset_refusal is not None


def test_n2_a_deaf_secondary_neither_takes_authority_nor_writes_on_stale_input() -> None:
    core, seq = secondary_beside_a_primary(600 * MS)
    # its receive path is held up 300 ms: no robot, no beat, no grant; the deploy node goes on stiff
    for now in range(600 * MS, 900 * MS, 10 * MS):
        tick = core.step(now)
        assert core.authority is Authority.SECONDARY and not tick.write and tick.grant is None
    # the backlog arrives in one go: the primary still grants, the deploy node still obeys it
    now = 900 * MS
    core.remote(False, "L2+B", now)
    core.on_beat(beat(seq + 15, PRIMARY), b"deploy", now)
    core.on_grant(Grant(Supervision.WATCHING, PRIMARY, 0xD1, seq + 15, TIMING.lease_ns, ""), now)
    tick = core.step(now)
    assert core.authority is Authority.SECONDARY and not tick.write


def test_n2_a_supervisor_takes_no_takeover_decision_in_the_step_it_takes_authority() -> None:
    core, seq = secondary_beside_a_primary(600 * MS)
    now = 850 * MS  # 250 ms without the primary; the deploy node's newest beat says it left it
    core.remote(False, "L2+B", now)
    core.on_beat(beat(seq + 1, PRIMARY, BeatFlag.WRITING | BeatFlag.TOOK_BACK | BeatFlag.HEARS_ROBOT, Mode.DAMPING),
                 b"deploy", now - 200 * MS)  # its last rt/lowcmd heard long ago: "silent" by stale input
    core.on_beat(beat(seq + 2, PRIMARY, BeatFlag.TOOK_BACK | BeatFlag.HEARS_ROBOT, Mode.DAMPING), b"deploy", now)
    tick = core.step(now)
    assert core.authority is Authority.WATCHING and not tick.write


def test_n3_overrunning_steps_never_postpone_damping_past_lease_and_two_periods() -> None:
    """The supervisor dies after the grant of beat 1; every step then wakes 1 ms late past a
    whole period (a 41 ms gap): the deploy node streams damping on its own by lease + 2 periods."""
    lease = WriteLease(0xD1, PERIOD)
    lease.beat(1, 0)
    lease.receive(Grant(Supervision.WATCHING, PRIMARY, 0xD1, 1, TIMING.lease_ns, ""), b"p", MS)
    now, seq, first_damping = 0, 1, None
    while now < 600 * MS and first_damping is None:
        now += 2 * PERIOD + MS
        seq += 1
        verdict = lease.verdict(now)
        if verdict.writer is Writer.OWN_DAMPING:
            first_damping = now
        lease.beat(seq, now)
    assert first_damping is not None and first_damping - MS <= TIMING.lease_ns + 2 * PERIOD + 2 * PERIOD + MS


def test_n5_an_estop_taken_while_listening_is_held_once_it_grants() -> None:
    core = SupervisorCore(PRIMARY, TIMING, HOST, started_ns=0)
    core.remote(False, "L2+B", 10 * MS)
    assert core.estop("terminal", 10 * MS) is False  # listening: republished for one with authority
    for now in range(0, 300 * MS, 10 * MS):
        core.remote(False, "L2+B", now)
        tick = core.step(now)
    assert core.authority is Authority.WATCHING and tick.grant is not None
    assert tick.grant.state is Supervision.ESTOP


def test_n5_a_reset_right_after_an_estop_waits_for_the_supervisors_word() -> None:
    lease = WriteLease(0xD1, PERIOD)
    lease.beat(1, 0)
    lease.receive(Grant(Supervision.WATCHING, PRIMARY, 0xD1, 1, TIMING.lease_ns, ""), b"p", MS)
    assert lease.verdict(2 * MS).reset_refusal is None
    lease.estop_taken(3 * MS)  # forwarded by a supervisor whose ESTOP grant is still on its way
    assert lease.last_verdict.reset_refusal is not None
    lease.beat(2, 4 * MS)
    lease.receive(Grant(Supervision.WATCHING, PRIMARY, 0xD1, 1, TIMING.lease_ns, ""), b"p", 5 * MS)  # sent before
    assert lease.verdict(6 * MS).reset_refusal is not None
    lease.receive(Grant(Supervision.WATCHING, PRIMARY, 0xD1, 2, TIMING.lease_ns, ""), b"p", 7 * MS)
    assert lease.verdict(8 * MS).reset_refusal is None  # it answered a beat sent after the e-stop: none held


def test_n6_a_command_gap_past_the_robots_timeout_is_a_fault() -> None:
    lease = WriteLease(0xD1, PERIOD)
    lease.wrote(0)
    assert lease.command_gap_fault(100 * MS) is None
    fault = lease.command_gap_fault(101 * MS)
    assert fault is not None and "100 ms command timeout" in fault


def test_n7_a_supervisor_that_hears_no_robot_is_not_armed() -> None:
    core = SupervisorCore(PRIMARY, TIMING, HOST, started_ns=0)
    core.remote(False, "L2+B", 0)
    assert NO_ROBOT in core.describe(25 * MS)


def test_s1_a_grant_in_the_obeyed_supervisors_name_from_another_participant_is_ignored() -> None:
    lease = WriteLease(0xD1, PERIOD)
    lease.beat(1, 0)
    lease.receive(Grant(Supervision.ESTOP, PRIMARY, 0xD1, 1, TIMING.lease_ns, "e-stop from terminal"), b"p", MS)
    lease.receive(Grant(Supervision.WATCHING, PRIMARY, 0xD1, 1, 10_000 * MS, ""), b"attacker", 2 * MS)
    assert lease.forged_grants == 1 and lease.estop_held == "e-stop from terminal"
    assert lease.obeyed_participant == b"p"


def test_s1_no_grant_lengthens_the_lease_past_the_deploy_nodes_own() -> None:
    lease = WriteLease(0xD1, PERIOD, lease_ns=150 * MS)
    lease.beat(1, 0)
    lease.receive(Grant(Supervision.WATCHING, PRIMARY, 0xD1, 1, 10_000 * MS, ""), b"p", MS)
    assert lease.verdict(2 * MS).write_until_ns == 150 * MS


def test_s1_the_obeyed_supervisor_keeps_its_binding_when_its_grants_arrive_with_others() -> None:
    lease = WriteLease(0xD1, PERIOD)
    lease.beat(1, 0)
    lease.receive(Grant(Supervision.WATCHING, PRIMARY, 0xD1, 1, TIMING.lease_ns, ""), b"p", MS)
    lease.beat(2, 200 * MS)  # its receive path was held up past the lease; then everything at once
    lease.receive_all([(Grant(Supervision.WATCHING, 0x99, 0xD1, 2, TIMING.lease_ns, ""), b"attacker"),
                       (Grant(Supervision.WATCHING, PRIMARY, 0xD1, 2, TIMING.lease_ns, ""), b"p")], 201 * MS)
    assert lease.obeyed_participant == b"p"


def test_s1_a_forged_beat_does_not_refresh_the_supervised_deploy_node() -> None:
    core = SupervisorCore(PRIMARY, TIMING, HOST, started_ns=0)
    core.on_beat(beat(1, 0), b"deploy", 0)
    assert core.on_beat(beat(2, 0, BeatFlag.HEARS_ROBOT), b"attacker", 10 * MS) is None
    assert core.forged_beats == 1 and core.deploy is not None and core.deploy.participant == b"deploy"


def test_a_supervisor_writes_no_sooner_than_takeover_silence_after_its_takeover() -> None:
    """Unless the deploy node yielded or exited: one damping on its own that the supervisor does
    not hear must hear the TAKEOVER and yield first."""
    core = SupervisorCore(PRIMARY, TIMING, HOST, started_ns=0)
    for now in range(0, TIMING.listen + 10 * MS, 10 * MS):
        core.remote(False, "L2+B", now)
        core.step(now)
    core.on_beat(beat(1, PRIMARY), b"deploy", TIMING.listen)
    start = TIMING.listen + 400 * MS
    for now in range(TIMING.listen + 10 * MS, start, 10 * MS):
        core.remote(False, "L2+B", now)
        core.step(now)
    core.take_over("test", start)
    for now in range(start, start + TAKEOVER_SILENCE_NS, 10 * MS):
        core.remote(False, "L2+B", now)
        assert not core.step(now).write, (now - start) / MS
    core.remote(False, "L2+B", start + TAKEOVER_SILENCE_NS)
    assert core.step(start + TAKEOVER_SILENCE_NS).write


def test_n10_the_rediscovery_wait_follows_the_configured_dds_lease() -> None:
    """A participant lease of 2 s (CYCLONEDDS_URI): a stall of 2.5 s outlived it, so the deploy node
    waits REDISCOVERY_WAIT_NS for the supervisor's word, writing nothing; with Cyclone's default
    10 s lease the same stall waits one control period."""
    for dds_lease_ns, waits in ((2_000 * MS, True), (10_000 * MS, False)):
        lease = WriteLease(0xD1, PERIOD, dds_lease_ns=dds_lease_ns)
        lease.beat(1, 0)
        lease.receive(Grant(Supervision.TAKEOVER, PRIMARY, 0xD1, 1, TIMING.lease_ns, "deploy silent"), b"p", MS)
        lease.verdict(MS)
        resumed = 2_500 * MS
        assert lease.verdict(resumed).yielded
        lease.beat(2, resumed + MS)
        later = lease.verdict(resumed + 5 * PERIOD)
        assert (later.writer is Writer.NONE) is waits, (dds_lease_ns, later)
