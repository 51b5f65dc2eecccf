"""Body keypoints of the G1 by MuJoCo forward kinematics, as ASAP's tracking metrics use them.

Model: ``robots/g1/g1_29dof_anneal_23dof.xml`` from ASAP's assets, the robot ASAP's 23-DoF
actors were trained on: its 23 hinge joints are exactly the driven motors (0-18, 22-25) in
the clip's ``dof`` order and its wrist links are rigid. ``scene_29dof.xml`` (the sim-to-sim
model) has the same link geometry; with wrists at 0 both give identical body positions.

Keypoints (27), in ASAP's order: the 24 rigid bodies of the training robot (pelvis, legs,
waist, torso, arms up to the elbow; the fixed wrist links are part of the elbow body there),
then ASAP's ``extend_config`` points of ``g1_29dof_anneal_23dof``: ``left_hand_link`` /
``right_hand_link`` 0.25 m along the elbow link's x axis and ``head_link`` 0.42 m along the
torso link's z axis. Wrist motor angles therefore do not move any keypoint.

Quaternions here are **w, x, y, z** (MuJoCo's order); clips store x, y, z, w.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from asap_ros.config.assets import asset_path
from asap_ros.core.errors import AssetError
from asap_ros.core.quaternion import quat_from_yaw, quat_multiply, quat_slerp, xyzw_to_wxyz, yaw_of

if TYPE_CHECKING:
    from asap_ros.config.clip import MotionClip

MODEL_ASSET = "robots/g1/g1_29dof_anneal_23dof.xml"
NUM_DRIVEN = 23
DRIVEN_MOTORS = np.array([*range(19), 22, 23, 24, 25])
"""G1 motor indices of ASAP's 23 driven joints, in clip ``dof`` order."""

RIGID_BODIES: tuple[str, ...] = (
    "pelvis",
    "left_hip_pitch_link", "left_hip_roll_link", "left_hip_yaw_link",
    "left_knee_link", "left_ankle_pitch_link", "left_ankle_roll_link",
    "right_hip_pitch_link", "right_hip_roll_link", "right_hip_yaw_link",
    "right_knee_link", "right_ankle_pitch_link", "right_ankle_roll_link",
    "waist_yaw_link", "waist_roll_link", "torso_link",
    "left_shoulder_pitch_link", "left_shoulder_roll_link", "left_shoulder_yaw_link", "left_elbow_link",
    "right_shoulder_pitch_link", "right_shoulder_roll_link", "right_shoulder_yaw_link", "right_elbow_link",
)  # fmt: skip


@dataclass(frozen=True)
class ExtendedKeypoint:
    """A point rigidly attached to a body (ASAP ``extend_config`` entry)."""

    name: str
    parent: str
    offset: tuple[float, float, float]
    """Position in the parent body's frame, metres."""


EXTENDED_KEYPOINTS: tuple[ExtendedKeypoint, ...] = (
    ExtendedKeypoint("left_hand_link", "left_elbow_link", (0.25, 0.0, 0.0)),
    ExtendedKeypoint("right_hand_link", "right_elbow_link", (0.25, 0.0, 0.0)),
    ExtendedKeypoint("head_link", "torso_link", (0.0, 0.0, 0.42)),
)
KEYPOINT_NAMES: tuple[str, ...] = RIGID_BODIES + tuple(p.name for p in EXTENDED_KEYPOINTS)
ROOT_INDEX = 0
"""Index of the pelvis among the keypoints (subtracted for E_mpjpe)."""


# -- forward kinematics -----------------------------------------------------------------


