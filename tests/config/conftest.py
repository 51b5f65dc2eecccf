"""Fixtures of the config tests: the package's robot model and ASAP's own deploy config."""

from __future__ import annotations

import pytest
import yaml

from asap_ros.config.robot import load_robot_model


@pytest.fixture(scope="module")
def robot():
    return load_robot_model()


@pytest.fixture(scope="module")
def deploy(assets):
    return yaml.safe_load((assets / "config" / "g1_29dof_hist.yaml").read_text())
