"""The rt/lowcmd lease between the deploy node and the supervisors, pure logic on a deterministic bus
(tests/core/lease_sim.py): one writer at every instant, never unattended, one authority, a held
e-stop. The shipped timing: 150 ms lease, 200 ms takeover, 60 ms e-stop obey, 20 ms control period."""

from __future__ import annotations

import pytest

from asap_ros.core.lease import (
    REDISCOVERY_WAIT_NS,
    TAKEOVER_SILENCE_NS,
    Beat,
    BeatFlag,
    Grant,
    Supervision,
    Verdict,
    WriteLease,
    Writer,
)
from asap_ros.core.state_machine import Mode
from asap_ros.core.supervisor import Authority, SupervisorCore, timing_problem
from tests.core.lease_sim import HOST, MS, PERIOD, TIMING, Bus, Supervisor

SETTLED = 400 * MS
"""After this the supervisor has listened and the deploy node writes under its lease."""


def started(supervisors: int = 1) -> Bus:
    bus = Bus()
    for i in range(supervisors):
        bus.add_supervisor(f"supervisor{i + 1}")
    bus.run_until(SETTLED)
    assert bus.writers_after(SETTLED - 100 * MS) == ["deploy"]
    return bus


def test_the_deploy_node_writes_under_the_lease_and_the_supervisor_only_watches() -> None:
    bus = started()
    bus.run_for(2000 * MS)
    assert bus.writers_after(0) == ["deploy"]
    assert bus.supervisors[0].core.authority is Authority.WATCHING  # type: ignore[union-attr]
    assert bus.max_writers_in_window() == 1


def test_a_step_stalled_between_its_verdict_and_its_write_writes_nothing_stale() -> None:
    """A 300 ms stall after the verdict: with the permission taken at the step's start, the step's
    kp > 0 command would go out 300 ms later, beside the supervisor's damping."""
    bus = started()
    bus.deploy.stall_in_step[bus.deploy.seq + 2] = 300 * MS
    stalled_at = bus.now_ns
    bus.run_for(2000 * MS)
    assert bus.max_writers_in_window() == 1
    first_supervisor = next(w.stamp_ns for w in bus.writes if w.writer == "supervisor1")
    assert not [w for w in bus.stiff_after(first_supervisor)]
    assert bus.deploy.mode is Mode.DAMPING
    assert bus.writers_after(stalled_at) == ["deploy", "supervisor1"]


def test_after_a_stall_within_a_step_the_deploy_node_waits_for_the_supervisors_word() -> None:
    """The stalled step ends just before the next deadline and the supervisor's answer to its beat
    takes 5 ms: the deploy node must not take its stale TAKEOVER grant for the supervisor's silence."""
    bus = Bus(delay_ns=5 * MS)
    bus.add_supervisor("supervisor1")
    bus.run_until(SETTLED)
    bus.deploy.stall_in_step[bus.deploy.seq + 2] = 298 * MS
    bus.run_for(2000 * MS)
    assert bus.max_writers_in_window() == 1
    assert bus.writers_after(SETTLED) == ["deploy", "supervisor1"]


@pytest.mark.parametrize("hang_ms", [100, 1000, 8000])
def test_a_hung_deploy_node_is_taken_over_and_never_writes_beside_the_supervisor(hang_ms: int) -> None:
    bus = started()
    start = bus.now_ns
    bus.deploy.stopped.append((start, start + hang_ms * MS))
    bus.run_for(hang_ms * MS + 2000 * MS)
    assert bus.max_writers_in_window() == 1
    core = bus.supervisors[0].core
    assert core is not None
    if hang_ms < 200:  # shorter than takeover_after_ms: only its lease lapses
        assert core.authority is Authority.WATCHING
        return
    assert core.authority is Authority.TAKEOVER
    assert bus.writers_after(start) == ["supervisor1"]
    first = bus.writes[next(i for i, w in enumerate(bus.writes) if w.stamp_ns >= start and w.writer == "supervisor1")]
    # takeover_after_ms + a watchdog step + TAKEOVER_SILENCE_NS (a deploy node damping on its own
    # that the supervisor cannot hear yields first) + a little
    assert first.stamp_ns - start <= 290 * MS


