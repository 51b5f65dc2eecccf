"""What the simulated robot's body did during a run, and how well it tracked the clip.

:class:`RunTrace` collects one ground-truth body pose (pelvis position and orientation, 29
joint angles) per control step, with the controller's mode and, while TRACKING, the actor's
tick and phase. It is fed from the lock-step loop directly and from the real-time run's step
sink (the ground-truth sample with the tick of the LowState the step was built from).

:func:`evaluate_tracking` compares the TRACKING steps with the clip at the same phase (the
phase the actor saw, so clip time = phase x clip duration), after rotating and shifting the
clip in the ground plane so that its root starts where the robot's pelvis is at the first
tracked step (x, y, heading; heights are absolute). Keypoints come from MuJoCo forward
kinematics (:class:`~asap_ros.tracking.kinematics.KeypointModel`), metrics from :mod:`asap_ros.tracking.metrics`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from asap_ros.config.clip import MotionClip
from asap_ros.core.policy import PolicyOutput
from asap_ros.core.state import NUM_MOTORS
from asap_ros.core.state_machine import Mode
from asap_ros.tracking.kinematics import DRIVEN_MOTORS, KeypointModel, align_start, sample_clip
from asap_ros.tracking.metrics import MIN_FRAMES, TrackingReport, tracking_report

FALL_HEIGHT_M = 0.45
"""Pelvis below this height counts as a fall (the G1 stands at ~0.78 m; ASAP's clips stay above 0.7 m)."""


@dataclass(frozen=True)
class BodyPose:
    """Ground truth of the simulated robot at one instant."""

    pelvis_pos: np.ndarray
    pelvis_quat_wxyz: np.ndarray
    q: np.ndarray
    """[29] joint angles, G1 motor order."""


@dataclass
class RunTrace:
    """Per control step: mode, actor tick/phase (TRACKING) and the ground-truth body pose."""

    modes: list[Mode] = field(default_factory=list)
    ticks: list[int] = field(default_factory=list)
    """Actor tick, -1 when the actor did not run."""
    phases: list[float] = field(default_factory=list)
    poses: list[BodyPose | None] = field(default_factory=list)
    """``None``: no ground truth for that step (lost sample)."""
    state_ticks: list[int] = field(default_factory=list)
    """Tick (ms) of the LowState the step was built from, -1 when none."""
    motion_done: bool = False
    """The actor ran its last step (the phase reached the end of the clip)."""

    def add(self, mode: Mode, policy: PolicyOutput | None, pose: BodyPose | None, state_tick: int = -1) -> None:
        """Append one control step (``policy``: the actor's output if it ran in that step;
        ``state_tick``: the tick of the LowState it was built from)."""
        self.modes.append(mode)
        self.state_ticks.append(state_tick)
        self.ticks.append(policy.tick if policy is not None else -1)
        self.phases.append(policy.phase if policy is not None else np.nan)
        self.poses.append(pose)
        self.motion_done |= policy is not None and policy.done

    def __len__(self) -> int:
        return len(self.modes)

    def motion_ticks(self) -> tuple[int, int] | None:
        """LowState ticks (ms) of the first and last TRACKING step's state; ``None`` if none tracked."""
        ticks = [t for mode, t in zip(self.modes, self.state_ticks) if mode == Mode.TRACKING and t >= 0]
        return (ticks[0], ticks[-1]) if ticks else None

    @property
    def missing_poses(self) -> int:
        return sum(pose is None for pose in self.poses)

    def pelvis_heights(self) -> np.ndarray:
        return np.array([p.pelvis_pos[2] for p in self.poses if p is not None])

    def min_pelvis_height(self) -> float:
        heights = self.pelvis_heights()
        return float(heights.min()) if heights.size else float("nan")

    def fell(self, fall_height_m: float = FALL_HEIGHT_M) -> bool:
        return bool(np.any(self.pelvis_heights() < fall_height_m))

    def qpos(self) -> np.ndarray:
        """(S, 7 + 29) MuJoCo ``qpos`` of the simulator model per step with ground truth (for video)."""
        return np.array([np.concatenate([p.pelvis_pos, p.pelvis_quat_wxyz, p.q]) for p in self.poses if p is not None])

    def tracked_steps(self) -> tuple[np.ndarray, np.ndarray, list[BodyPose]]:
        """(ticks, phases, poses) of the actor steps that have ground truth, in step order."""
        rows = [(t, ph, p) for t, ph, p in zip(self.ticks, self.phases, self.poses) if t >= 0 and p is not None]
        return (
            np.array([r[0] for r in rows], dtype=np.int64),
            np.array([r[1] for r in rows], dtype=np.float64),
            [r[2] for r in rows],
        )


@dataclass(frozen=True)
class TrackingResult:
    """The metrics of one tracked motion and how many actor steps they cover."""

    report: TrackingReport
    actor_steps: int
    """Actor steps of the run (ticks 0..actor_steps-1)."""
    missing_steps: int
    """Actor steps without ground truth (not evaluated; E_vel/E_acc then span the gap)."""
    completed: bool
    """The actor ran to the end of the clip."""
    heading_offset_rad: float
    """Rotation about z applied to the clip to start on the robot's heading."""

    def to_dict(self) -> dict:
        return {
            **self.report.to_dict(),
            "actor_steps": self.actor_steps,
            "missing_steps": self.missing_steps,
            "completed": self.completed,
            "heading_offset_rad": self.heading_offset_rad,
        }


def evaluate_tracking(
    trace: RunTrace,
    clip: MotionClip,
    joint_names: tuple[str, ...],
    keypoints: KeypointModel | None = None,
) -> TrackingResult | None:
    """Tracking metrics of the run's actor steps against ``clip``; ``None`` if fewer than 4.

    ``joint_names`` are the 29 motor names (the 23 driven ones name the joint RMSE entries).
    """
    ticks, phases, poses = trace.tracked_steps()
    if len(ticks) < MIN_FRAMES:
        return None
    keypoints = keypoints or KeypointModel()
    robot_pos = np.array([p.pelvis_pos for p in poses])
    robot_quat = np.array([p.pelvis_quat_wxyz for p in poses])
    robot_q = np.array([p.q for p in poses])
    if robot_q.shape[1] != NUM_MOTORS:
        raise ValueError(f"ground-truth joint angles must have {NUM_MOTORS} entries, got {robot_q.shape[1]}")
    reference = sample_clip(clip, phases * clip.duration_s)
    alignment = align_start(reference.root_pos[0], reference.root_quat_wxyz[0], robot_pos[0], robot_quat[0])
    ref_pos, ref_quat = alignment.apply_pose(reference.root_pos, reference.root_quat_wxyz)
    report = tracking_report(
        keypoints.keypoints(robot_pos, robot_quat, robot_q),
        keypoints.keypoints(ref_pos, ref_quat, reference.dof),
        keypoints.names,
        keypoints.root_index,
        robot_dof=robot_q[:, DRIVEN_MOTORS],
        reference_dof=reference.dof,
        joint_names=[joint_names[i] for i in DRIVEN_MOTORS],
    )
    actor_steps = int(max(trace.ticks)) + 1
    return TrackingResult(
        report=report,
        actor_steps=actor_steps,
        missing_steps=actor_steps - len(ticks),
        completed=trace.motion_done,
        heading_offset_rad=float(alignment.yaw),
    )
