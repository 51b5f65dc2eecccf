"""``asap-ros doctor`` as a real process against the simulated G1 (MuJoCo, real Cyclone DDS on
loopback, ``tests/e2e/simulated_g1.py`` in its own process), each failure provoked there; that
process also lists every ``rt/lowcmd`` writer on the bus, to show the doctor creates none.
Heavy: run under the team lock.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from asap_ros.config.paths import config_file
from asap_ros.runtime.domains import domain_beside
from asap_ros.sim.process import dying_with_this_process

SIMULATED_G1 = Path(__file__).with_name("simulated_g1.py")
LOWSTATE_CHECKS = ("lowstate rate", "lowstate crc", "lowstate mode_machine", "lowstate imu", "lowstate joints",
                   "lowstate motor errors", "lowstate temperature")  # fmt: skip


@pytest.fixture(scope="module")
def tolerant_controller_config(tmp_path_factory) -> str:
    """The package controller config with a 1 s state-age limit: this shared 2-core machine stalls
    the simulator for tens of ms at times (the stalled stream below lasts seconds)."""
    data = yaml.safe_load(config_file("controller.yaml").read_text())
    data["safety"]["max_state_age_ms"] = 1000
    path = tmp_path_factory.mktemp("doctor") / "controller_doctor.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


@pytest.fixture(scope="module")
def robot_domain(dds_domain) -> int:
    """The simulated G1's domain: derived from this test process's, never equal to it (this process
    may hold DDS endpoints of other tests on its own domain)."""
    return domain_beside(dds_domain, 23)


class SimulatedG1:
    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc

    def send(self, command: str) -> None:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def lowcmd_writers(self) -> dict[str, str]:
        self.send("writers")
        return json.loads(self.proc.stdout.readline())


@contextlib.contextmanager
def simulated_g1(domain: int, *args: str) -> Iterator[SimulatedG1]:
    command = [sys.executable, str(SIMULATED_G1), "--domain", str(domain), *args]
    proc = subprocess.Popen(dying_with_this_process(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready", "simulated G1 did not start"
        yield SimulatedG1(proc)
    finally:
        proc.stdin.close()
        proc.wait(30)


def run_doctor(domain: int, controller_config: str, *args: str, on_listening=None) -> tuple[int, dict, int]:
    """The doctor on ``domain`` (loopback, the loopback subnet, Fast DDS as the pip wheels bring);
    ``on_listening()`` runs once its bus window opens. Returns its exit status, report and pid."""
    env = {**os.environ, "ROS_DOMAIN_ID": str(domain), "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp"}
    command = [sys.executable, "-m", "asap_ros.cli", "doctor", "--interface", "lo", "--subnet", "127.0.0.0/8",
               "--domain", str(domain), "--rmw", "rmw_fastrtps_cpp", "--controller-config", controller_config,
               "--json", *args]  # fmt: skip
    proc = subprocess.Popen(dying_with_this_process(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "listening" in line:
            break
    if on_listening is not None:
        on_listening()
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode in (0, 1), "".join(seen) + stderr
    return proc.returncode, json.loads(stdout), proc.pid


def statuses(report: dict) -> dict[str, str]:
    return {c["name"]: c["status"] for c in report["checks"]}


def the_check(report: dict, name: str) -> dict:
    return next(c for c in report["checks"] if c["name"] == name)


def failing(report: dict) -> set[str]:
    return {name for name, status in statuses(report).items() if status == "FAIL"}


def test_healthy_simulator_passes_and_doctor_writes_no_lowcmd(robot_domain, tolerant_controller_config):
    with simulated_g1(robot_domain) as robot:
        code, report, pid = run_doctor(robot_domain, tolerant_controller_config)
        writers = robot.lowcmd_writers()
    found = statuses(report)
    assert code == 0 and report["ok"] and not failing(report), report
    not_ok = {name: status for name, status in found.items() if status != "ok"}
    assert set(not_ok) <= {"time sync"}, report  # no chrony / timesyncd on this machine: a warning
    for name in ("network lo", "network rmem_max", *LOWSTATE_CHECKS, "rt/lowcmd writers", "ros RMW_IMPLEMENTATION",
                 "ros ROS_DOMAIN_ID", "ros asap_deploy", "ros asap_supervisor", "assets", "policy kick_level1",
                 "policy CR7_level1", "policy APT_level1", "policy dec_loco_stand"):  # fmt: skip
        assert found[name] == "ok", name
    assert the_check(report, "lowstate mode_machine")["message"].startswith("5 ")
    assert writers == {}, f"rt/lowcmd writers on the bus while the doctor (pid {pid}) ran: {writers}"


def test_second_lowcmd_writer_fails_with_the_debug_mode_sequence(robot_domain, tolerant_controller_config):
    with simulated_g1(robot_domain, "--fault", "second_writer") as robot:
        code, report, pid = run_doctor(robot_domain, tolerant_controller_config, "--checks", "lowstate,lowcmd",
                                       "--duration", "2")  # fmt: skip
        writers = robot.lowcmd_writers()
    assert code == 1 and failing(report) == {"rt/lowcmd writers"}, report
    line = the_check(report, "rt/lowcmd writers")
    assert f"pid {robot.proc.pid}" in line["message"] and "another program writes rt/lowcmd" in line["message"]
    assert "L2+R2" in line["fix"] and "debug" in line["fix"]
    assert set(writers.values()) == {str(robot.proc.pid)}, f"the doctor (pid {pid}) wrote? {writers}"


def fault_report(domain: int, config: str, fault: str, *doctor_args: str) -> dict:
    with simulated_g1(domain, "--fault", fault):
        code, report, _ = run_doctor(domain, config, "--checks", "lowstate", "--duration", "2", *doctor_args)
    assert code == 1, report
    return report


def test_hot_motor_fails(robot_domain, tolerant_controller_config):
    report = fault_report(robot_domain, tolerant_controller_config, "hot")
    assert failing(report) == {"lowstate temperature"}, report
    line = the_check(report, "lowstate temperature")
    assert "right_knee_joint 8" in line["message"] and "start limit 65" in line["message"] and "cool" in line["fix"]


def test_motor_error_bit_fails(robot_domain, tolerant_controller_config):
    report = fault_report(robot_domain, tolerant_controller_config, "motor_error")
    assert failing(report) == {"lowstate motor errors"}, report
    line = the_check(report, "lowstate motor errors")
    assert "left_ankle_pitch_joint (motor 4) 0x00000008" in line["message"] and "power-cycle" in line["fix"]


def test_bad_crc_fails(robot_domain, tolerant_controller_config):
    report = fault_report(robot_domain, tolerant_controller_config, "bad_crc")
    assert failing(report) == {"lowstate crc"}, report
    assert "with a wrong CRC" in the_check(report, "lowstate crc")["message"]


def test_wrong_mode_machine_fails(robot_domain, tolerant_controller_config):
    with simulated_g1(robot_domain, "--mode-machine", "6"):
        code, report, _ = run_doctor(robot_domain, tolerant_controller_config, "--checks", "lowstate",
                                     "--duration", "2", "--mode-machine", "5")  # fmt: skip
    assert code == 1 and failing(report) == {"lowstate mode_machine"}, report
    assert "--mode-machine 6" in the_check(report, "lowstate mode_machine")["fix"]


def test_stalled_lowstate_stream_fails(robot_domain, tolerant_controller_config):
    with simulated_g1(robot_domain) as robot:
        stall_later = lambda: threading.Timer(1.0, robot.send, args=("stall",)).start()  # noqa: E731
        code, report, _ = run_doctor(robot_domain, tolerant_controller_config, "--checks", "lowstate",
                                     "--duration", "4", on_listening=stall_later)  # fmt: skip
    assert code == 1 and failing(report) == {"lowstate rate"}, report
    line = the_check(report, "lowstate rate")
    assert "stopped" in line["message"] and "max_state_age_ms" in line["message"]