@pytest.mark.parametrize("hang_ms", [40, 60])
def test_a_deploy_node_stalled_within_the_command_timeout_goes_on_without_a_fault(hang_ms: int) -> None:
    """Stopped so briefly that no gap between its commands passes the robot's 100 ms command
    timeout: it goes on without a fault."""
    bus = started()
    start = bus.now_ns
    bus.deploy.stopped.append((start, start + hang_ms * MS))
    bus.run_for(hang_ms * MS + 1000 * MS)
    assert (bus.deploy.mode, bus.deploy.fault) == (Mode.HOLD, None)
    assert bus.writers_after(start) == ["deploy"]
    assert bus.max_writers_in_window() == 1
    assert bus.longest_silence(start, bus.now_ns) <= 100 * MS


@pytest.mark.parametrize("hang_ms", [90, 100, 110, 130, 170])
def test_a_deploy_node_stalled_past_the_command_timeout_latches_damping(hang_ms: int) -> None:
    """Stopped for less than takeover_after_ms, but the gap between its commands passed the
    robot's command timeout (its motors went limp): it latches DAMPING and sends no stiff command
    on its old observation; the supervisor does not take over."""
    bus = started()
    start = bus.now_ns
    bus.deploy.stopped.append((start, start + hang_ms * MS))
    bus.run_for(hang_ms * MS + 1000 * MS)
    assert bus.deploy.mode is Mode.DAMPING and "command timeout" in (bus.deploy.fault or ""), bus.deploy.fault
    assert bus.writers_after(start) == ["deploy"]
    assert bus.max_writers_in_window() == 1
    assert not bus.stiff_after(start + hang_ms * MS)


def test_after_a_stall_of_its_own_a_silent_supervisor_still_leaves_damping() -> None:
    """Resumed with the newest grant in the last two periods of its lease and no answer coming (the
    supervisor died during the stall): the stall latches DAMPING, it writes nothing for one control
    period while queued grants arrive, and then streams damping on its own."""
    lease = WriteLease(0xD1, PERIOD)
    for seq in range(1, 6):
        now = seq * PERIOD
        lease.verdict(now)
        lease.beat(seq, now + MS)
        grant(lease, seq, now=now + 2 * MS)
    resumed = 5 * PERIOD + MS + 120 * MS  # the newest granted beat is 120 ms old
    verdict = lease.verdict(resumed)
    assert "command timeout" in (verdict.fault or "") and verdict.refusal, verdict
    for seq in range(6, 9):  # the rest of the lease, and its last two periods: faults, never a stiff write
        lease.beat(seq, resumed + (seq - 6) * PERIOD + MS)
        assert lease.verdict(resumed + (seq - 5) * PERIOD).fault is not None
    verdict = lease.verdict(resumed + 4 * PERIOD)  # the granted beat is 200 ms old: lease + 2 periods
    assert verdict.writer is Writer.OWN_DAMPING and "no grant from the supervisor" in (verdict.fault or "")


def test_the_supervisor_dying_during_a_takeover_leaves_the_robot_damped_by_the_deploy_node() -> None:
    """SIGSTOP of the deploy (takeover), SIGCONT, then the supervisor is killed: the deploy node
    streams damping within 100 ms of the supervisor's last command."""
    bus = started()
    start = bus.now_ns
    bus.deploy.stopped.append((start, start + 1000 * MS))
    bus.run_for(1500 * MS)
    sup = bus.supervisors[0]
    killed = bus.now_ns
    sup.killed_ns = killed
    bus.run_for(1000 * MS)
    last_supervisor = max(w.stamp_ns for w in bus.writes if w.writer == "supervisor1")
    first_deploy = min(w.stamp_ns for w in bus.writes if w.writer == "deploy" and w.stamp_ns > last_supervisor)
    assert first_deploy - last_supervisor <= 100 * MS
    assert bus.longest_silence(killed, bus.now_ns) <= 100 * MS
    assert bus.max_writers_in_window() == 1
    assert not bus.stiff_after(start)


