"""Two supervisors and two faults at once, with real processes at the shipped settings (150 ms
lease, 200 ms takeover, 60 ms e-stop window, 100 ms command timeout): what the lease explorer
(tests/core/test_lease_explorer.py) checks on the pure cores, here through the real nodes, DDS
and the simulated G1."""

from __future__ import annotations

import os
import signal
import time

import pytest

from asap_ros.core.remote import parse_combo
from asap_ros.sim.process import stop_gracefully
from asap_ros.testing.ros_system import max_writers_in_window, simulator_system, writer_overlaps

SUPERVISOR = "/asap_supervisor/state"
MODE = "/asap_deploy/mode"
FAULT = "/asap_deploy/fault"
MS = 1_000_000


@pytest.fixture(scope="module")
def system(dds_domain, tmp_path_factory):
    yield from simulator_system(dds_domain, tmp_path_factory.mktemp("double_fault_logs"))


@pytest.fixture(autouse=True)
def fresh_nodes(system):
    system.restart_nodes()
    yield


def second_states(system) -> list[str]:
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from std_msgs.msg import String

    states: list[str] = []
    system.ros.node.create_subscription(String, "/second_supervisor/state", lambda m: states.append(m.data),
                                        QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    return states


def test_the_primary_killed_while_the_combo_is_held_leaves_the_estop_held(system):
    """L2+B held, the primary supervisor killed: the second one takes authority holding the e-stop.
    Until the combo is released and the second is reset, the deploy node's Reset and Stand and
    ``ctl reset`` are refused, and nothing but damping reaches the robot."""
    second = system.start_second_supervisor()
    states = second_states(system)
    try:
        assert system.ros.spin_until(lambda: bool(states) and states[-1].startswith("SECONDARY"), 30.0), states
        pressed = time.time_ns()
        system.press_remote(parse_combo("L2+B"))
        damping = system.lowcmd.wait_for(lambda s: s.damping, pressed, 5.0)
        assert damping is not None and system.ros.wait_mode("DAMPING", 5.0)
        os.kill(system.supervisor.pid, signal.SIGKILL)
        system.supervisor.wait(10)
        assert system.ros.spin_until(lambda: states[-1].startswith("WATCHING") and "held" in states[-1], 10.0), states
        ok, message = system.ros.trigger("/asap_deploy/reset")
        assert not ok and "e-stop held" in message, message
        ok, message = system.ros.trigger("/asap_deploy/stand")
        assert not ok, message
        gone = system.ctl("reset")
        assert gone.returncode == 1 and "not found while asap_deploy is supervised" in gone.stdout, gone.stdout
        held = system.ctl("reset", "--supervisor", "second_supervisor")
        assert held.returncode == 1 and "the e-stop combo is held on the remote" in held.stdout, held.stdout
        time.sleep(0.3)
        assert not [s for s in system.lowcmd.between(damping.stamp_ns, time.time_ns()) if not s.damping]
        system.press_remote(frozenset())
        time.sleep(0.1)
        released = system.ctl("reset", "--supervisor", "second_supervisor")
        assert released.returncode == 0, released.stdout + released.stderr
        stand = system.ctl("stand")
        assert stand.returncode == 0 and system.ros.wait_mode("HOLD", 30.0), stand.stdout
    finally:
        system.press_remote(frozenset())
        stop_gracefully(second)


def test_a_dead_supervisor_and_overrunning_steps_still_leave_damping(system):
    """Every 8th control step takes 25 ms longer (the next wake-up comes late), and the supervisor
    is killed: the deploy node streams damping on its own within lease + two periods of the last
    grant, and the robot is never left without a command for longer than its timeout after that."""
    system.restart_nodes({"ASAP_ROS_FAULT_INJECTION": "slow=0.025@tick=1+%8"})
    time.sleep(1.0)
    killed = time.time_ns()
    os.kill(system.supervisor.pid, signal.SIGKILL)
    system.supervisor.wait(10)
    time.sleep(1.5)
    samples = system.lowcmd.between(killed - 200 * MS, time.time_ns())
    context = f"{system.ros.latched}\n{system.log('deploy')}"
    first_damping = next((s for s in samples if s.stamp_ns >= killed and s.damping), None)
    assert first_damping is not None, context
    assert first_damping.stamp_ns - killed <= 260 * MS, ((first_damping.stamp_ns - killed) / 1e6, context)
    after = [s for s in samples if s.stamp_ns >= first_damping.stamp_ns]
    gaps = [(b.source_ns - a.source_ns) / 1e6 for a, b in zip(after, after[1:])]
    assert all(s.damping for s in after) and max(gaps) <= 100.0, (max(gaps), context)
    assert len({s.writer for s in samples}) == 1 and system.ros.wait_mode("DAMPING", 5.0)
    print(f"\nsupervisor killed, steps overrunning: deploy damping {(first_damping.stamp_ns - killed) / 1e6:.0f} ms "
          f"after the kill; longest gap after {max(gaps):.0f} ms")


def test_an_estop_while_the_node_is_stopped_and_its_control_process_runs(system):
    """SIGSTOP of the deploy node alone: its control process goes on under the lease. An e-stop at
    the supervisor cannot reach the node's e-stop service, but the supervisor's ESTOP grants reach
    the control process, which damps within the 60 ms e-stop window: no takeover is needed, one
    writer throughout, no kp > 0 after its first damping command."""
    deploy = system.lowcmd.wait_for(lambda s: not s.damping, time.time_ns(), 5.0)
    assert deploy is not None
    os.kill(system.deploy.pid, signal.SIGSTOP)
    try:
        time.sleep(0.3)
        asked = time.time_ns()
        estop = system.ctl("estop", timeout_s=3.0)
        damping = system.lowcmd.wait_for(lambda s: s.damping, asked, 5.0)
        assert damping is not None and damping.writer == deploy.writer, (estop.stdout, system.ros.latched)
        time.sleep(0.5)
        system.ros.spin_until(lambda: False, 0.2)
        state = system.ros.latched.get(SUPERVISOR, "")
        assert state.startswith("WATCHING") and "held" in state, state  # obeyed: no takeover
    finally:
        os.kill(system.deploy.pid, signal.SIGCONT)
    time.sleep(1.0)
    samples = system.lowcmd.between(asked - 300 * MS, time.time_ns())
    assert {s.writer for s in samples} == {deploy.writer}
    assert not [s for s in samples if s.stamp_ns >= damping.stamp_ns and not s.damping]
    assert system.ros.wait_mode("DAMPING", 5.0)
    ok, message = system.ros.trigger("/asap_deploy/reset")
    assert not ok and "supervisor e-stop held" in message, message
    print(f"\nnode stopped, control process running: its damping {(damping.stamp_ns - asked) / 1e6:.0f} ms after "
          "`ctl estop` was started (the command's own start-up included)")


def test_the_control_process_stopped_while_the_node_runs(system):
    """SIGSTOP of the control process alone for 1 s: the supervisor takes over (no command for
    200 ms); resumed, the control process yields; one writer throughout, damping from the takeover on."""
    deploy = system.lowcmd.wait_for(lambda s: not s.damping, time.time_ns(), 5.0)
    assert deploy is not None
    pid = system.control_pid()
    stopped = time.time_ns()
    os.kill(pid, signal.SIGSTOP)
    try:
        assert system.ros.spin_until(lambda: system.ros.latched.get(SUPERVISOR, "").startswith("TAKEOVER"), 5.0), \
            system.ros.latched
        time.sleep(0.5)
    finally:
        os.kill(pid, signal.SIGCONT)
    time.sleep(1.0)
    samples = system.lowcmd.between(stopped - 100 * MS, time.time_ns())
    takeover = next(s for s in samples if s.writer != deploy.writer)
    assert max_writers_in_window(samples) == 1, writer_overlaps(samples)
    assert not [s for s in samples if s.stamp_ns >= takeover.stamp_ns and not s.damping]
    assert system.ros.wait_mode("DAMPING", 5.0)
    print(f"\ncontrol process stopped: supervisor damping {(takeover.stamp_ns - stopped) / 1e6:.0f} ms after the stop")


def test_a_supervisor_that_hangs_rather_than_dies(system):
    """SIGSTOP of the supervisor for 1 s while it watches: the deploy node's lease runs out, it
    latches DAMPING and streams damping on its own; the supervisor, resumed, grants again and never
    writes beside it; the robot gets damping, from one writer, with no gap past its timeout."""
    deploy = system.lowcmd.wait_for(lambda s: not s.damping, time.time_ns(), 5.0)
    assert deploy is not None
    stopped = time.time_ns()
    os.kill(system.supervisor.pid, signal.SIGSTOP)
    try:
        time.sleep(1.0)
    finally:
        os.kill(system.supervisor.pid, signal.SIGCONT)
    time.sleep(1.0)
    samples = system.lowcmd.between(stopped, time.time_ns())
    context = f"{system.ros.latched}\n{system.log('deploy')}\n{system.log('supervisor')}"
    assert {s.writer for s in samples} == {deploy.writer}, context
    first_damping = next(s for s in samples if s.damping)
    assert first_damping.stamp_ns - stopped <= 260 * MS, context
    after = [s for s in samples if s.stamp_ns >= first_damping.stamp_ns]
    gaps = [(b.source_ns - a.source_ns) / 1e6 for a, b in zip(after, after[1:])]
    assert all(s.damping for s in after) and max(gaps) <= 100.0, (max(gaps), context)
    assert system.wait_latched(SUPERVISOR, "WATCHING")
    assert system.ros.wait_mode("DAMPING", 5.0)
    print(f"\nsupervisor stopped 1 s: deploy damping {(first_damping.stamp_ns - stopped) / 1e6:.0f} ms after the stop; "
          f"longest gap after {max(gaps):.0f} ms")
