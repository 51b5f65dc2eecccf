"""The contract's pure checks: rounding in a file, the motion start gate."""

from __future__ import annotations

import numpy as np
import pytest

from asap_ros.config.robot import load_robot_model
from asap_ros.core.actor_contract import START_POSE_BOUND_RAD, precision_problem, start_pose_problem


@pytest.mark.parametrize("text, fine", [("0.075", True), ("40.179", True), ("0.000", True), ("1", True),
                                        ("0.07", False), ("0.004", False), ("1.5e-2", False)])  # fmt: skip
def test_precision(text, fine):
    assert (precision_problem(text) is None) is fine


def test_start_gate_names_the_joints_off(tmp_path):
    robot = load_robot_model()
    joints, motors = robot.joint_names, np.arange(29)
    start = np.zeros(29)
    q = start.copy()
    q[3] = START_POSE_BOUND_RAD - 0.01
    assert start_pose_problem(q, start, joints, motors) is None
    q[3], q[18] = START_POSE_BOUND_RAD + 0.05, -0.9
    problem = start_pose_problem(q, start, joints, motors)
    assert problem is not None and problem.startswith("2 joint(s)")
    assert "left_knee_joint +0.750 rad" in problem and "left_elbow_joint -0.900 rad" in problem