def test_a_supervisor_hung_during_a_takeover_that_resumes_never_writes_beside_the_deploy_node() -> None:
    bus = started()
    start = bus.now_ns
    bus.deploy.stopped.append((start, start + 600 * MS))
    bus.run_for(1000 * MS)
    sup = bus.supervisors[0]
    hang = bus.now_ns
    sup.stopped.append((hang, hang + 500 * MS))
    bus.run_for(2000 * MS)
    assert bus.max_writers_in_window() == 1
    assert bus.longest_silence(hang, bus.now_ns) <= 100 * MS
    assert bus.writers_after(start) == ["supervisor1", "deploy", "supervisor1"]  # it hands over, and back
    assert not bus.stiff_after(start)


def test_a_supervisor_step_stalled_before_its_write_writes_nothing_stale() -> None:
    """While the supervisor streams damping for a deploy node that yielded, one of its steps sends
    its TAKEOVER grant and then stalls 100 ms: the deploy node, hearing no grant for 70 ms, streams
    damping itself. The write the step decided would land beside it; it is dropped."""
    bus = started()
    start = bus.now_ns
    bus.deploy.stopped.append((start, start + 600 * MS))
    bus.run_for(1000 * MS)  # taken over; resumed and yielded
    sup = bus.supervisors[0]
    assert bus.writers_after(start) == ["supervisor1"]
    sup.stall_before_write[sup.steps + 2] = 100 * MS
    stalled = bus.now_ns
    bus.run_for(2000 * MS)
    assert bus.max_writers_in_window() == 1
    assert bus.writers_after(stalled) == ["supervisor1", "deploy", "supervisor1"]  # it hands over, and back
    assert bus.longest_silence(stalled, bus.now_ns) <= 100 * MS
    assert not bus.stiff_after(start)


def test_a_supervisor_dying_while_watching_leaves_damping_from_the_deploy_node() -> None:
    bus = started()
    killed = bus.now_ns
    bus.supervisors[0].killed_ns = killed
    bus.run_for(1000 * MS)
    assert bus.deploy.mode is Mode.DAMPING
    assert bus.writers_after(killed) == ["deploy"]
    # leased writes until the lease runs out, damping from 2 control periods before; its own
    # damping from lease + 2 periods: never more than that silent
    assert bus.longest_silence(killed, bus.now_ns) <= TIMING.lease_ns + 3 * PERIOD - 130 * MS
    assert not bus.stiff_after(killed + TIMING.lease_ns)
    assert bus.deploy.lease.last_verdict.writer is Writer.OWN_DAMPING


def test_a_starting_supervisor_that_finds_the_deploy_node_damping_on_its_own_grants_again() -> None:
    """The supervisor died during a takeover; a fresh one finds the deploy node streaming damping on
    its own and grants its lease again: the deploy node keeps damping (latched) until reset."""
    bus = started()
    start = bus.now_ns
    bus.deploy.stopped.append((start, start + 1000 * MS))
    bus.run_for(1500 * MS)
    bus.supervisors[0].killed_ns = bus.now_ns
    bus.run_for(500 * MS)
    assert bus.deploy.lease.last_verdict.writer is Writer.OWN_DAMPING
    restarted = bus.now_ns
    fresh = bus.add_supervisor("supervisor2")
    assert until_armed(bus, fresh).reset_refusal is None  # the operator's Reset is taken once it says armed
    bus.run_for(1000 * MS)
    assert fresh.core is not None and fresh.core.authority is Authority.WATCHING
    assert bus.deploy.lease.supervisor == fresh.core.session
    assert bus.deploy.lease.last_verdict.writer is Writer.LEASED and bus.deploy.mode is Mode.DAMPING
    assert bus.writers_after(restarted) == ["deploy"] and not bus.stiff_after(start)
    assert bus.longest_silence(restarted, bus.now_ns) <= 100 * MS


