"""The e-stop promise at the shipped settings (150 ms lease, 200 ms takeover, 60 ms e-stop window,
5 ms late margin), with real asap_deploy and asap_supervisor processes on the simulated G1 and every
rt/lowcmd sample attributed to its DDS writer: no stale write after a stall, one authority among
supervisors, an e-stop that survives a supervisor restart, never a robot without a writer, liveness
bound to the deploy node's own writer and process, an e-stop that never waits behind a request.

Each scenario is one the review of the earlier lease found broken. Figures are printed (``-s``);
the distributions are benchmarks/faults.py's.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from asap_ros.sim.process import stop_gracefully
from asap_ros.testing.ros_system import (
    RogueWriter,
    System,
    max_writers_in_window,
    node_process,
    simulator_system,
    writer_overlaps,
)

SUPERVISOR = "/asap_supervisor/state"
MODE = "/asap_deploy/mode"
FAULT = "/asap_deploy/fault"


@pytest.fixture(scope="module")
def system(dds_domain, tmp_path_factory):
    """Simulator, observer and client for the module; each test (re)starts the nodes it needs."""
    yield from simulator_system(dds_domain, tmp_path_factory.mktemp("safety_logs"))


@pytest.fixture(autouse=True)
def fresh_nodes(system):
    """Both nodes started anew for each test (no fault injection), the robot standing."""
    system.restart_nodes()
    yield


def writer_of(system: System, predicate=lambda s: True) -> int:
    sample = system.lowcmd.wait_for(predicate, time.time_ns(), 5.0)
    assert sample is not None, "no rt/lowcmd"
    return sample.writer


def latched(system: System, topic: str, prefix: str, timeout_s: float = 10.0) -> str:
    return system.wait_latched(topic, prefix, timeout_s)


def test_a_stalled_actor_step_writes_nothing_after_its_lease(system):
    """A 300 ms stall between a step's verdict and its write (``slow``): the supervisor takes over
    and the stalled step's kp > 0 command is never written beside its damping."""
    system.restart_nodes({"ASAP_ROS_FAULT_INJECTION": "slow=0.3@motion_tick=25"})
    deploy = writer_of(system, lambda s: not s.damping)
    system.track()
    began = time.time_ns()
    latched(system, SUPERVISOR, "TAKEOVER")
    time.sleep(1.0)
    samples = system.lowcmd.between(began - 500_000_000, time.time_ns())
    first_damping = next(s for s in samples if s.writer != deploy)
    around = [(round((s.stamp_ns - first_damping.stamp_ns) / 1e6, 1), "deploy" if s.writer == deploy else "supervisor",
               s.damping) for s in samples if abs(s.stamp_ns - first_damping.stamp_ns) < 400_000_000]
    assert not [s for s in samples if s.stamp_ns > first_damping.stamp_ns and not s.damping], around
    changes = [(round((b.stamp_ns - first_damping.stamp_ns) / 1e6, 1), "deploy" if b.writer == deploy else "supervisor",
                b.damping) for a, b in zip(samples, samples[1:]) if a.writer != b.writer]
    assert max_writers_in_window(samples) == 1, changes
    assert system.ros.wait_mode("DAMPING", 5.0)
    print(f"\n300 ms stall: supervisor damping, then {len([s for s in samples if s.writer == deploy and s.stamp_ns > first_damping.stamp_ns])} "
          f"deploy samples after it (all damping or none), fault: {system.ros.latched.get(FAULT)}")


