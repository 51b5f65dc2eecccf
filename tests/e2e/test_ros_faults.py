"""Faults in a real asap_deploy against the simulated G1 over real DDS: an exception escaping a
control step, the control thread ending, +inf actor output, an e-stop during 300 ms steps, a
system-clock step (``ASAP_ROS_FAULT_INJECTION``, read by the deploy process at start-up), a motor error bit and a
hot motor (the simulator's control topic), and a control rate the actors were not trained at.

Each test restarts both nodes (with its own fault injection) and stands the robot up, so it
stands alone. Figures are printed (``-s``), not asserted.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from asap_ros.testing.ros_system import (
    ROOT,
    System,
    max_writers_in_window,
    node_process,
    node_warning_report,
    simulator_system,
)

FAULT = "/asap_deploy/fault"
SUPERVISOR = "/asap_supervisor/state"


@pytest.fixture(scope="module")
def system(dds_domain, tmp_path_factory):
    """Simulator, observer and client for the module; the nodes are (re)started by each test."""
    yield from simulator_system(dds_domain, tmp_path_factory.mktemp("fault_logs"))


def injected(system: System, faults: str | None) -> None:
    system.restart_nodes({"ASAP_ROS_FAULT_INJECTION": faults} if faults else None)
    if faults:
        assert f"FAULT INJECTION ACTIVE (test support): ASAP_ROS_FAULT_INJECTION={faults}" in system.log_text("deploy")


def deploy_writer(system: System) -> int:
    sample = system.lowcmd.wait_for(lambda s: True, time.time_ns(), 5.0)
    assert sample is not None, "no rt/lowcmd from asap_deploy"
    return sample.writer


def fault_text(system: System, prefix: str) -> str:
    assert system.ros.spin_until(lambda: system.ros.latched.get(FAULT, "").startswith(prefix), 10.0), system.ros.latched
    return system.ros.latched[FAULT]


def track_until_fault(system: System, faults: str, fault_prefix: str) -> tuple[int, str, object]:
    """A deploy process with ``faults``, tracking until its fault starts with ``fault_prefix``:
    ``(its writer, the fault, its first damping LowCmd sample)``."""
    injected(system, faults)
    writer = deploy_writer(system)
    system.track()
    tracking = time.time_ns()
    reason = fault_text(system, fault_prefix)
    damping = system.lowcmd.wait_for(lambda s: s.damping and s.writer == writer, tracking, 5.0)
    assert damping is not None, "no damping LowCmd from asap_deploy"
    return writer, reason, damping


def only_damping_after(system: System, writer: int, since_ns: int) -> int:
    """The number of this writer's samples after ``since_ns``; AssertionError if one is not damping."""
    samples = system.lowcmd.from_writer(writer, since_ns)
    assert all(s.damping for s in samples), "a LowCmd with kp > 0 after the damping began"
    return len(samples)


