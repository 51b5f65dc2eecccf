"""The supervisor's e-stop sources -> asap_deploy damps: the ``estop`` topic and ENTER on the
supervisor's terminal, against the simulated G1 (the wireless-remote combo is in
test_ros_e2e.py, pressed on the simulated G1's remote)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from asap_ros.sim.process import dying_with_this_process
from asap_ros.testing.ros_system import ROOT, started_system


@pytest.fixture(scope="module")
def system(dds_domain, tmp_path_factory):
    yield from started_system(dds_domain, tmp_path_factory.mktemp("estop_source_logs"))


@pytest.fixture(autouse=True)
def each_test_starts_holding(system):
    system.ensure_holding()


def test_estop_topic_damps_the_robot(system):
    from std_msgs.msg import Empty

    publisher = system.ros.node.create_publisher(Empty, "/estop", 10)
    assert system.ros.spin_until(lambda: publisher.get_subscription_count() > 0, 10.0)
    publisher.publish(Empty())
    assert system.ros.wait_mode("DAMPING", 5.0)
    assert system.ros.spin_until(lambda: "e-stop from estop topic" in system.log_text("supervisor"), 2.0)
    assert system.ros.spin_until(
        lambda: "e-stop from estop topic held" in system.ros.latched.get("/asap_supervisor/state", ""), 2.0)


def test_enter_on_the_supervisor_terminal_damps_the_robot(system, tmp_path):
    """A second supervisor on a pseudo-terminal (as an operator runs it with ros2 run). ENTER
    comes as soon as the prompt shows, before the deploy node's service is discovered: the
    supervisor keeps forwarding until the deploy node acknowledges."""
    controller, terminal = pty.openpty()
    env = {**os.environ, "ROS_DOMAIN_ID": str(system.domain)}
    args = [sys.executable, "-m", "asap_ros.ros.supervisor_node", "--ros-args", "-r", "__node:=terminal_supervisor",
            "-p", f"dds_domain:={system.domain}"]
    process = subprocess.Popen(dying_with_this_process(args), env=env, cwd=ROOT, stdin=terminal, stdout=terminal, stderr=terminal)
    os.close(terminal)
    output = b""
    try:
        while b"press ENTER to e-stop" not in output:
            output += os.read(controller, 4096)
        os.write(controller, b"\n")
        assert system.ros.wait_mode("DAMPING", 10.0), output.decode(errors="replace")[-2000:]
    finally:
        process.terminate()
        process.wait(10)
        os.close(controller)


def test_an_estop_while_the_deploy_node_is_down_reaches_it_when_it_comes_back(system):
    """A deploy node started while the supervisor streams damping (its predecessor was killed,
    then an e-stop came) goes to DAMPING at once, without anyone asking again, and gets the
    robot back only through a supervisor reset."""
    system.kill_deploy()
    assert system.ros.spin_until(
        lambda: system.ros.latched.get("/asap_supervisor/state", "").startswith("TAKEOVER"), 10.0)
    ok, message = system.ros.trigger("/asap_supervisor/estop")
    assert ok, message
    system.start_deploy("DAMPING")
    system.wait_fault("e-stop: supervisor took over rt/lowcmd (deploy process")
    system.hand_back_and_stand()