def until_armed(bus: Bus, sup: Supervisor, within_ns: int = 1000 * MS) -> Verdict:
    """Run until ``sup`` says it is armed; the deploy node's verdict at that instant. Before it
    says so its state reads not armed, and from then on the deploy node's verdicts come from its
    grants (not from the deploy node's own damping)."""
    assert sup.core is not None
    end = bus.now_ns + within_ns
    while not sup.core.describe().startswith("WATCHING: armed"):
        assert bus.now_ns < end, sup.core.describe()
        assert "armed" not in sup.core.describe() or "not armed" in sup.core.describe()
        bus.run_for(MS)
    verdict = bus.deploy.lease.last_verdict
    assert bus.deploy.lease.supervisor == sup.core.session and verdict.writer is Writer.LEASED, verdict
    return verdict


def test_a_second_supervisor_is_secondary_and_never_grants_or_writes() -> None:
    bus = started()
    second = bus.add_supervisor("supervisor2")
    bus.run_for(1000 * MS)
    assert second.core is not None and second.core.authority is Authority.SECONDARY
    start = bus.now_ns
    bus.supervisors[0].stopped.append((start, start + 1000 * MS))  # the first one hangs a second
    bus.deploy.stopped.append((start + 100 * MS, start + 1100 * MS))
    bus.run_for(3000 * MS)
    assert bus.max_writers_in_window() == 1
    # the second one took authority once the first was silent, took over the hung deploy node, and
    # the first, resumed, found it active and stayed secondary
    assert second.core.authority is Authority.TAKEOVER
    assert bus.supervisors[0].core.authority is Authority.SECONDARY  # type: ignore[union-attr]
    assert bus.deploy.lease.supervisor == second.core.session
    assert bus.writers_after(start) == ["deploy", "supervisor2"]
    assert not bus.stiff_after(start + 200 * MS)


def test_a_secondary_stays_secondary_while_the_deploy_node_hangs() -> None:
    """No beats while the deploy node is stopped: the first supervisor's grants still reach the
    second (one every step), which neither takes authority nor writes."""
    bus = started()
    second = bus.add_supervisor("supervisor2")
    bus.run_for(1000 * MS)
    start = bus.now_ns
    bus.deploy.stopped.append((start, start + 1000 * MS))
    bus.run_for(2000 * MS)
    assert second.core is not None and second.core.authority is Authority.SECONDARY
    assert bus.writers_after(start) == ["supervisor1"]
    assert bus.max_writers_in_window() == 1


def test_two_supervisors_starting_together_end_with_one_authority() -> None:
    bus = Bus()
    first, second = bus.add_supervisor("supervisor1", 0x60), bus.add_supervisor("supervisor2", 0x50)
    bus.run_for(1000 * MS)
    authorities = {s.name: s.core.authority for s in (first, second)}  # type: ignore[union-attr]
    assert sorted(a.name for a in authorities.values()) == ["SECONDARY", "WATCHING"]
    assert bus.deploy.lease.supervisor in (0x50, 0x60)
    assert bus.max_writers_in_window() == 1


def test_an_estop_is_held_until_the_supervisor_resets_it() -> None:
    bus = started()
    core = bus.supervisors[0].core
    assert core is not None
    assert core.estop("~/estop service", bus.now_ns)
    bus.run_for(200 * MS)
    verdict = bus.deploy.lease.last_verdict
    assert bus.deploy.mode is Mode.DAMPING and "supervisor e-stop" in (verdict.fault or "")
    assert "e-stop held" in (verdict.refusal or "") and "e-stop held" in (verdict.reset_refusal or "")
    assert core.authority is Authority.WATCHING  # obeyed: damping within estop_obey_ms
    assert core.reset(bus.now_ns) is None
    bus.run_for(100 * MS)
    assert bus.deploy.lease.last_verdict.reset_refusal is None
    assert bus.deploy.lease.estop_held is None


