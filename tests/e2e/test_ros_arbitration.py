"""Exactly one writer on rt/lowcmd: asap_deploy and asap_supervisor as real processes on the
simulated G1, every rt/lowcmd sample attributed to its DDS writer (publication handle)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from asap_ros.testing.ros_system import ROOT, System, max_writers_in_window, started_system

FAULT = "/asap_deploy/fault"


@pytest.fixture(scope="module")
def system(dds_domain, tmp_path_factory):
    yield from started_system(dds_domain, tmp_path_factory.mktemp("arbitration_logs"))


@pytest.fixture(autouse=True)
def each_test_starts_holding(system):
    system.ensure_holding()


def deploy_writer(system: System) -> int:
    sample = system.lowcmd.wait_for(lambda s: not s.damping, time.time_ns(), 5.0)
    assert sample is not None, "no rt/lowcmd with stiffness from asap_deploy"
    return sample.writer


def taken_over(system: System) -> bool:
    """The supervisor's latched state says TAKEOVER (read for up to 5 s)."""
    return system.ros.spin_until(
        lambda: system.ros.latched.get("/asap_supervisor/state", "").startswith("TAKEOVER"), 5.0)


@pytest.mark.parametrize("hang_s", [2.0, 15.0])  # 15 s: past DDS's 10 s participant lease (peers forget it)
def test_a_hung_deploy_node_that_resumes_never_writes_beside_the_supervisor(system, hang_s):
    system.track()
    deploy = deploy_writer(system)
    stopped_at = time.time_ns()
    system.signal_deploy(signal.SIGSTOP)
    try:
        takeover = system.lowcmd.wait_for(lambda s: s.writer != deploy, stopped_at, 5.0)
        assert takeover is not None and takeover.damping, "the supervisor did not stream damping"
        time.sleep(max(0.0, hang_s - (time.time_ns() - stopped_at) / 1e9))
    finally:
        system.signal_deploy(signal.SIGCONT)
    resumed_at = time.time_ns()
    taken = "e-stop: supervisor took over rt/lowcmd (deploy silent for"
    caught = "e-stop: a LowCmd write returned after its lease had ended"  # the stop came inside a write
    stalled = "e-stop: the control loop stalled"  # its first step after the stop, before the TAKEOVER grants came
    assert system.ros.spin_until(lambda: system.ros.latched.get(FAULT, "").startswith((taken, caught, stalled)),
                                 10.0), \
        (system.ros.latched, system.log("deploy"))
    time.sleep(1.0)
    samples = system.lowcmd.between(stopped_at - 500_000_000, time.time_ns())
    after_takeover = [s for s in samples if s.stamp_ns >= takeover.stamp_ns]
    others = [s for s in after_takeover if s.writer != takeover.writer]
    # a stop inside a write (after its permission was checked) sends that one command on resuming:
    # no check before a write can prevent it; the deploy node must say so and write nothing more
    allowed = 1 if system.ros.latched[FAULT].startswith(caught) else 0
    assert len(others) <= allowed, "the resumed deploy node wrote rt/lowcmd: " + "; ".join(
        f"writer {s.writer} ({'the deploy node' if s.writer == deploy else 'another handle'}), "
        f"{'damping' if s.damping else 'kp > 0'}, written {(s.source_ns - resumed_at) / 1e6:+.1f} ms and taken "
        f"{(s.stamp_ns - resumed_at) / 1e6:+.1f} ms after the SIGCONT" for s in others[:5]) + f" ({len(others)} in all)"
    assert max_writers_in_window([s for s in samples if s not in others]) == 1
    assert system.ros.wait_mode("DAMPING", 5.0), system.ros.latched
    assert taken_over(system), system.ros.latched
    ok, message = system.ros.trigger("/asap_deploy/stand")
    assert not ok and "reset the supervisor first" in message, message
    # the supervisor's account of the gap (logged by its publish timer): the deploy node wrote no
    # beat for as long as it was stopped (a later, shorter gap may follow: beats lost while DDS
    # matches the resumed writer again)
    def longest_beat_gap_ms() -> int:
        gaps = re.findall(r"\[(\d+\.\d+)\] \[asap_supervisor\]: beats: none taken for \d+ ms; beat \d+ was written "
                          r"(\d+) ms after", system.log_text("supervisor"))
        return max((int(gap) for stamp, gap in gaps if float(stamp) * 1e9 >= stopped_at), default=0)

    assert system.ros.spin_until(lambda: longest_beat_gap_ms() >= hang_s * 1000 - 50, 5.0), system.log("supervisor")
    print(f"\nSIGSTOP {hang_s:g} s: supervisor damping {(takeover.stamp_ns - stopped_at) / 1e6:.1f} ms after the stop; "
          f"deploy resumed {(resumed_at - stopped_at) / 1e9:.1f} s later and wrote nothing")
    system.hand_back_and_stand()
    handed_back = time.time_ns()
    time.sleep(0.5)
    assert max_writers_in_window(system.lowcmd.between(handed_back - 1_000_000_000, time.time_ns())) == 1


