"""Which ROS 2 distribution's rclpy this run imports: the one scripts/setup installed the venv for."""

from __future__ import annotations

import importlib.metadata
import os

import pytest

from asap_ros.ros import compat


def test_rclpy_is_the_distribution_the_venv_was_set_up_for(capsys: pytest.CaptureFixture[str]) -> None:
    wanted = compat.setup_distro() or os.environ.get("ASAP_ROS_DISTRO", "kilted")
    with capsys.disabled():  # the CI log shows which distribution each step ran
        print(f"\n{__name__}: {compat.describe()}; venv set up for {wanted}")
    assert compat.ros_distro() == wanted
    assert compat.rclpy_version() == importlib.metadata.version("ros-rclpy")
    assert compat.rclpy_version().split(".")[0] == {"jazzy": "7", "kilted": "9"}[wanted]