def test_the_held_combo_refuses_the_supervisor_reset() -> None:
    bus = started()
    core = bus.supervisors[0].core
    assert core is not None
    assert core.remote(True, "wireless remote B+L2", bus.now_ns)
    assert not core.remote(True, "wireless remote B+L2", bus.now_ns + MS)  # held: one e-stop
    bus.run_for(100 * MS)
    assert "combo is held" in (core.reset(bus.now_ns) or "")
    core.remote(False, "wireless remote B+L2", bus.now_ns)
    assert core.reset(bus.now_ns) is None


def test_an_unanswered_estop_forward_refuses_the_supervisor_reset() -> None:
    bus = started()
    core = bus.supervisors[0].core
    assert core is not None
    assert core.reset(bus.now_ns, "/asap_deploy/estop") is None  # no e-stop held: nothing to wait for
    assert core.estop("~/estop service", bus.now_ns)
    bus.run_for(100 * MS)
    refusal = core.reset(bus.now_ns, "/asap_deploy/estop") or ""
    assert "not yet answered the e-stop forwarded to /asap_deploy/estop" in refusal
    assert core.estop_reason is not None and bus.deploy.lease.estop_held is not None
    assert core.reset(bus.now_ns) is None  # answered (or its node exited)
    bus.run_for(100 * MS)
    assert bus.deploy.lease.estop_held is None


def test_an_estop_survives_a_supervisor_restart() -> None:
    bus = started()
    old = bus.supervisors[0]
    assert old.core is not None and old.core.estop("terminal", bus.now_ns)
    bus.run_for(200 * MS)
    old.killed_ns = bus.now_ns
    bus.run_for(500 * MS)
    fresh = bus.add_supervisor("supervisor2")
    assert "e-stop held" in (until_armed(bus, fresh).reset_refusal or "")
    bus.run_for(1000 * MS)
    assert fresh.core is not None and fresh.core.estop_reason is not None
    assert bus.deploy.lease.supervisor == fresh.core.session
    assert "e-stop held" in (bus.deploy.lease.last_verdict.reset_refusal or "")
    assert bus.max_writers_in_window() == 1


def test_an_estop_not_obeyed_in_time_is_taken_over() -> None:
    core = SupervisorCore(0x51, TIMING, HOST, started_ns=0)
    core.step(TIMING.listen)
    beat = Beat(0xD1, 1, Mode.HOLD, 0x51, BeatFlag.WRITING | BeatFlag.HEARS_ROBOT, 4242, HOST)
    core.on_beat(beat, b"deploy", TIMING.listen + MS)
    core.on_lowcmd(b"deploy", False, TIMING.listen + 2 * MS)
    now = TIMING.listen + 10 * MS
    core.estop("estop topic", now)
    for t in range(now, now + TIMING.estop_obey_ns, 10 * MS):
        core.on_lowcmd(b"deploy", False, t)  # kp > 0 on, no damping
        core.step(t)
    assert core.authority is Authority.WATCHING
    core.step(now + TIMING.estop_obey_ns)
    assert core.authority is Authority.TAKEOVER and "within 60 ms of an e-stop" in core.reason


def steps(core: SupervisorCore, start_ns: int, end_ns: int) -> None:
    """The watchdog's steps every write period in [start, end)."""
    for now in range(start_ns, end_ns, TIMING.write_period_ns):
        core.step(now)


