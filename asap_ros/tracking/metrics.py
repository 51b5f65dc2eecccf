"""ASAP's tracking metrics on keypoint trajectories (see docs/metrics.md).

Inputs are keypoint positions in metres, shape (T, K, 3), robot and reference sampled at the
same instants. Outputs are in millimetres (per frame for E_vel, per frame² for E_acc: not
divided by the frame time). The first frame is excluded: every metric is computed on frames
1..T-1, so differences start at (frame 2 − frame 1). Values are averaged over bodies and frames.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

MM = 1000.0
SUCCESS_THRESHOLD_M = 0.5
MIN_FRAMES = 4
"""Frames needed: the first is dropped and E_acc needs three more."""


def _evaluated(robot: np.ndarray, reference: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Validated float arrays without the first frame."""
    robot = np.asarray(robot, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    if robot.ndim != 3 or robot.shape[2] != 3 or robot.shape != reference.shape:
        raise ValueError(f"robot and reference must both be (T, K, 3), got {robot.shape} and {reference.shape}")
    if robot.shape[0] < MIN_FRAMES:
        raise ValueError(f"need at least {MIN_FRAMES} frames (the first is excluded), got {robot.shape[0]}")
    for name, array in (("robot", robot), ("reference", reference)):
        if not np.all(np.isfinite(array)):
            first = np.argwhere(~np.isfinite(array))[0, 0]
            raise ValueError(f"{name} keypoints have non-finite values (first at frame {first})")
    return robot[1:], reference[1:]


def body_distances(robot: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """World-frame distance per evaluated frame and body, metres, (T-1, K)."""
    robot, reference = _evaluated(robot, reference)
    return np.linalg.norm(robot - reference, axis=-1)


def root_relative_distances(robot: np.ndarray, reference: np.ndarray, root_index: int = 0) -> np.ndarray:
    """Distance after subtracting each side's root (pelvis) position, metres, (T-1, K)."""
    robot, reference = _evaluated(robot, reference)
    local_robot = robot - robot[:, root_index : root_index + 1]
    local_reference = reference - reference[:, root_index : root_index + 1]
    return np.linalg.norm(local_robot - local_reference, axis=-1)


def e_g_mpjpe(robot: np.ndarray, reference: np.ndarray) -> float:
    """E_g-mpjpe, mm: mean world-frame keypoint distance."""
    return float(body_distances(robot, reference).mean() * MM)


def e_mpjpe(robot: np.ndarray, reference: np.ndarray, root_index: int = 0) -> float:
    """E_mpjpe, mm: mean keypoint distance relative to the pelvis."""
    return float(root_relative_distances(robot, reference, root_index).mean() * MM)


def e_vel(robot: np.ndarray, reference: np.ndarray) -> float:
    """E_vel, mm/frame: mean ‖Δp_robot − Δp_ref‖ with Δp = p[t] − p[t−1]."""
    robot, reference = _evaluated(robot, reference)
    return float(np.linalg.norm(np.diff(robot, axis=0) - np.diff(reference, axis=0), axis=-1).mean() * MM)


def e_acc(robot: np.ndarray, reference: np.ndarray) -> float:
    """E_acc, mm/frame²: mean ‖(p[t−2] − 2p[t−1] + p[t])_robot − (…)_ref‖."""
    robot, reference = _evaluated(robot, reference)
    return float(np.linalg.norm(np.diff(robot, n=2, axis=0) - np.diff(reference, n=2, axis=0), axis=-1).mean() * MM)


def mean_body_distance(robot: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Mean world-frame keypoint distance per evaluated frame, metres, (T-1,)."""
    return body_distances(robot, reference).mean(axis=1)


def first_failure(robot: np.ndarray, reference: np.ndarray, threshold_m: float = SUCCESS_THRESHOLD_M) -> int | None:
    """First frame index (in the input's numbering) whose mean body distance exceeds the threshold."""
    return _first_exceeding(mean_body_distance(robot, reference), threshold_m)


def _first_exceeding(per_frame: np.ndarray, threshold_m: float) -> int | None:
    exceeded = np.flatnonzero(per_frame > threshold_m)
    return int(exceeded[0]) + 1 if exceeded.size else None


def joint_rmse(robot_dof: np.ndarray, reference_dof: np.ndarray) -> np.ndarray:
    """Per-joint angle RMSE over frames 1..T-1, radians, (J,)."""
    robot_dof = np.asarray(robot_dof, dtype=np.float64)
    reference_dof = np.asarray(reference_dof, dtype=np.float64)
    if robot_dof.ndim != 2 or robot_dof.shape != reference_dof.shape or robot_dof.shape[0] < 2:
        raise ValueError(f"joint arrays must both be (T>=2, J), got {robot_dof.shape} and {reference_dof.shape}")
    error = robot_dof[1:] - reference_dof[1:]
    if not np.all(np.isfinite(error)):
        raise ValueError("joint arrays have non-finite values")
    return np.sqrt(np.mean(error**2, axis=0))


@dataclass(frozen=True)
class TrackingReport:
    """Metrics of one tracked motion."""

    frames: int
    """Frames evaluated (input frames minus the excluded first)."""
    g_mpjpe_mm: float
    mpjpe_mm: float
    vel_mm_per_frame: float
    acc_mm_per_frame2: float
    success: bool
    max_mean_body_distance_m: float
    first_failure_frame: int | None
    per_body_g_mpjpe_mm: dict[str, float]
    per_body_mpjpe_mm: dict[str, float]
    joint_rmse_rad: dict[str, float]
    """Empty when no joint angles were given."""

    def to_dict(self) -> dict:
        """Plain JSON/YAML-serialisable dict."""
        return asdict(self)


def tracking_report(
    robot: np.ndarray,
    reference: np.ndarray,
    body_names: Sequence[str],
    root_index: int = 0,
    robot_dof: np.ndarray | None = None,
    reference_dof: np.ndarray | None = None,
    joint_names: Sequence[str] | None = None,
    success_threshold_m: float = SUCCESS_THRESHOLD_M,
) -> TrackingReport:
    """All metrics of one motion; joint RMSE when both joint arrays and their names are given."""
    global_dist = body_distances(robot, reference)
    local_dist = root_relative_distances(robot, reference, root_index)
    if len(body_names) != global_dist.shape[1]:
        raise ValueError(f"{len(body_names)} body names for {global_dist.shape[1]} keypoints")
    joints: dict[str, float] = {}
    if robot_dof is not None or reference_dof is not None:
        if robot_dof is None or reference_dof is None or joint_names is None:
            raise ValueError("joint RMSE needs robot_dof, reference_dof and joint_names")
        rmse = joint_rmse(robot_dof, reference_dof)
        if len(joint_names) != rmse.size:
            raise ValueError(f"{len(joint_names)} joint names for {rmse.size} joints")
        joints = {name: float(v) for name, v in zip(joint_names, rmse)}
    per_frame = global_dist.mean(axis=1)
    failure = _first_exceeding(per_frame, success_threshold_m)
    return TrackingReport(
        frames=int(global_dist.shape[0]),
        g_mpjpe_mm=float(global_dist.mean() * MM),
        mpjpe_mm=float(local_dist.mean() * MM),
        vel_mm_per_frame=e_vel(robot, reference),
        acc_mm_per_frame2=e_acc(robot, reference),
        success=failure is None,
        max_mean_body_distance_m=float(per_frame.max()),
        first_failure_frame=failure,
        per_body_g_mpjpe_mm={name: float(v * MM) for name, v in zip(body_names, global_dist.mean(axis=0))},
        per_body_mpjpe_mm={name: float(v * MM) for name, v in zip(body_names, local_dist.mean(axis=0))},
        joint_rmse_rad=joints,
    )
