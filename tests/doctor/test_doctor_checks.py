"""The doctor's judgements on synthetic inputs (no DDS, no processes): LowState windows built with
the simulator's own LowState encoder, rt/lowcmd writer lists, chrony configs, the report."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from asap_ros.config.controller import load_controller_config
from asap_ros.config.robot import load_robot_model
from asap_ros.core.state import NUM_MOTORS
from asap_ros.doctor.clock import chrony_check, makestep_policy
from asap_ros.doctor.lowcmd_writers import LowCmdWriter, check_lowcmd_writers
from asap_ros.doctor.lowstate import LowStateExpectations, LowStateWindow, analyse_lowstate
from asap_ros.doctor.report import FAIL, OK, WARN, Check, exit_status, format_json, format_text
from asap_ros.sim.bridge import LowStateEncoder, RobotReading
from asap_ros.sim.profile import SensorNoise

PERIOD_NS = 2_000_000  # 500 Hz


@pytest.fixture(scope="module")
def expect() -> LowStateExpectations:
    return LowStateExpectations(500.0, None, load_controller_config().safety, load_robot_model())


def reading(robot, **changes) -> RobotReading:
    base = RobotReading(
        q=robot.default_q.copy(), dq=np.zeros(NUM_MOTORS), ddq=np.zeros(NUM_MOTORS), tau=np.zeros(NUM_MOTORS),
        temperature_c=np.full(NUM_MOTORS, 35.0), enabled=np.zeros(NUM_MOTORS, bool),
        quat_wxyz=np.array([1.0, 0, 0, 0]), gyro=np.zeros(3), acc=np.array([0, 0, 9.81]), imu_temperature_c=30.0,
    )  # fmt: skip
    return dataclasses.replace(base, **changes)


def window(payloads: list[bytes], arrivals_ns: list[int] | None = None, end_ns: int | None = None) -> LowStateWindow:
    arrivals = arrivals_ns if arrivals_ns is not None else [i * PERIOD_NS for i in range(len(payloads))]
    end = end_ns if end_ns is not None else (arrivals[-1] + PERIOD_NS if arrivals else 0)
    return LowStateWindow(payloads, arrivals, end, "domain 9 via lo")


def stream(robot, count: int = 500, mode_machine: int = 5, motor_error: tuple[int, int] | None = None, **changes):
    encoder = LowStateEncoder(mode_machine, SensorNoise(), np.random.default_rng(0))
    if motor_error is not None:  # the simulated motor reports it, as the robot's would
        errors = np.zeros(NUM_MOTORS, dtype=np.uint32)
        errors[motor_error[0]] = motor_error[1]
        changes["motor_error"] = errors
    sample = reading(robot, **changes)
    return [encoder.encode(2 * i, sample) for i in range(count)]


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def failing(checks: list[Check]) -> list[str]:
    return [c.name for c in checks if c.status == FAIL]


def test_a_healthy_stream_passes_every_lowstate_check(expect):
    checks = analyse_lowstate(window(stream(expect.robot)), expect)
    assert [c.status for c in checks] == [OK] * 7, format_text(checks)
    assert "500.0 Hz" in by_name(checks)["lowstate rate"].message


def test_a_hot_motor_fails_naming_the_joint_and_the_start_limit(expect):
    hot = np.full(NUM_MOTORS, 35.0)
    hot[3] = 72.0
    checks = analyse_lowstate(window(stream(expect.robot, temperature_c=hot)), expect)
    assert failing(checks) == ["lowstate temperature"]
    line = by_name(checks)["lowstate temperature"]
    assert "left_knee_joint 72 C" in line.message and "65" in line.message and "cool" in line.fix


def test_a_motor_error_bit_fails_naming_the_motor_and_its_code(expect):
    checks = analyse_lowstate(window(stream(expect.robot, motor_error=(20, 0x40))), expect)
    assert failing(checks) == ["lowstate motor errors"]
    assert "left_wrist_pitch_joint (motor 20) 0x00000040" in by_name(checks)["lowstate motor errors"].message


def test_a_wrong_mode_machine_fails_with_the_reported_value(expect):
    wanted = dataclasses.replace(expect, mode_machine=5)
    checks = analyse_lowstate(window(stream(expect.robot, mode_machine=6)), wanted)
    assert failing(checks) == ["lowstate mode_machine"]
    line = by_name(checks)["lowstate mode_machine"]
    assert "reports mode_machine 6, 5 was expected" in line.message and "--mode-machine 6" in line.fix
    assert by_name(analyse_lowstate(window(stream(expect.robot, mode_machine=6)), expect))[
        "lowstate mode_machine"].status == OK  # fmt: skip


def test_bad_crc_samples_fail_and_are_left_out_of_the_content_checks(expect):
    payloads = stream(expect.robot, count=100)
    hot = stream(expect.robot, count=20, temperature_c=np.full(NUM_MOTORS, 90.0))
    corrupt = [p[:-1] + bytes([p[-1] ^ 0xFF]) for p in hot]  # the CRC is the sample's last word
    checks = analyse_lowstate(window(payloads + corrupt), expect)
    assert failing(checks) == ["lowstate crc"]
    assert "20 of 120 samples with a wrong CRC" in by_name(checks)["lowstate crc"].message


def test_a_stalled_stream_fails_with_the_longest_gap(expect):
    payloads = stream(expect.robot, count=300)
    arrivals = [i * PERIOD_NS for i in range(150)] + [i * PERIOD_NS + 80_000_000 for i in range(150, 300)]
    checks = analyse_lowstate(window(payloads, arrivals), expect)
    assert failing(checks) == ["lowstate rate"]
    assert "stalled" in by_name(checks)["lowstate rate"].message and "longest 82.0 ms" in by_name(checks)[
        "lowstate rate"].message  # fmt: skip


def test_a_stream_that_stops_fails_even_without_a_gap_between_samples(expect):
    payloads = stream(expect.robot, count=100)
    checks = analyse_lowstate(window(payloads, end_ns=2_000_000_000), expect)
    assert failing(checks) == ["lowstate rate"] and "stopped" in by_name(checks)["lowstate rate"].message


def test_no_lowstate_at_all_is_one_fail_line(expect):
    checks = analyse_lowstate(window([], [], 3_000_000_000), expect)
    assert [(c.name, c.status) for c in checks] == [("lowstate stream", FAIL)]
    assert "domain 9 via lo" in checks[0].message


def test_a_slow_stream_is_a_warning(expect):
    payloads = stream(expect.robot, count=200)
    checks = analyse_lowstate(window(payloads, [i * 4_000_000 for i in range(200)]), expect)
    assert by_name(checks)["lowstate rate"].status == WARN and not failing(checks)


def test_imu_and_joint_limits(expect):
    robot = expect.robot
    tilted = analyse_lowstate(window(stream(robot, acc=np.array([0, 0, 3.0]))), expect)
    assert failing(tilted) == ["lowstate imu"]
    q = robot.default_q.copy()
    q[3] = robot.q_upper[3] + 0.5
    beyond = analyse_lowstate(window(stream(robot, q=q)), expect)
    assert failing(beyond) == ["lowstate joints"] and "left_knee_joint" in by_name(beyond)["lowstate joints"].message


def test_lowcmd_writers_rule():
    writing = LowCmdWriter("01.03", "python pid 7 on vm", 120)
    silent = LowCmdWriter("01.04", "asap_supervisor pid 8 on vm", 0)
    (other,) = check_lowcmd_writers([writing], deploy_running=False, window_s=3.0)
    assert other.status == FAIL and "L2+R2" in other.fix and "pid 7" in other.message
    (deploy,) = check_lowcmd_writers([writing, silent], deploy_running=True, window_s=3.0)
    assert deploy.status == OK
    (two,) = check_lowcmd_writers([writing, dataclasses.replace(writing, guid="01.05")], True, 3.0)
    assert two.status == FAIL
    (idle,) = check_lowcmd_writers([silent], deploy_running=False, window_s=3.0)
    assert idle.status == WARN
    assert check_lowcmd_writers([], deploy_running=False, window_s=3.0)[0].status == OK


TRACKING = "Reference ID    : C0A87B01 (192.168.123.1)\nLeap status     : Normal\n"


def test_chrony_makestep_policy():
    assert makestep_policy("pool x iburst\nmakestep 1 3\n") == ("1", 3)
    assert makestep_policy("# makestep 1 -1\n") is None
    assert chrony_check(TRACKING, "makestep 1.0 3").status == OK
    always = chrony_check(TRACKING, "makestep 0.1 -1")
    assert always.status == WARN and "makestep 0.1 3" in always.fix
    assert chrony_check(TRACKING.replace("Normal", "Not synchronised"), "").status == WARN


def test_report_exit_status_and_json():
    checks = [Check("a", OK, "fine"), Check("b", WARN, "hm", "do x")]
    assert exit_status(checks) == 0 and exit_status([*checks, Check("c", FAIL, "bad", "do y")]) == 1
    text = format_text([*checks, Check("c", FAIL, "bad", "do y")])
    assert "FAIL  c: bad\n      fix: do y" in text and text.endswith("1 ok, 1 warn, 1 FAIL")
    data = json.loads(format_json(checks, {"domain": 0}))
    assert data["ok"] is True and data["checks"][1] == {"name": "b", "status": WARN, "message": "hm", "fix": "do x"}


def test_ros_environment_and_graph(monkeypatch):
    from asap_ros.doctor.ros_graph import RosGraph, check_environment, check_graph

    monkeypatch.setenv("RMW_IMPLEMENTATION", "rmw_cyclonedds_cpp")
    monkeypatch.setenv("ROS_DOMAIN_ID", "300")
    rmw, domain = check_environment("rmw_cyclonedds_cpp")
    assert rmw.status == OK and domain.status == FAIL and "0..232" in domain.message
    monkeypatch.delenv("RMW_IMPLEMENTATION")
    assert check_environment("rmw_cyclonedds_cpp")[0].status == WARN

    assert [c.status for c in check_graph(RosGraph([], None))] == [OK, OK]
    alone = by_name(check_graph(RosGraph(["/asap_deploy"], None)))
    assert alone["ros asap_supervisor"].status == FAIL
    both = ["/asap_deploy", "/asap_supervisor"]
    armed = by_name(check_graph(RosGraph(both, "WATCHING: armed (asap_deploy under its grant)")))
    assert armed["ros asap_supervisor"].status == OK and "armed" in armed["ros asap_supervisor"].message
    deaf = by_name(check_graph(RosGraph(both, "WATCHING: not armed (no asap_deploy heard)")))
    assert deaf["ros asap_supervisor"].status == FAIL and "would not notice" in deaf["ros asap_supervisor"].message
    unbound = by_name(check_graph(RosGraph(both, "WATCHING: not armed (asap_deploy heard, not yet under its grant)")))
    assert unbound["ros asap_supervisor"].status == FAIL and "not be obeyed" in unbound["ros asap_supervisor"].message
    held = by_name(check_graph(RosGraph(both, "WATCHING: armed (asap_deploy under its grant); e-stop from terminal held")))
    assert held["ros asap_supervisor"].status == FAIL and "ctl reset" in held["ros asap_supervisor"].fix
    second = by_name(check_graph(RosGraph(both, "SECONDARY: asap_deploy obeys supervisor 51")))
    assert second["ros asap_supervisor"].status == WARN
    took_over = by_name(check_graph(RosGraph(["/asap_supervisor"], "TAKEOVER: deploy exited")))
    assert took_over["ros asap_supervisor"].status == FAIL and "ctl reset" in took_over["ros asap_supervisor"].fix
    assert check_graph(RosGraph([], None, error="RuntimeError: no rmw"))[0].status == FAIL


def test_network_interface_checks_read_the_real_interfaces():
    import ipaddress

    from asap_ros.doctor.network import check_interface

    (loopback,) = check_interface("lo", ipaddress.IPv4Network("127.0.0.0/8"))
    assert loopback.status == OK and "127.0.0.1/8" in loopback.message
    (off_subnet,) = check_interface("lo", ipaddress.IPv4Network("192.168.123.0/24"))
    assert off_subnet.status == FAIL and "192.168.123.222/24 dev lo" in off_subnet.fix
    (missing,) = check_interface("nosuchnic0", ipaddress.IPv4Network("192.168.123.0/24"))
    assert missing.status == FAIL and "lo" in missing.message
