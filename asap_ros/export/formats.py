"""What every writer needs besides the episode: the robot model and the training model's joint axes,
and an atomic ``.npz`` write."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asap_ros.config.robot import load_robot_model
from asap_ros.core.robot import RobotModel
from asap_ros.tracking.kinematics import DRIVEN_MOTORS

CONTROL_DT_S = 0.02


@dataclass(frozen=True)
class ExportContext:
    robot: RobotModel
    joint_axes: np.ndarray
    """(23, 3) rotation axes of the driven joints (see :mod:`asap_ros.export.pose_aa`)."""
    control_dt_s: float = CONTROL_DT_S

    @property
    def fps(self) -> int:
        """Control rate, Hz (the exported clip's frame rate)."""
        return int(round(1.0 / self.control_dt_s))

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
