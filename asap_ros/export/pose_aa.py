"""ASAP's ``pose_aa``: root rotation vector, joint axis·angle per driven joint, 3 zero rows.

The joint axes are read from the model the actors were trained on
(``robots/g1/g1_29dof_anneal_23dof.xml``, see :mod:`asap_ros.tracking.kinematics`), in clip ``dof``
order; the layout reproduces the shipped clips' ``pose_aa`` exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from asap_ros.core.quaternion import quat_to_rotvec
from asap_ros.tracking.kinematics import NUM_DRIVEN, KeypointModel

EXTRA_ROWS = 3
"""Zero rows after the joints (ASAP's extended hand/head points carry no rotation)."""
POSE_AA_ROWS = 1 + NUM_DRIVEN + EXTRA_ROWS


def driven_joint_axes(model_path: str | Path | None = None) -> np.ndarray:
    """(23, 3) unit rotation axes of the training model's hinge joints, in clip ``dof`` order."""
    import mujoco

    model = KeypointModel(model_path).model  # checks: one free joint, then the 23 hinges in dof order
    hinges = np.flatnonzero(model.jnt_type == mujoco.mjtJoint.mjJNT_HINGE)
    return np.array(model.jnt_axis[hinges], dtype=np.float64)


def pose_aa(root_quat_wxyz: np.ndarray, dof: np.ndarray, joint_axes: np.ndarray) -> np.ndarray:
    """(T, 27, 3) axis-angle pose from root orientation (T, 4, w first) and joint angles (T, 23)."""
    root_quat_wxyz = np.asarray(root_quat_wxyz, dtype=np.float64)
    dof = np.asarray(dof, dtype=np.float64)
    frames = dof.shape[0]
    if root_quat_wxyz.shape != (frames, 4) or dof.shape != (frames, NUM_DRIVEN):
        raise ValueError(f"need (T, 4) root quaternions and (T, {NUM_DRIVEN}) joint angles, "
                         f"got {root_quat_wxyz.shape} and {dof.shape}")  # fmt: skip
    return np.concatenate(
        [
            quat_to_rotvec(root_quat_wxyz)[:, None, :],
            joint_axes[None, :, :] * dof[:, :, None],
            np.zeros((frames, EXTRA_ROWS, 3)),
        ],
        axis=1,
    )
