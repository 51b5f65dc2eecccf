"""asap_deploy + asap_supervisor as real processes against the simulated G1 over real DDS.

Latencies are printed (``-s`` shows them), not asserted: the benchmarks report distributions.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

from asap_ros.runtime.scheduling import fifo_permitted
from asap_ros.testing.ros_system import ROOT, System, distribution_ms, node_process, started_system, thread_scheduling


@pytest.fixture(scope="module")
def system(dds_domain, tmp_path_factory):
    yield from started_system(dds_domain, tmp_path_factory.mktemp("e2e_logs"))


@pytest.fixture(autouse=True)
def each_test_starts_holding(system):
    system.ensure_holding()


def deploy_writer(system: System, since_ns: int) -> int:
    sample = system.lowcmd.wait_for(lambda s: True, since_ns, 5.0)
    assert sample is not None, "no rt/lowcmd from asap_deploy"
    return sample.writer


def test_every_thread_on_the_control_path_runs_at_its_priority(system):
    """SCHED_FIFO as robot.launch.py asks (TEST_DEPLOY_PARAMS / TEST_SUPERVISOR_PARAMS): in the
    deploy node's control process the control thread at 80, Cyclone's receive threads one above,
    its other Python threads (the node's link, sinks) one below, so none is preempted by ordinary
    work while it holds the GIL the control thread waits for; the node's own threads (rclpy
    executor, the link's receiver and sinks) one below too; the supervisor's watchdog at 85, its executor and remote-button watch at
    84, its DDS receive threads and the readers of the deploy node's beats and commands at 79 (each
    step's writes wake them); the simulator's physics at 90 and its rt/lowcmd reader at 79 (the
    board takes LowCmd without the computer's CPU)."""
    if not fifo_permitted():
        pytest.skip("SCHED_FIFO is not permitted here: the nodes run at normal priority (and say so)")
    fifo = os.SCHED_FIFO
    control = thread_scheduling(system.control_pid())
    assert control["asap-control"] == {(fifo, 80)}, control
    assert control["recv"] == {(fifo, 81)}, control
    assert control["asap-serve"] == {(fifo, 79)}, control  # answers the node, applies e-stops
    assert control["asap-requests"] == {(fifo, 79)}, control  # the other operator requests
    assert control["asap-sinks"] == {(fifo, 79)}, control
    deploy = thread_scheduling(system.deploy.pid)
    assert "asap-control" not in deploy, deploy
    assert deploy["MainThread"] == {(fifo, 79)}, deploy  # the rclpy executor
    assert deploy["asap-link"] == {(fifo, 79)}, deploy
    assert deploy["asap-link-sinks"] == {(fifo, 79)}, deploy
    supervisor = thread_scheduling(system.supervisor.pid)
    assert supervisor["asap-watchdog"] == {(fifo, 85)}, supervisor
    assert supervisor["recv"] == {(fifo, 79)}, supervisor
    for reader in ("dds rt/lowcmd", "dds rt/asap/dep", "dds rt/asap/sup"):  # 15 bytes of "dds <topic>"
        assert supervisor[reader] == {(fifo, 79)}, supervisor
    assert supervisor["MainThread"] == {(fifo, 84)}, supervisor
    assert supervisor["asap-robot"] == {(fifo, 84)}, supervisor
    sim = thread_scheduling(system.sim.process.pid)  # the robot's board: above the loop
    assert sim["asap-sim-physic"] == {(fifo, 90)}, sim  # the kernel keeps 15 bytes of a name
    assert sim["dds rt/lowcmd"] == {(fifo, 79)}, sim


def _writes(topic: str, idl_type: type, duration_s: float = 1.0, **qos) -> list[tuple[int, bytes]]:
    """(the writer's source stamp: its wall clock at the write, ns; payload) of every sample
    written on ``topic`` for ``duration_s``."""
    from asap_ros.runtime.dds import RawReader

    samples: list[tuple[int, bytes]] = []
    reader = RawReader(topic, idl_type, lambda payload, _arrival, _writer, source: samples.append((source, payload)),
                       source_stamps=True, depth=256, **qos)
    try:
        time.sleep(duration_s)
    finally:
        reader.close()
    return samples


def test_threads_above_the_control_loop_keep_off_the_start_of_its_steps(system):
    """The control loop steps on multiples of 20 ms of the monotonic clock (its LowCmd goes out
    ~1 ms after). The threads above it keep off the start of a step: the supervisor's watchdog
    steps half its 10 ms write period after those multiples (its grants; a beat's own answer goes
    out from the beat reader, below the loop, as the beat arrives), and the simulator (the robot
    board's place) starts the step of each LowState ``lowstate_lead_ms`` (0.6 ms) before a multiple
    of 2 ms, so one is written as the control step begins."""
    from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowState_

    from asap_ros.g1.layout import LOWSTATE_TOPIC
    from asap_ros.runtime.arbitration import GRANT_QOS, GRANT_TOPIC, SupervisorGrant_, decode_grant
    from asap_ros.sim.config import load_sim_config

    since = time.time_ns()
    grants = _writes(GRANT_TOPIC, SupervisorGrant_, qos=GRANT_QOS)
    lowstate_writes = _writes(LOWSTATE_TOPIC, LowState_)
    wall_minus_monotonic = time.time_ns() - time.monotonic_ns()  # source stamps: the writers' wall clock

    def phase_ms(wall_ns: int, period_ns: int, offset_ns: int = 0) -> float:
        """The write's instant on the monotonic clock, past a multiple of ``period_ns`` (+ ``offset_ns``)."""
        return (wall_ns - wall_minus_monotonic + offset_ns) % period_ns / 1e6

    lead_ns = round(load_sim_config().lowstate_lead_ms * 1e6)  # the harness's simulator runs config/sim.yaml
    lowstates = [phase_ms(at, 2_000_000, lead_ns) for at, _ in lowstate_writes]
    steps = [phase_ms(s.source_ns, 20_000_000) for s in system.lowcmd.samples if s.stamp_ns >= since and not s.damping]
    answered: set[int] = set()
    watchdog = []  # the grants that name a beat already answered
    for at, payload in grants:
        seq = decode_grant(payload).seq
        if seq in answered:
            watchdog.append(phase_ms(at, 10_000_000))
        answered.add(seq)
    print(f"\nwritten (median, ms): LowCmd {np.median(steps):.2f} after a multiple of 20, the watchdog's grants "
          f"{np.median(watchdog):.2f} after a multiple of 10, LowStates {np.median(lowstates):.2f} after their "
          f"step's instant")
    assert len(steps) > 25 and len(watchdog) > 50 and len(lowstates) > 250, (len(steps), len(watchdog), len(lowstates))
    assert np.median(steps) < 5.0  # the control step: from its deadline to its write
    assert 5.0 <= np.median(watchdog) < 7.5  # the watchdog's step: from (k + 1/2) x 10 ms to its grant
    assert np.median(lowstates) < 1.4  # the simulator's step: from lowstate_lead_ms before a multiple of 2 ms


def test_estop_service_while_tracking_sends_damping_at_once(system):
    latencies = []
    for _trial in range(3):
        system.track()
        writer = deploy_writer(system, time.time_ns())
        sent, (ok, message) = system.ros.trigger_at("/asap_deploy/estop")
        assert ok and "DAMPING" in message, message
        first = system.lowcmd.wait_for(lambda s: s.damping, sent, 5.0)
        assert first is not None and first.writer == writer, "no damping LowCmd from asap_deploy"
        latencies.append(first.stamp_ns - sent)
        assert system.ros.wait_mode("DAMPING", 5.0)
        system.wait_fault("e-stop: operator e-stop")
        system.reset_and_stand()
    print(f"\ne-stop service -> first damping LowCmd: {distribution_ms(latencies)}")


def test_the_estop_combo_is_held_while_the_operator_holds_it(system):
    """L2 alone does nothing; L2+B on the simulated G1's wireless remote (LowState bytes 2-3)
    reaches the supervisor, which e-stops asap_deploy. While the combo is held, ``ctl reset`` and
    ``ctl stand`` are refused and nothing but damping reaches the robot; once released, a reset
    (supervisor, then deploy node) and Stand bring it back."""
    from asap_ros.core.remote import parse_combo

    press = system.press_remote
    system.track()
    press(frozenset({"L2"}))
    time.sleep(0.3)
    system.ros.spin_until(lambda: False, 0.1)
    assert system.ros.latched["/asap_deploy/mode"] == "TRACKING"
    pressed = time.time_ns()
    press(parse_combo("L2+B"))
    try:
        damping = system.lowcmd.wait_for(lambda s: s.damping, pressed, 5.0)
        assert damping is not None, "no damping LowCmd after the remote e-stop"
        print(f"\nsimulated remote L2+B -> first damping LowCmd: {(damping.stamp_ns - pressed) / 1e6:.1f} ms")
        assert system.ros.wait_mode("DAMPING", 5.0)
        assert system.ros.spin_until(lambda: "wireless remote B+L2" in system.log_text("supervisor"), 2.0)
        reset, stand = system.ctl("reset"), system.ctl("stand")
        assert reset.returncode == 1 and "the e-stop combo is held on the remote" in reset.stdout, reset.stdout
        assert stand.returncode == 1 and "refused" in stand.stdout, stand.stdout
        ok, message = system.ros.trigger("/asap_deploy/reset")  # the deploy node's own, past the supervisor
        assert not ok and "supervisor e-stop held" in message, message
        time.sleep(0.5)
        assert not [s for s in system.lowcmd.between(damping.stamp_ns, time.time_ns()) if not s.damping]
        assert system.ros.latched["/asap_deploy/mode"] == "DAMPING"
    finally:
        press(frozenset())
    time.sleep(0.1)
    reset = system.ctl("reset")
    assert reset.returncode == 0, reset.stdout + reset.stderr
    system.stand()


def test_start_while_damping_is_refused_and_state_unchanged(system):
    ok, message = system.ros.trigger("/asap_deploy/estop")
    assert ok and system.ros.wait_mode("DAMPING", 5.0)
    ok, message = system.ros.trigger("/asap_deploy/start/kick_level1")
    assert not ok
    assert "Start(kick_level1) refused: DAMPING is latched" in message and "only Reset" in message
    time.sleep(0.2)
    system.ros.spin_until(lambda: False, 0.1)
    assert system.ros.latched["/asap_deploy/mode"] == "DAMPING"
    system.reset_and_stand()


def test_ctl_start_of_an_unknown_motion_lists_the_known_ones(system):
    env = {**os.environ, "ROS_DOMAIN_ID": str(system.domain)}
    result = subprocess.run([sys.executable, "-m", "asap_ros.cli", "ctl", "start", "moonwalk"], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "unknown motion 'moonwalk' (known: kick_level1)" in result.stderr
    status = subprocess.run([sys.executable, "-m", "asap_ros.cli", "ctl", "status"], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert status.returncode == 0, status.stderr
    assert "mode: HOLD" in status.stdout and "supervisor: WATCHING: armed (asap_deploy under its grant) (rt/lowcmd writes: 0)" \
        in status.stdout
    assert "control loop:" in status.stdout


def test_runtime_parameter_changes_are_validated(system):
    ros = system.ros
    for name, value, reason in (
        ("default_motion", "moonwalk", "default_motion: not a loaded motion (known: kick_level1) (got 'moonwalk')"),
        ("state_publish_rate_hz", "fast", "state_publish_rate_hz: must be a number (got 'fast')"),
        ("diagnostics_rate_hz", 1000.0, "diagnostics_rate_hz: out of range: allowed 0.1 <= value <= 50"),
        ("control_rate_hz", 100.0, "read-only"),
    ):
        ok, message = ros.set_parameter("asap_deploy", name, value)
        assert not ok and reason in message, message
    assert ros.get_parameter("asap_deploy", "default_motion") == "kick_level1"
    assert ros.get_parameter("asap_deploy", "control_rate_hz") == 50.0
    assert ros.set_parameter("asap_deploy", "diagnostics_rate_hz", 2) == (True, "")


@pytest.mark.parametrize("override,expected", [
    ("control_rate_hz:=fast", "control_rate_hz: must be a number (got 'fast')"),
    ("stand_up_duration_s:=0.1", "stand_up_duration_s: out of range"),
    ("default_motion:=moonwalk", "default_motion: not a loaded motion (known: kick_level1)"),
    ("control_cpu:=4095", "control_cpu: CPU 4095 does not exist"),
])
def test_deploy_refuses_to_start_with_a_bad_parameter(system, tmp_path, override, expected):
    name, value = override.split(":=")
    process = node_process("deploy_node", system.domain, {**system.deploy_params, name: value}, tmp_path / "bad.log")
    assert process.wait(60) == 2
    log = (tmp_path / "bad.log").read_text()
    assert "asap_deploy: refusing to start:" in log and expected in log, log


def test_kill_9_of_deploy_while_tracking_hands_over_to_the_supervisor(system):
    system.track()
    tracking_since = time.time_ns()
    writer = deploy_writer(system, tracking_since)
    time.sleep(0.5)
    killed_at = system.kill_deploy()
    takeover = system.lowcmd.wait_for(lambda s: s.writer != writer, killed_at, 5.0)
    assert takeover is not None and takeover.damping, "supervisor did not stream damping"
    assert takeover.writer not in system.lowcmd.writers_between(0, killed_at), "supervisor wrote while deploy was alive"
    print(f"\nkill -9 -> first supervisor damping LowCmd: {(takeover.stamp_ns - killed_at) / 1e6:.1f} ms")
    assert system.ros.spin_until(lambda: system.ros.latched["/asap_supervisor/state"].startswith("TAKEOVER"), 5.0)
    assert "exited" in system.ros.latched["/asap_supervisor/state"]
    ok, message = system.ros.trigger("/asap_supervisor/reset")
    assert not ok and "reset refused: deploy process" in message and "exited" in message, message

    system.start_deploy("DAMPING")  # it starts under the takeover: latched, writing nothing
    assert system.ros.spin_until(lambda: "supervisor took over rt/lowcmd (deploy process"
                                 in system.ros.latched.get("/asap_deploy/fault", ""), 5.0), system.ros.latched
    ok, message = system.ros.trigger("/asap_deploy/stand")
    assert not ok and "reset the supervisor first" in message, message
    restarted_at = time.time_ns()
    time.sleep(0.5)
    assert system.lowcmd.writers_between(restarted_at, time.time_ns()) == {takeover.writer}
    system.hand_back_and_stand()
    released_at = time.time_ns()
    time.sleep(0.5)
    recent = system.lowcmd.writers_between(released_at + 100_000_000, time.time_ns())
    assert takeover.writer not in recent, "supervisor still writing after reset"
