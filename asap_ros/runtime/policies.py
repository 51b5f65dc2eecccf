"""Builds the control step from files: policy runners with their ONNX actors, and the
controller with the standing actor its config names."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from asap_ros.config.policy_spec import load_policy_spec
from asap_ros.config.robot import load_robot_model
from asap_ros.core.controller import Controller, ControllerConfig
from asap_ros.core.errors import ConfigError
from asap_ros.core.policy import PolicyRunner
from asap_ros.core.robot import RobotModel
from asap_ros.runtime.actor import OnnxActor

_ROS_NAME_TOKEN = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def load_policy_runner(
    path: str | Path, robot: RobotModel | None = None, assets_dir: str | Path | None = None
) -> PolicyRunner:
    """Load and check the spec, its actor and its clip."""
    robot = robot or load_robot_model()
    spec = load_policy_spec(path, robot, assets_dir)
    return PolicyRunner(spec, robot, OnnxActor(spec.actor_path, spec))


def load_policies(
    files: Sequence[Path], robot: RobotModel, assets_dir: str | Path | None, source: str
) -> dict[str, PolicyRunner]:
    """``{motion name: PolicyRunner}``; names must be unique ROS name tokens (they name services)."""
    policies: dict[str, PolicyRunner] = {}
    for path in files:
        runner = load_policy_runner(path, robot=robot, assets_dir=assets_dir)
        name = runner.spec.name
        if not _ROS_NAME_TOKEN.match(name):
            raise ConfigError(path, "name", "motion name must be a ROS name token ([A-Za-z][A-Za-z0-9_]*)", name)
        if name in policies:
            raise ConfigError(source, "policies", "two policy specs define the same motion", name)
        policies[name] = runner
    return policies


def build_controller(
    robot: RobotModel, policies: Mapping[str, PolicyRunner], config: ControllerConfig
) -> Controller:
    """The controller, with the standing actor of ``config.hold_policy`` loaded (if it names one)."""
    hold = load_policy_runner(config.hold_policy, robot) if config.hold_policy is not None else None
    return Controller(robot, policies, config, hold_policy=hold)
