"""What every writer needs besides the episode: the robot model, the training model's joint axes,
the motion's policy facts and the action choice; and an atomic ``.npz`` write."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asap_ros.config.robot import load_robot_model
from asap_ros.core.errors import ConfigError
from asap_ros.core.robot import RobotModel
from asap_ros.export.actions import PolicyFacts
from asap_ros.tracking.kinematics import DRIVEN_MOTORS

RAW, EXECUTED = "raw", "executed"
ACTION_CHOICES = (RAW, EXECUTED)


@dataclass(frozen=True)
class ExportContext:
    robot: RobotModel
    joint_axes: np.ndarray
    """(23, 3) rotation axes of the driven joints (see :mod:`asap_ros.export.pose_aa`)."""
    action: str = RAW
    """What fills the ``action`` key: the actor's raw output, or the raw-equivalent of the
    target the robot executed (after the joint-limit clamp)."""
    policy: PolicyFacts | None = None
    """The exported motion's policy facts (set per episode by the exporter)."""

    def __post_init__(self) -> None:
        if self.action not in ACTION_CHOICES:
            raise ConfigError(None, "--action", f"must be one of {', '.join(ACTION_CHOICES)}", self.action)

    @property
    def facts(self) -> PolicyFacts:
        if self.policy is None:
            raise ValueError("ExportContext.policy is set per episode by the exporter")
        return self.policy

    def actions(self, raw_action: np.ndarray, q_target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per step: the ``action`` column (as chosen) and ``action_executed``, both (K, 23) float32."""
        executed = self.facts.executed_actions(q_target)
        return (np.asarray(raw_action, dtype=np.float32) if self.action == RAW else executed), executed

    @property
    def driven_motors(self) -> np.ndarray:
        return DRIVEN_MOTORS

    @property
    def driven_names(self) -> list[str]:
        return [self.robot.joint_names[i] for i in DRIVEN_MOTORS]


def load_context(robot_path: str | Path | None = None, model_path: str | Path | None = None) -> ExportContext:
    """Robot model (default ``config/g1_29dof.yaml``) and joint axes of the training model."""
    from asap_ros.export.pose_aa import driven_joint_axes

    return ExportContext(robot=load_robot_model(robot_path), joint_axes=driven_joint_axes(model_path))


def write_npz(arrays: dict[str, np.ndarray], stem: Path, suffix: str) -> Path:
    """``<stem><suffix>`` written atomically (temporary file, then rename), uncompressed; loads
    with ``np.load(path)``, no pickle needed."""
    path = stem.with_name(stem.name + suffix)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, path)
    return path