def test_the_supervisor_dying_during_a_takeover_leaves_damping_from_the_deploy_node(system):
    """SIGSTOP of the deploy node for 1 s (takeover), SIGCONT, then SIGKILL of the supervisor: the
    deploy node streams damping itself; a restarted supervisor grants again, and the robot stands
    again only after a reset."""
    deploy = writer_of(system)
    system.hang_deploy_through_takeover()
    time.sleep(0.5)
    killed = time.time_ns()
    os.kill(system.supervisor.pid, signal.SIGKILL)
    system.supervisor.wait(10)
    back = system.lowcmd.wait_for(lambda s: s.writer == deploy, killed, 3.0)
    assert back is not None and back.damping, "nobody wrote rt/lowcmd after the supervisor died"
    time.sleep(1.0)
    samples = system.lowcmd.between(killed - 1_000_000_000, time.time_ns())
    last_supervisor = max(s.stamp_ns for s in samples if s.writer != deploy)
    gaps = [b.stamp_ns - a.stamp_ns for a, b in zip(samples, samples[1:]) if a.stamp_ns >= killed - 100_000_000]
    print(f"\nsupervisor killed during a takeover: deploy damping {(back.stamp_ns - last_supervisor) / 1e6:.1f} ms after "
          f"the supervisor's last command; longest silence since {max(gaps) / 1e6:.1f} ms")
    assert all(s.damping for s in samples) and max_writers_in_window(samples) == 1
    system.start_supervisor()
    assert system.ros.latched[SUPERVISOR].startswith("WATCHING")
    ok, message = system.reset_deploy(5.0)
    assert ok, message
    system.stand()