def test_a_deploy_node_restarted_during_a_takeover_refuses_stand_until_the_supervisor_resets(system):
    deploy = deploy_writer(system)
    killed_at = system.kill_deploy()
    takeover = system.lowcmd.wait_for(lambda s: s.writer != deploy, killed_at, 5.0)
    assert takeover is not None and takeover.damping
    system.start_deploy("DAMPING")
    env = {**os.environ, "ROS_DOMAIN_ID": str(system.domain)}
    stand = subprocess.run([sys.executable, "-m", "asap_ros.cli", "ctl", "stand"], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
    assert stand.returncode == 1 and "Stand refused: supervisor took over rt/lowcmd" in stand.stdout, stand.stdout
    time.sleep(1.0)
    samples = system.lowcmd.between(killed_at - 500_000_000, time.time_ns())
    assert {s.writer for s in samples if s.stamp_ns >= takeover.stamp_ns} == {takeover.writer}
    assert max_writers_in_window(samples) == 1
    assert taken_over(system), system.ros.latched
    system.hand_back_and_stand()


def test_supervisor_reset_is_refused_while_the_deploy_node_is_gone(system):
    deploy = deploy_writer(system)
    killed_at = system.kill_deploy()
    assert system.lowcmd.wait_for(lambda s: s.writer != deploy, killed_at, 5.0) is not None
    ok, message = system.ros.trigger("/asap_supervisor/reset")
    assert not ok and "reset refused" in message, message
    system.start_deploy("DAMPING")
    system.hand_back_and_stand()


def test_ctl_estop_does_not_wait_for_a_hung_deploy_node(system):
    """With asap_deploy stopped, ``ctl estop`` reaches the supervisor at once and reports the
    deploy node's missing answer after it, instead of asking the supervisor only afterwards."""
    system.track()
    env = {**os.environ, "ROS_DOMAIN_ID": str(system.domain)}
    system.signal_deploy(signal.SIGSTOP)
    try:
        estop = subprocess.run([sys.executable, "-m", "asap_ros.cli", "ctl", "estop", "--timeout", "5"], env=env,
                               cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert taken_over(system), system.ros.latched
    finally:
        system.signal_deploy(signal.SIGCONT)
    assert estop.returncode == 0, estop.stdout + estop.stderr
    assert "estop via /asap_supervisor/estop: ok" in estop.stdout, estop.stdout
    assert system.ros.wait_mode("DAMPING", 10.0)
    time.sleep(1.0)  # ctl's own /asap_deploy/estop request, buffered while the node was stopped, lands
    # the supervisor's forward may be retransmitted up to seconds after SIGCONT (DDS heartbeat back-off):
    # its reset is refused until the deploy node has answered it
    system.hand_back_and_stand(reset_within_s=20.0)
