"""The supervisor's e-stop sources -> asap_deploy damps: wireless remote combo, the ``estop``
topic, and ENTER on the supervisor's terminal.

TEST DOUBLE: the simulator has no way yet to set ``LowState.wireless_remote``, so this test
stands in for the G1 hardware (and its remote) with a static upright robot that publishes
CRC-valid LowStates on rt/lowstate; deploy and supervisor are the real processes.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from asap_ros.remote import RemoteState, encode_remote, parse_combo
from ros_e2e import ROOT, System


class StaticG1WithRemote:
    """TEST DOUBLE for the G1 + wireless remote: default pose, upright, 200 Hz, settable buttons."""

    def __init__(self) -> None:
        from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowState_

        from asap_ros.dds import RawWriter
        from asap_ros.g1 import LOWSTATE_LAYOUT
        from asap_ros.robot import load_robot_model

        self._writer = RawWriter("rt/lowstate", LowState_)
        self._record = np.zeros((), LOWSTATE_LAYOUT)
        self._record["mode_machine"] = 5
        self._record["imu_state"]["quaternion"] = [1.0, 0.0, 0.0, 0.0]
        self._record["motor_state"]["q"][:29] = load_robot_model().default_q
        self._record["motor_state"]["temperature"][:29] = 40
        self.buttons: frozenset[str] = frozenset()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from asap_ros.g1 import LOWSTATE_WIRE, record_crc

        tick = 0
        while not self._stop.wait(0.005):
            tick += 5
            self._record["tick"] = tick
            self._record["wireless_remote"] = np.frombuffer(encode_remote(RemoteState(self.buttons)), np.uint8)
            self._record["crc"] = record_crc(self._record)
            self._writer.write(LOWSTATE_WIRE.to_cdr(self._record))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2.0)
        self._writer.close()


@pytest.fixture(scope="module")
def system(dds_domain, tmp_path_factory):
    system = System(dds_domain, tmp_path_factory.mktemp("remote_logs"), sim=False)
    robot = StaticG1WithRemote()
    try:
        system.start()
        yield system, robot
    finally:
        system.close()
        robot.close()


def test_estop_combo_on_the_remote_damps_the_robot(system):
    system, robot = system
    robot.buttons = frozenset({"L2"})  # part of the combo: nothing happens
    time.sleep(0.3)
    system.ros.spin_until(lambda: False, 0.1)
    assert system.ros.latched["/asap_deploy/mode"] == "HOLD"

    pressed = time.time_ns()
    robot.buttons = parse_combo("L2+B")
    damping = system.lowcmd.wait_for(lambda s: s.damping, pressed, 5.0)
    assert damping is not None, "no damping LowCmd after the remote e-stop"
    print(f"\nremote combo -> first damping LowCmd: {(damping.stamp_ns - pressed) / 1e6:.1f} ms (pressed {pressed})")
    assert system.ros.wait_mode("DAMPING", 5.0)
    robot.buttons = frozenset()
    assert system.ros.latched["/asap_supervisor/state"] == "WATCHING"  # deploy obeyed: no takeover
    assert "wireless remote B+L2" in system.log("supervisor")


def test_estop_topic_damps_the_robot(system):
    system, _robot = system
    system.reset_and_stand()
    from std_msgs.msg import Empty

    publisher = system.ros.node.create_publisher(Empty, "/estop", 10)
    assert system.ros.spin_until(lambda: publisher.get_subscription_count() > 0, 10.0)
    publisher.publish(Empty())
    assert system.ros.wait_mode("DAMPING", 5.0)
    assert "e-stop from estop topic" in system.log("supervisor")


def test_enter_on_the_supervisor_terminal_damps_the_robot(system, tmp_path):
    """A second supervisor on a pseudo-terminal (as an operator runs it with ros2 run)."""
    system, _robot = system
    system.reset_and_stand()
    controller, terminal = pty.openpty()
    env = {**os.environ, "ROS_DOMAIN_ID": str(system.domain)}
    args = [sys.executable, "-m", "asap_ros.ros.supervisor_node", "--ros-args", "-r", "__node:=terminal_supervisor",
            "-p", f"dds_domain:={system.domain}"]
    process = subprocess.Popen(args, env=env, cwd=ROOT, stdin=terminal, stdout=terminal, stderr=terminal)
    os.close(terminal)
    output = b""
    try:
        while b"press ENTER to e-stop" not in output:
            output += os.read(controller, 4096)
        time.sleep(1.0)  # discovery of /asap_deploy/estop
        os.write(controller, b"\n")
        assert system.ros.wait_mode("DAMPING", 10.0), output.decode(errors="replace")[-2000:]
    finally:
        process.terminate()
        process.wait(10)
        os.close(controller)
