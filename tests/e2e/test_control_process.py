"""asap_deploy's control loop runs in a process of its own without rclpy: what each process's end
does to the robot, with real nodes on the simulated G1 at the shipped lease and takeover."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from asap_ros.testing.ros_system import process_alive, simulator_system

SUPERVISOR = "/asap_supervisor/state"
MODE = "/asap_deploy/mode"
FAULT = "/asap_deploy/fault"
RCLPY_LIBRARIES = ("_rclpy_pybind11", "librcl.so")
"""Shared objects that rclpy maps into a process that imports it."""


@pytest.fixture(scope="module")
def system(dds_domain, tmp_path_factory):
    yield from simulator_system(dds_domain, tmp_path_factory.mktemp("control_process_logs"))


@pytest.fixture(autouse=True)
def fresh_nodes(system):
    system.restart_nodes()
    yield


def mapped(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


def test_the_control_process_writes_rt_lowcmd_and_maps_no_rclpy(system):
    """The writer of rt/lowcmd is the control process (the supervisor's beats name its pid) and no
    rclpy library is in its memory; the node's process has them (the check can fail)."""
    control = system.control_pid()
    assert not [lib for lib in RCLPY_LIBRARIES if lib in mapped(control)], f"rclpy in the control process {control}"
    assert all(lib in mapped(system.deploy.pid) for lib in RCLPY_LIBRARIES)
    assert f"control process pid {control}" in system.log_text("deploy")


def test_a_killed_node_damps_through_its_control_process_which_ends(system):
    """kill -9 of the node alone: its control process sees the link close, writes damping under its
    lease and ends; then the supervisor, whose lease the silence runs out, streams damping."""
    control = system.control_pid()
    writer = system.lowcmd.wait_for(lambda s: not s.damping, time.time_ns(), 5.0)
    assert writer is not None, "no rt/lowcmd from the standing robot"
    killed_at = time.time_ns()
    os.kill(system.deploy.pid, signal.SIGKILL)
    system.deploy.wait(10)
    damped = system.lowcmd.wait_for(lambda s: s.writer == writer.writer and s.damping, killed_at, 2.0)
    assert damped is not None, "the control process wrote no damping after its node died"
    deadline = time.monotonic() + 5.0
    while process_alive(control) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not process_alive(control), "the control process outlived its node"
    state = system.wait_latched(SUPERVISOR, "TAKEOVER", 5.0)
    takeover = system.lowcmd.wait_for(lambda s: s.writer != writer.writer, killed_at, 5.0)
    assert takeover is not None and takeover.damping, "the supervisor streams no damping"
    print(f"\nnode killed -> damping from its control process {(damped.stamp_ns - killed_at) / 1e6:.1f} ms; "
          f"supervisor: {state}")
    system.start_deploy("DAMPING")
    system.hand_back_and_stand()


def test_a_killed_control_process_latches_damping_in_the_node_and_the_supervisor_takes_over(system):
    """kill -9 of the control process alone: the node reads DAMPING with why, refuses Stand, and
    the supervisor takes over from the silent writer."""
    control = system.control_pid()
    writer = system.lowcmd.wait_for(lambda s: not s.damping, time.time_ns(), 5.0)
    assert writer is not None
    killed_at = time.time_ns()
    os.kill(control, signal.SIGKILL)
    fault = system.wait_latched(FAULT, "control process ended (exit code -9)", 5.0)
    assert system.ros.latched[MODE] == "DAMPING", system.ros.latched
    system.wait_latched(SUPERVISOR, "TAKEOVER", 5.0)
    takeover = system.lowcmd.wait_for(lambda s: s.writer != writer.writer, killed_at, 5.0)
    assert takeover is not None and takeover.damping
    assert system.lowcmd.wait_for(lambda s: s.writer == writer.writer, killed_at + 50_000_000, 0.5) is None, \
        "the killed control process's writer still writes"
    ok, message = system.ros.trigger("/asap_deploy/stand")
    assert not ok and "control process ended" in message, message
    ok, message = system.ros.trigger("/asap_deploy/estop")
    assert not ok and "control process ended" in message, message
    assert system.deploy.poll() is None, "the node ended with its control process"
    print(f"\n{fault}")