class KeypointModel:
    """World positions of the 27 metric keypoints from root pose and joint angles."""

    names: tuple[str, ...] = KEYPOINT_NAMES
    root_index: int = ROOT_INDEX

    def __init__(self, model_path: str | Path | None = None):
        import mujoco  # heavy import kept out of module import

        self._mujoco = mujoco
        self.model_path = Path(model_path) if model_path is not None else asset_path(MODEL_ASSET)
        try:
            self.model = mujoco.MjModel.from_xml_path(str(self.model_path))
        except ValueError as exc:
            raise AssetError(f"cannot load MuJoCo model {self.model_path}: {exc}") from exc
        self.data = mujoco.MjData(self.model)
        self._check_model()
        self._rigid_ids = np.array([self.model.body(name).id for name in RIGID_BODIES])
        self._parent_keypoints = [RIGID_BODIES.index(p.parent) for p in EXTENDED_KEYPOINTS]
        self._parent_ids = self._rigid_ids[self._parent_keypoints]
        self._offsets = np.array([p.offset for p in EXTENDED_KEYPOINTS])

    def _check_model(self) -> None:
        m, mujoco = self.model, self._mujoco
        hinges = [i for i in range(m.njnt) if m.jnt_type[i] == mujoco.mjtJoint.mjJNT_HINGE]
        free = [i for i in range(m.njnt) if m.jnt_type[i] == mujoco.mjtJoint.mjJNT_FREE]
        in_order = len(hinges) == NUM_DRIVEN and list(m.jnt_qposadr[hinges]) == list(range(7, 7 + NUM_DRIVEN))
        if len(free) != 1 or m.jnt_qposadr[free[0]] != 0 or not in_order or m.nq != 7 + NUM_DRIVEN:
            raise AssetError(
                f"{self.model_path}: expected one free root joint and {NUM_DRIVEN} hinge joints "
                f"(ASAP's 23-DoF G1), got {len(free)} free and {len(hinges)} hinge joints"
            )
        missing = [n for n in RIGID_BODIES if mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, n) < 0]
        if missing:
            raise AssetError(f"{self.model_path}: bodies missing: {', '.join(missing)}")

    def keypoints(self, root_pos: np.ndarray, root_quat_wxyz: np.ndarray, joint_pos: np.ndarray) -> np.ndarray:
        """Keypoint positions (T, 27, 3) in metres.

        ``joint_pos`` is (T, 23) in clip ``dof`` order or (T, 29) in G1 motor order (the
        wrist motors are ignored: the training robot's wrists are rigid).
        """
        root_pos, root_quat, dof = self._checked_inputs(root_pos, root_quat_wxyz, joint_pos)
        frames = root_pos.shape[0]
        rigid = np.empty((frames, len(RIGID_BODIES), 3))
        parent_rot = np.empty((frames, len(EXTENDED_KEYPOINTS), 3, 3))
        qpos = np.concatenate([root_pos, root_quat, dof], axis=1)
        model, data, kinematics = self.model, self.data, self._mujoco.mj_kinematics
        for t in range(frames):  # MuJoCo's FK works on one MjData at a time
            data.qpos[:] = qpos[t]
            kinematics(model, data)
            rigid[t] = data.xpos[self._rigid_ids]
            parent_rot[t] = data.xmat[self._parent_ids].reshape(-1, 3, 3)
        extended = rigid[:, self._parent_keypoints] + np.einsum("tkij,kj->tki", parent_rot, self._offsets)
        return np.concatenate([rigid, extended], axis=1)

    def clip_keypoints(self, clip: MotionClip) -> np.ndarray:
        """Keypoints (N, 27, 3) of every frame of a clip."""
        return self.keypoints(clip.root_pos, xyzw_to_wxyz(clip.root_quat_xyzw), clip.dof)

    def _checked_inputs(
        self, root_pos: np.ndarray, root_quat_wxyz: np.ndarray, joint_pos: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        root_pos = np.asarray(root_pos, dtype=np.float64)
        root_quat = np.asarray(root_quat_wxyz, dtype=np.float64)
        joints = np.asarray(joint_pos, dtype=np.float64)
        frames = root_pos.shape[0] if root_pos.ndim == 2 else -1
        if root_pos.shape != (frames, 3) or root_quat.shape != (frames, 4):
            raise ValueError(
                f"root_pos must be (T, 3) and root_quat_wxyz (T, 4) with the same T, "
                f"got {root_pos.shape} and {root_quat.shape}"
            )
        if joints.shape == (frames, 29):
            joints = joints[:, DRIVEN_MOTORS]
        elif joints.shape != (frames, NUM_DRIVEN):
            raise ValueError(f"joint_pos must be (T, 23) or (T, 29) with T={frames}, got {joints.shape}")
        for name, array in (("root_pos", root_pos), ("root_quat_wxyz", root_quat), ("joint_pos", joints)):
            if not np.all(np.isfinite(array)):
                first = np.argwhere(~np.isfinite(array))[0, 0]
                raise ValueError(f"{name} has non-finite values (first bad frame {first})")
        norms = np.linalg.norm(root_quat, axis=1)
        if np.any(np.abs(norms - 1.0) > 1e-3):
            bad = int(np.argmax(np.abs(norms - 1.0)))
            raise ValueError(f"root_quat_wxyz frame {bad} is not a unit quaternion (norm {norms[bad]:.4f})")
        return root_pos, root_quat / norms[:, None], joints


# -- reference motion at the control rate -----------------------------------------------


@dataclass(frozen=True)
class ReferenceMotion:
    """A clip sampled at given times (root pose in w, x, y, z)."""

    times_s: np.ndarray  # (S,)
    root_pos: np.ndarray  # (S, 3)
    root_quat_wxyz: np.ndarray  # (S, 4)
    dof: np.ndarray  # (S, 23)


def control_step_times(num_steps: int, dt: float = 0.02, start_s: float = 0.0) -> np.ndarray:
    """Clip time the actor tracks at control step k: ``(k + 1)·dt + start`` (phase-aligned)."""
    return (np.arange(num_steps) + 1.0) * dt + start_s


def sample_clip(clip: MotionClip, times_s: np.ndarray) -> ReferenceMotion:
    """Clip state at ``times_s``: positions and joints interpolated linearly, root rotation slerped.

    Times are clamped to [0, duration]: past the end the last frame holds, as ASAP's motion
    library clamps the motion time.
    """
    times = np.asarray(times_s, dtype=np.float64)
    if times.ndim != 1 or not np.all(np.isfinite(times)):
        raise ValueError(f"times_s must be a 1-D array of finite times, got shape {times.shape}")
    if clip.num_frames < 2:
        raise ValueError(f"clip {clip.name!r} has {clip.num_frames} frame(s); interpolation needs 2")
    position = np.clip(times, 0.0, clip.duration_s) * clip.fps
    lower = np.minimum(np.floor(position).astype(int), clip.num_frames - 2)
    fraction = position - lower
    upper = lower + 1
    f = fraction[:, None]
    quat = xyzw_to_wxyz(clip.root_quat_xyzw)
    return ReferenceMotion(
        times_s=times,
        root_pos=(1.0 - f) * clip.root_pos[lower] + f * clip.root_pos[upper],
        root_quat_wxyz=quat_slerp(quat[lower], quat[upper], fraction),
        dof=(1.0 - f) * clip.dof[lower] + f * clip.dof[upper],
    )


def reference_at_steps(clip: MotionClip, num_steps: int, dt: float = 0.02, start_s: float = 0.0) -> ReferenceMotion:
    """The reference the actor tracked at each of ``num_steps`` control steps."""
    return sample_clip(clip, control_step_times(num_steps, dt, start_s))


# -- start alignment ---------------------------------------------------------------------


@dataclass(frozen=True)
class PlanarAlignment:
    """Rotation about world z plus horizontal shift that puts the reference start on the robot.

    ``p' = Rz(yaw)·(p − pivot) + target`` for x and y; z is untouched; ``q' = qz(yaw) ⊗ q``.
    """

    yaw: float
    pivot_xy: np.ndarray  # (2,) reference start position
    target_xy: np.ndarray  # (2,) robot start position

    def apply_points(self, points: np.ndarray) -> np.ndarray:
        """Transform positions (..., 3)."""
        points = np.asarray(points, dtype=np.float64)
        c, s = np.cos(self.yaw), np.sin(self.yaw)
        dx = points[..., 0] - self.pivot_xy[0]
        dy = points[..., 1] - self.pivot_xy[1]
        out = points.copy()
        out[..., 0] = c * dx - s * dy + self.target_xy[0]
        out[..., 1] = s * dx + c * dy + self.target_xy[1]
        return out

    def apply_pose(self, root_pos: np.ndarray, root_quat_wxyz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Transform root positions (T, 3) and orientations (T, 4, w-first)."""
        return self.apply_points(root_pos), quat_multiply(quat_from_yaw(self.yaw), root_quat_wxyz)


def align_start(
    ref_pos: np.ndarray, ref_quat_wxyz: np.ndarray, robot_pos: np.ndarray, robot_quat_wxyz: np.ndarray
) -> PlanarAlignment:
    """Alignment mapping the reference root at motion start (x, y, heading) onto the robot's."""
    yaw = float(yaw_of(np.asarray(robot_quat_wxyz)) - yaw_of(np.asarray(ref_quat_wxyz)))
    return PlanarAlignment(
        yaw=float(np.arctan2(np.sin(yaw), np.cos(yaw))),
        pivot_xy=np.asarray(ref_pos, dtype=np.float64)[:2].copy(),
        target_xy=np.asarray(robot_pos, dtype=np.float64)[:2].copy(),
    )