def test_a_second_supervisor_never_grants_nor_writes(system):
    """A second supervisor joins as an e-stop source: through a hung deploy node, its resume,
    ``ctl reset`` and ``ctl stand``, one writer only, and it never writes."""
    second = system.start_second_supervisor()
    try:
        from rclpy.qos import DurabilityPolicy, QoSProfile
        from std_msgs.msg import String

        states: list[str] = []
        system.ros.node.create_subscription(String, "/second_supervisor/state", lambda m: states.append(m.data),
                                            QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
        assert system.ros.spin_until(lambda: bool(states) and states[-1].startswith("SECONDARY"), 30.0), states
        began = system.hang_deploy_through_takeover()
        time.sleep(1.0)
        system.ros.latched.pop(MODE, None)  # ctl runs apart: only a HOLD heard after it counts below
        reset = system.ctl("reset")
        assert reset.returncode == 0, reset.stdout + reset.stderr
        stand = system.ctl("stand")
        assert stand.returncode == 0, stand.stdout + stand.stderr
        assert system.ros.wait_mode("HOLD", 30.0), system.ros.latched
        time.sleep(0.5)
        samples = system.lowcmd.between(began, time.time_ns())
        assert max_writers_in_window(samples) == 1, "\n".join(
            [*writer_overlaps(samples), system.log("deploy"), system.log("supervisor"), system.log("second_supervisor")])
        assert len({s.writer for s in samples}) == 2  # the deploy node and the first supervisor, never the second
        assert states[-1].startswith("SECONDARY"), states
    finally:
        stop_gracefully(second)


def test_an_estop_is_held_through_a_supervisor_restart(system):
    ok, message = system.ros.trigger("/asap_supervisor/estop")
    assert ok, message
    assert system.ros.wait_mode("DAMPING", 5.0)
    os.kill(system.supervisor.pid, signal.SIGKILL)
    system.supervisor.wait(10)
    system.start_supervisor()
    state = latched(system, SUPERVISOR, "WATCHING")
    assert "held" in state, state
    ok, message = system.ros.trigger("/asap_deploy/reset")
    assert not ok and "supervisor e-stop held" in message, message
    ok, message = system.ros.trigger("/asap_deploy/stand")
    assert not ok, message
    # the operator's reset, from a process of its own: this one's DDS participant lists the killed
    # supervisor's service endpoints until their lease ends, so a wait for the service here can
    # succeed on those before the new supervisor's are known, and the request reaches nobody
    reset = system.ctl("reset")
    assert "supervisor reset: ok" in reset.stdout, reset.stdout + reset.stderr
    if reset.returncode != 0:  # ctl asks the deploy node for 1 s; it may hear the release later
        ok, message = system.reset_deploy(5.0)
        assert ok, f"{message}\n{reset.stdout}"
    system.stand()


def forward_path(system) -> str:
    """The newest ``e-stop forward path`` line of the newest supervisor log ("" before one)."""
    logs = sorted(system.logs.glob("supervisor*.log"), key=lambda f: f.stat().st_mtime)
    lines = [line for line in logs[-1].read_text().splitlines() if "e-stop forward path" in line] if logs else []
    return lines[-1] if lines else ""


def test_an_estop_a_stopped_deploy_node_has_not_heard_is_not_released(system):
    """An e-stop forwarded to a stopped deploy node is held by the supervisor until the node has
    answered it, so DDS cannot deliver it after the operator's reset; once the node's process is
    gone it no longer blocks (a restarted node is handed back as usual)."""
    # the supervisor (restarted by an earlier test) must have discovered the service to forward to
    assert system.ros.spin_until(lambda: "forward path up" in forward_path(system), 10.0), forward_path(system)
    system.signal_deploy(signal.SIGSTOP)
    try:
        ok, message = system.ros.trigger("/asap_supervisor/estop")
        assert ok and "forwarded to /asap_deploy/estop" in message, message
        latched(system, SUPERVISOR, "TAKEOVER", 5.0)
        ok, message = system.ros.trigger("/asap_supervisor/reset")
        assert not ok and "not yet answered the e-stop forwarded to /asap_deploy/estop" in message, message
    finally:
        system.signal_deploy(signal.SIGKILL)
    system.deploy.wait(10)
    assert system.ros.spin_until(lambda: "exited" in system.ros.trigger("/asap_supervisor/reset")[1], 5.0)
    system.start_deploy("DAMPING")
    system.hand_back_and_stand()


def test_a_third_writer_does_not_hide_a_hung_deploy_node(system):
    """A rogue participant writes damping on rt/lowcmd at 50 Hz; the deploy node hangs: the
    supervisor still takes over, naming the silence of the deploy node's own writer."""
    with RogueWriter():
        system.signal_deploy(signal.SIGSTOP)
        try:
            state = latched(system, SUPERVISOR, "TAKEOVER", 5.0)
        finally:
            system.signal_deploy(signal.SIGCONT)
    assert "deploy silent" in state, state
    assert system.ros.spin_until(lambda: "other than asap_deploy" in system.log_text("supervisor"), 2.0)


def stop_for(group: int, hang_s: float) -> float:
    """SIGSTOP process group ``group``, SIGCONT ``hang_s`` later, timed from a thread at SCHED_FIFO 90 where
    permitted (above the nodes: the stop lasts what is asked); returns how long it was stopped."""
    from asap_ros.runtime.scheduling import run_realtime

    stopped: list[float] = []

    def hang() -> None:
        run_realtime(90)
        began = time.monotonic()
        os.killpg(group, signal.SIGSTOP)
        try:
            time.sleep(hang_s)
        finally:
            os.killpg(group, signal.SIGCONT)
            stopped.append(time.monotonic() - began)

    thread = threading.Thread(target=hang, name="stop-for")
    thread.start()
    thread.join()
    return stopped[0]


def test_a_deploy_node_stopped_within_the_command_timeout_holds_on_without_a_fault(system):
    """SIGSTOP for 50 ms: no gap between its commands passes the simulated G1's 100 ms command
    timeout, so it goes on holding the robot, no fault and no takeover."""
    deploy = writer_of(system, lambda s: not s.damping)
    began = time.time_ns()
    hang_s = stop_for(system.deploy.pid, 0.05)  # the node's group: it and its control process
    time.sleep(1.0)
    system.ros.spin_until(lambda: False, 0.2)
    context = f"stopped {hang_s * 1e3:.0f} ms; {system.ros.latched}\n{system.log('deploy')}"
    samples = system.lowcmd.between(began - 100_000_000, time.time_ns())  # the stop's gap included
    gaps = [(b.source_ns - a.source_ns) / 1e6 for a, b in zip(samples, samples[1:])]  # as written
    if max(gaps) > 100.0:  # the host held the process longer than the stop: the timeout's rule applies
        assert system.ros.latched[MODE] == "DAMPING" and "command timeout" in system.ros.latched[FAULT], context
        print(f"\nstopped {hang_s * 1e3:.0f} ms, the host held it longer: a {max(gaps):.0f} ms gap, DAMPING")
        return
    assert (system.ros.latched[MODE], system.ros.latched[FAULT]) == ("HOLD", ""), context
    assert system.ros.latched[SUPERVISOR].startswith("WATCHING"), context
    assert {s.writer for s in samples} == {deploy} and not [s for s in samples if s.damping], context
    print(f"\nstopped {hang_s * 1e3:.0f} ms: longest rt/lowcmd gap {max(gaps):.0f} ms, no fault")


def test_a_deploy_node_stopped_past_the_command_timeout_damps_without_a_takeover(system):
    """SIGSTOP for 120 ms, less than the lease and the takeover: the robot's motors went limp
    (no command for more than its 100 ms timeout), so the deploy node latches DAMPING and its next
    command is damping, never a stiff one computed on a 120 ms old observation; it stays the one
    writer and the supervisor does not take over."""
    deploy = writer_of(system, lambda s: not s.damping)
    began = time.time_ns()
    hang_s = stop_for(system.deploy.pid, 0.12)
    time.sleep(1.0)
    system.ros.spin_until(lambda: False, 0.2)
    context = f"stopped {hang_s * 1e3:.0f} ms; {system.ros.latched}\n{system.log('deploy')}"
    assert system.ros.latched[MODE] == "DAMPING" and "command timeout" in system.ros.latched[FAULT], context
    assert system.ros.latched[SUPERVISOR].startswith("WATCHING"), context
    samples = system.lowcmd.between(began - 100_000_000, time.time_ns())
    assert {s.writer for s in samples} == {deploy}, context
    gaps = [(b, (b.source_ns - a.source_ns) / 1e6) for a, b in zip(samples, samples[1:])]
    after, longest = max(gaps, key=lambda pair: pair[1])
    assert longest > 100.0 and after.damping, context
    assert not [s for s in samples if s.source_ns >= after.source_ns and not s.damping], context
    print(f"\nstopped {hang_s * 1e3:.0f} ms: rt/lowcmd gap {longest:.0f} ms, then damping")


def test_another_deploy_process_exiting_is_no_takeover(system):
    """A second asap_deploy (the same node name, so its latched ``~/process`` and ``~/mode`` share
    the first one's topics) gets no grant while the first beats; its exit leaves the supervisor
    watching the one it grants, whose stiff commands go on alone."""
    deploy = writer_of(system, lambda s: not s.damping)
    stray = node_process("deploy_node", system.domain, system.deploy_params, system.logs / "stray_deploy.log")
    began = time.time_ns()
    time.sleep(5.0)
    stray.terminate()
    stray.wait(30)
    time.sleep(1.0)
    system.ros.spin_until(lambda: False, 0.2)
    assert system.ros.latched[SUPERVISOR].startswith("WATCHING"), system.ros.latched
    samples = system.lowcmd.between(began, time.time_ns())
    assert {s.writer for s in samples} == {deploy} and not [s for s in samples[-20:] if s.damping]


def test_the_estop_service_never_waits_behind_a_slow_request(system):
    """From control tick 400 on every step stalls 0.4 s in the step lock (each outlives its lease:
    DAMPING, takeover): a Stop request waits for that lock; an e-stop sent after it is answered
    first (its own node and executor thread in asap_deploy, and in the control process the
    serving thread, while the Stop waits on the request thread)."""
    from std_srvs.srv import Trigger

    system.restart_nodes({"ASAP_ROS_FAULT_INJECTION": "slow=0.4@tick=400+"})
    latched(system, SUPERVISOR, "TAKEOVER", 30.0)
    stop_client = system.ros.node.create_client(Trigger, "/asap_deploy/stop")
    estop_client = system.ros.node.create_client(Trigger, "/asap_deploy/estop")
    assert stop_client.wait_for_service(timeout_sec=5.0) and estop_client.wait_for_service(timeout_sec=5.0)
    order: list[str] = []
    stop_future = stop_client.call_async(Trigger.Request())
    stop_future.add_done_callback(lambda _f: order.append("stop"))
    system.ros.spin_until(lambda: False, 0.05)
    estop_future = estop_client.call_async(Trigger.Request())
    estop_future.add_done_callback(lambda _f: order.append("estop"))
    assert system.ros.spin_until(lambda: len(order) == 2, 10.0), order
    assert order == ["estop", "stop"], order
    assert estop_future.result().success and not stop_future.result().success