def test_kp_after_an_obeyed_estop_is_taken_over() -> None:
    core = SupervisorCore(0x51, TIMING, HOST, started_ns=0)
    core.step(TIMING.listen)
    core.on_beat(Beat(0xD1, 1, Mode.HOLD, 0x51, BeatFlag.WRITING, 4242, HOST), b"deploy", TIMING.listen)
    now = TIMING.listen + 10 * MS
    core.estop("terminal", now)
    core.on_lowcmd(b"deploy", True, now + 5 * MS)  # damping: obeyed
    steps(core, now, now + TIMING.estop_obey_ns)
    assert core.authority is Authority.WATCHING
    core.on_lowcmd(b"deploy", False, now + TIMING.estop_obey_ns + 5 * MS)  # then stiffness again
    core.step(now + TIMING.estop_obey_ns + 10 * MS)
    assert core.authority is Authority.TAKEOVER and "kp > 0 while the e-stop is held" in core.reason


def test_only_the_deploy_nodes_own_writer_keeps_it_alive() -> None:
    """A third writer on rt/lowcmd does not hide a hung deploy node."""
    core = SupervisorCore(0x51, TIMING, HOST, started_ns=0)
    core.step(TIMING.listen)
    core.on_beat(Beat(0xD1, 1, Mode.HOLD, 0x51, BeatFlag.WRITING, 4242, HOST), b"deploy", TIMING.listen)
    core.on_lowcmd(b"deploy", False, TIMING.listen + MS)
    for t in range(TIMING.listen, TIMING.listen + TIMING.takeover_after_ns + 20 * MS, 10 * MS):
        core.on_lowcmd(b"rogue", False, t)
        core.step(t)
    assert core.authority is Authority.TAKEOVER and "silent" in core.reason
    assert b"rogue" in core.foreign_writers
    assert any("other than asap_deploy" in e for e in core.drain_events())


def test_the_exit_of_another_process_is_no_takeover() -> None:
    core = SupervisorCore(0x51, TIMING, HOST, started_ns=0)
    core.step(TIMING.listen)
    core.on_beat(Beat(0xD1, 1, Mode.HOLD, 0x51, BeatFlag.WRITING, 4242, HOST), b"deploy", TIMING.listen)
    core.on_exit(999, TIMING.listen + MS)  # a second asap_deploy that exits
    steps(core, TIMING.listen, TIMING.listen + 20 * MS)
    assert core.authority is Authority.WATCHING
    core.on_exit(4242, TIMING.listen + 11 * MS)
    core.step(TIMING.listen + 20 * MS)
    assert core.authority is Authority.TAKEOVER and "4242 exited" in core.reason


def test_a_second_deploy_session_gets_no_grant_while_the_first_beats() -> None:
    core = SupervisorCore(0x51, TIMING, HOST, started_ns=0)
    core.step(TIMING.listen)
    first = Beat(0xD1, 1, Mode.HOLD, 0x51, BeatFlag.WRITING, 4242, HOST)
    assert core.on_beat(first, b"deploy", TIMING.listen) is not None
    second = Beat(0xD2, 1, Mode.PASSIVE, 0, BeatFlag.NONE, 4343, HOST)
    assert core.on_beat(second, b"other", TIMING.listen + MS) is None
    later = TIMING.listen + TIMING.lease_ns + TIMING.handover_gap_ns + MS
    steps(core, TIMING.listen, later)
    grant = core.on_beat(second, b"other", later)
    assert grant is not None and grant.session == 0xD2