def ctl(system: System, *args: str) -> str:
    env = {**os.environ, "ROS_DOMAIN_ID": str(system.domain)}
    # --timeout 15: a fresh ctl process has been seen to need more than the default 5 s to get the
    # latched /diagnostics on this loaded 2-core machine
    result = subprocess.run([sys.executable, "-m", "asap_ros.cli", "ctl", *args, "--timeout", "15"], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    return result.stdout + result.stderr


def status_showing(system: System, line: str, tries: int = 3) -> str:
    """``ctl status`` until it shows ``line`` (diagnostics come at diagnostics_rate_hz, 1 Hz)."""
    for _ in range(tries):
        status = ctl(system, "status")
        if line in status:
            return status
    raise AssertionError(f"{line!r} not in:\n{status}")


def test_a_step_that_raises_ends_in_damping_streamed_by_the_deploy_node(system):
    writer, reason, damping = track_until_fault(system, "raise@motion_tick=30", "control step raised InjectedFault(")
    assert system.ros.wait_mode("DAMPING", 5.0)
    time.sleep(1.0)
    streamed = only_damping_after(system, writer, damping.stamp_ns)
    assert streamed >= 40, f"{streamed} damping LowCmds in ~1 s"  # every period, not once
    assert system.ros.latched[SUPERVISOR].startswith("WATCHING")  # the deploy node still writes: no takeover
    print(f"\nraise in a step: {streamed} damping LowCmds from asap_deploy in the next ~1 s; fault: {reason}")
    ok, message = system.ros.trigger("/asap_deploy/reset")
    assert not ok and "the control loop failed" in message, message
    status = status_showing(system, "control loop: FAILED: control step raised InjectedFault(")
    assert "mode: DAMPING" in status and "fault: control step raised InjectedFault(" in status, status


def test_a_control_thread_that_ends_silences_the_lease_and_the_supervisor_takes_over(system):
    injected(system, "exit@motion_tick=30")
    writer = deploy_writer(system)
    system.track()
    assert system.ros.spin_until(lambda: system.ros.latched[SUPERVISOR].startswith("TAKEOVER"), 10.0), \
        system.ros.latched
    assert "deploy silent" in system.ros.latched[SUPERVISOR]
    last_deploy = system.lowcmd.from_writer(writer, 0)[-1].stamp_ns
    takeover = system.lowcmd.wait_for(lambda s: s.writer != writer, last_deploy, 5.0)
    assert takeover is not None and takeover.damping
    print(f"\ncontrol thread ended: last deploy LowCmd -> first supervisor damping "
          f"{(takeover.stamp_ns - last_deploy) / 1e6:.1f} ms ({system.ros.latched[SUPERVISOR]})")
    status_showing(system, "control loop: FAILED: control thread ended: SystemExit(")


def test_an_inf_actor_output_latches_damping_instead_of_a_joint_limit_target(system):
    writer, reason, damping = track_until_fault(system, "inf=3@motion_tick=40", "policy kick_level1: ")
    assert reason == "policy kick_level1: actor output[3] (left_knee_joint) is inf"
    time.sleep(0.3)
    only_damping_after(system, writer, damping.stamp_ns)
    # what a failed test's report would add: the fault as the deploy node logged it
    assert f"-> DAMPING: {reason}" in node_warning_report()


def test_an_estop_during_slow_steps_is_answered_and_damps_without_waiting(system):
    """From motion step 20 on every step takes 300 ms longer (holding the step lock): the e-stop
    reply does not wait for it, the robot gets damping (from the supervisor: a 300 ms step
    outlives the 150 ms lease, so the deploy node's own e-stop write is withheld), one writer, and
    no kp > 0 command follows."""
    injected(system, "slow=0.3@motion_tick=20+")
    writer = deploy_writer(system)
    system.track()
    # the e-stop must be latched while the first slow step runs: sent once the deploy node's
    # LowCmds have paused 60 ms, 0.3 s or more after TRACKING was seen (motion step 20 is 0.4 s
    # in), it has the slow step's other ~240 ms to arrive, however late TRACKING was seen
    tracking = time.monotonic()
    assert system.ros.spin_until(lambda: time.monotonic() - tracking > 0.3 and
                                 time.time_ns() - system.lowcmd.from_writer(writer, 0)[-1].stamp_ns > 60_000_000,
                                 5.0), "the deploy node's LowCmds never paused for the slow step"
    sent, (ok, message) = system.ros.trigger_at("/asap_deploy/estop")
    answered = time.time_ns()
    assert ok and "accepted; mode DAMPING" in message, message
    damping = system.lowcmd.wait_for(lambda s: s.damping, sent - 300_000_000, 5.0)
    assert damping is not None
    time.sleep(1.0)
    samples = system.lowcmd.between(sent - 1_000_000_000, time.time_ns())
    assert not [s for s in samples if s.stamp_ns > damping.stamp_ns and not s.damping]
    assert max_writers_in_window(samples) == 1
    assert fault_text(system, "e-stop: ") == "e-stop: operator e-stop (~/estop service)"
    print(f"\ne-stop during 300 ms steps: reply {(answered - sent) / 1e6:.1f} ms, "
          f"first damping LowCmd {(damping.stamp_ns - sent) / 1e6:.1f} ms after the request")


def test_a_system_clock_step_mid_motion_changes_nothing_the_robot_sees(system):
    """The loop's system clock steps 10 s back at motion step 30: blends, deadlines, state age and
    the lease are monotonic, so the motion runs to its end and HOLD, stiff, with no fault."""
    injected(system, "clock=-10@motion_tick=30")
    writer = deploy_writer(system)
    system.track()
    tracking = time.time_ns()
    assert system.ros.wait_mode("HOLD", 60.0), system.ros.latched
    assert system.ros.latched.get(FAULT, "") == "", system.ros.latched
    assert system.ros.latched.get(SUPERVISOR, "").startswith("WATCHING"), system.ros.latched
    samples = system.lowcmd.from_writer(writer, tracking)
    assert len(samples) > 150 and not any(s.damping for s in samples)  # the kick is over 3 s at 50 Hz
    assert "clock=-10@motion_tick=30" in system.log_text("deploy")


def test_a_motor_error_bit_latches_damping_naming_the_motor(system):
    from asap_ros.sim.dds_types import MOTOR_ERROR

    injected(system, None)
    writer = deploy_writer(system)
    raised = time.time_ns()
    system.sim.request(MOTOR_ERROR, 0x200, motor=3)
    try:
        reason = fault_text(system, "motor ")
        assert reason == "motor left_knee_joint reports error state 0x00000200 (winding overheating)"
        damping = system.lowcmd.wait_for(lambda s: s.damping and s.writer == writer, raised, 5.0)
        assert damping is not None
        print(f"\nmotor error bit -> first damping LowCmd: {(damping.stamp_ns - raised) / 1e6:.1f} ms")
        ok, message = system.ros.trigger("/asap_deploy/reset")
        assert ok, message
        time.sleep(0.2)
        ok, message = system.ros.trigger("/asap_deploy/stand")
        assert not ok and "Stand refused: motor left_knee_joint reports error state" in message, message
    finally:
        system.sim.request(MOTOR_ERROR, 0, motor=3)


def test_a_hot_motor_returns_the_motion_to_hold_and_a_hotter_one_damps(system):
    from asap_ros.sim.dds_types import MOTOR_TEMPERATURE, MOTOR_TEMPERATURE_RELEASE

    injected(system, None)
    writer = deploy_writer(system)
    system.track()
    heated = time.time_ns()
    system.sim.request(MOTOR_TEMPERATURE, 80.0, motor=3)
    try:
        assert system.ros.wait_mode("HOLD", 5.0), system.ros.latched
        held = system.lowcmd.wait_for(lambda s: s.writer == writer, heated, 1.0)
        assert held is not None and not held.damping  # standing, with stiffness, not damping
        assert system.ros.latched.get(FAULT, "") == ""
        ok, message = system.ros.trigger("/asap_deploy/start")
        assert not ok and "motor left_knee_joint at 80 C is above the start limit 65 C" in message, message
        status = status_showing(
            system, "last motion: motion kick_level1 aborted: motor left_knee_joint at 80 C is above the abort limit 75 C")
        assert "motors: hottest left_knee_joint 80 C: above 75 C, motions abort" in status, status
        hotter = time.time_ns()
        system.sim.request(MOTOR_TEMPERATURE, 90.0, motor=3)
        assert fault_text(system, "overheating: ") == "overheating: motor left_knee_joint at 90 C (limit 85 C)"
        damping = system.lowcmd.wait_for(lambda s: s.damping and s.writer == writer, hotter, 5.0)
        assert damping is not None
        print(f"\nhot motor: 80 C -> HOLD (stiff), 90 C -> first damping LowCmd "
              f"{(damping.stamp_ns - hotter) / 1e6:.1f} ms")
    finally:
        system.sim.request(MOTOR_TEMPERATURE_RELEASE, motor=-1)


def test_a_control_rate_other_than_the_actors_is_refused_at_start_up(system, tmp_path):
    process = node_process("deploy_node", system.domain, {**system.deploy_params, "control_rate_hz": "40.0"},
                           tmp_path / "rate.log")
    assert process.wait(60) == 2
    log = (tmp_path / "rate.log").read_text()
    assert "asap_deploy: refusing to start:" in log and "control_rate_hz: must match the actors' control_dt 0.02 s" \
        in log and "(got 40.0)" in log, log