def test_hand_back_needs_a_fresh_yielded_beat_that_hears_the_robot_in_passive_or_damping() -> None:
    core = SupervisorCore(0x51, TIMING, HOST, started_ns=0)
    core.step(TIMING.listen)
    now = TIMING.listen
    core.on_beat(Beat(0xD1, 1, Mode.HOLD, 0x51, BeatFlag.WRITING, 4242, HOST), b"deploy", now)
    core.take_over("test", now)
    yielded = BeatFlag.YIELDED | BeatFlag.HEARS_ROBOT
    for mode, flags, refusal in [
        (Mode.HOLD, yielded, "in HOLD"),
        (Mode.DAMPING, BeatFlag.HEARS_ROBOT, "not yet acknowledged"),
        (Mode.DAMPING, BeatFlag.YIELDED, "does not hear the robot"),
    ]:
        now += 10 * MS
        core.on_beat(Beat(0xD1, 2, mode, 0x51, flags, 4242, HOST), b"deploy", now)
        assert refusal in (core.reset(now) or "")
    assert "no beat" in (core.reset(now + TIMING.lease_ns) or "")
    core.on_beat(Beat(0xD1, 3, Mode.DAMPING, 0x51, yielded, 4242, HOST), b"deploy", now + TIMING.lease_ns)
    assert core.reset(now + TIMING.lease_ns) is None and core.authority is Authority.RELEASING


def test_a_supervisor_that_stalled_writes_nothing_while_it_hears_the_bus_again() -> None:
    core = SupervisorCore(0x51, TIMING, HOST, started_ns=0)
    core.step(TIMING.listen)
    core.take_over("test", TIMING.listen)
    tick = core.step(TIMING.listen + TIMING.lease_ns + 200 * MS)  # 350 ms since its last step
    assert not tick.write and tick.grant is None  # no TAKEOVER grant either: another may stream now
    tick = core.step(TIMING.listen + TIMING.lease_ns + 200 * MS + TIMING.resync_ns)
    assert tick.write and tick.grant is not None and tick.grant.state is Supervision.TAKEOVER


def test_lease_must_be_shorter_than_the_takeover() -> None:
    assert timing_problem(200.0, 150.0) is None
    key, problem = timing_problem(200.0, 500.0) or ("", "")
    assert key == "lease_ms" and "shorter than takeover_after_ms (200 ms)" in problem
    assert "two control periods" in (timing_problem(200.0, 40.0) or ("", ""))[1]


# --- the deploy side alone ------------------------------------------------------------------
def grant(lease: WriteLease, seq: int, state: Supervision = Supervision.WATCHING, supervisor: int = 0x51,
          now: int = 0, reason: str = "") -> None:
    lease.receive(Grant(state, supervisor, lease.session, seq, TIMING.lease_ns, reason), b"supervisor", now)


def test_no_write_before_a_grant_and_none_while_the_supervisor_grants_another_process() -> None:
    lease = WriteLease(0xD1, PERIOD)
    lease.beat(1, 0)
    assert not lease.verdict(MS).may_write
    lease.receive(Grant(Supervision.WATCHING, 0x51, 0xD0, 7, TIMING.lease_ns, ""), b"supervisor", 2 * MS)
    verdict = lease.verdict(3 * MS)
    assert not verdict.may_write and verdict.fault is None and "for this process yet" in (verdict.refusal or "")


def test_the_write_permission_ends_with_the_lease_of_the_beat_it_names() -> None:
    lease = WriteLease(0xD1, PERIOD)
    lease.beat(1, 0)
    grant(lease, 1, now=MS)
    verdict = lease.verdict(10 * MS)
    assert verdict.writer is Writer.LEASED and verdict.write_until_ns == TIMING.lease_ns
    assert lease.allows_write(TIMING.lease_ns - 1) and not lease.allows_write(TIMING.lease_ns)


def test_grants_of_another_supervisor_are_ignored_until_the_obeyed_one_is_silent_a_lease() -> None:
    lease = WriteLease(0xD1, PERIOD)
    lease.beat(1, 0)
    grant(lease, 1, now=MS)
    grant(lease, 1, Supervision.TAKEOVER, supervisor=0x77, now=2 * MS)
    assert lease.supervisor == 0x51 and lease.ignored_grants == 1
    assert lease.verdict(3 * MS).writer is Writer.LEASED
    grant(lease, 1, supervisor=0x77, now=MS + TIMING.lease_ns)
    assert lease.supervisor == 0x77


def test_a_takeover_grant_that_stops_coming_makes_the_deploy_node_stream_damping() -> None:
    lease = WriteLease(0xD1, PERIOD)
    last_answered = 10  # the supervisor answers beats 1..10 with TAKEOVER, then dies
    for seq in range(1, 21):
        now = seq * PERIOD
        verdict = lease.verdict(now)
        if seq > 1 and now >= TIMING.lease_ns:  # past the start-up wait
            silent_ns = now - (last_answered * PERIOD + MS)
            assert verdict.yielded == (silent_ns < TAKEOVER_SILENCE_NS), (seq, verdict)
        lease.beat(seq, now + MS)
        if seq <= last_answered:
            grant(lease, seq, Supervision.TAKEOVER, now=now + 2 * MS, reason="deploy silent")
    assert verdict.writer is Writer.OWN_DAMPING and "went silent" in (verdict.fault or "")
    assert lease.beat_flags(True, True) & BeatFlag.TOOK_BACK


def test_after_a_stall_of_its_own_the_deploy_node_waits_a_period_for_the_supervisors_word() -> None:
    """Resumed 8 s later with a TAKEOVER grant heard before the stall and nothing answering: it
    writes nothing for one control period (queued grants would arrive meanwhile), then streams
    damping on its own; no later than TAKEOVER_SILENCE_NS + a period after the newest grant heard
    when it had not stalled."""
    lease = WriteLease(0xD1, PERIOD)
    lease.beat(1, 0)
    grant(lease, 1, Supervision.TAKEOVER, now=MS)
    lease.verdict(MS)
    resumed = 8000 * MS
    verdict = lease.verdict(resumed)
    assert verdict.yielded and not verdict.may_write
    lease.beat(2, resumed + MS)
    assert lease.verdict(resumed + PERIOD).writer is Writer.OWN_DAMPING


def test_after_a_stall_dds_forgot_the_deploy_node_waits_for_rediscovery() -> None:
    """25 s stopped: the peers' DDS has forgotten the process; the supervisor's fresh TAKEOVER
    grants come only once it is discovered again (~1 s), so it waits, writing nothing, meanwhile."""
    lease = WriteLease(0xD1, PERIOD)
    lease.beat(1, 0)
    grant(lease, 1, Supervision.TAKEOVER, now=MS)
    lease.verdict(MS)
    resumed = 25_000 * MS
    for seq, now in enumerate(range(resumed, resumed + REDISCOVERY_WAIT_NS, PERIOD), start=2):
        verdict = lease.verdict(now)
        assert verdict.yielded and not verdict.may_write, (now - resumed) / MS
        lease.beat(seq, now + MS)
    assert lease.verdict(resumed + REDISCOVERY_WAIT_NS).writer is Writer.OWN_DAMPING


@pytest.mark.parametrize("grants_keep_coming", [True, False])
def test_a_lease_running_out_says_which_side_went_quiet(grants_keep_coming: bool) -> None:
    """Grants that keep coming but answer beat 5 (the supervisor hears no beats), or grants that stop
    after it (the supervisor, or their way here): the fault tells the two apart."""
    lease = WriteLease(0xD1, PERIOD)
    for seq in range(1, 13):
        now = seq * PERIOD
        verdict = lease.verdict(now)
        lease.beat(seq, now + MS)
        if seq <= 5 or grants_keep_coming:
            grant(lease, min(seq, 5), now=now + 2 * MS)
    verdict = lease.verdict(13 * PERIOD)  # beat 5 went out 159 ms before; the newest grant came ...
    came_ms = 18 if grants_keep_coming else 158  # ... after beat 12, or after beat 5
    assert not verdict.may_write
    assert verdict.fault == (f"no grant from the supervisor for 159 ms (lease 150 ms): its newest grant came "
                             f"{came_ms} ms ago and answers a beat sent 159 ms ago")
