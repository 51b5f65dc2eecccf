"""The ghost: the tracked clip's pose at a policy step, placed where the robot started the run.

The clip time is the step's phase times the clip's duration (as the tracking metrics sample
it); its root is put on the robot's root at the run's first step (same x, y and heading, as
:func:`asap_ros.tracking.kinematics.align_start` does for the metrics).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

import numpy as np

from asap_ros.config.clip import MotionClip, load_clip
from asap_ros.core.state import NUM_MOTORS
from asap_ros.tracking.kinematics import DRIVEN_MOTORS, PlanarAlignment, align_start, sample_clip
from asap_ros.view.snapshot import BodyPose


def clips_of_policies(spec_files: Iterable[str | os.PathLike], assets_dir: str | None = None) -> dict[str, MotionClip]:
    """Motion name -> clip of each motion-tracking policy spec (standing actors have none)."""
    from asap_ros.config.policy_spec import load_policy_spec

    clips = {}
    for spec_file in spec_files:
        spec = load_policy_spec(spec_file, assets_dir=assets_dir)
        if spec.clip_path is not None:
            clips[spec.name] = load_clip(spec.clip_path)
    return clips


class ReferencePoser:
    """Clip poses for the episodes of a session, each aligned at the episode's first step."""

    def __init__(self, clips: Mapping[str, MotionClip]) -> None:
        self.clips = dict(clips)
        self._alignments: dict[tuple[int, str], PlanarAlignment] = {}

    def clip_pose(self, motion: str, phase: float) -> BodyPose | None:
        """The clip's own pose at ``phase`` (unaligned); ``None`` for an unknown motion."""
        clip = self.clips.get(motion)
        if clip is None:
            return None
        ref = sample_clip(clip, np.array([float(np.clip(phase, 0.0, 1.0)) * clip.duration_s]))
        q = np.zeros(NUM_MOTORS)
        q[DRIVEN_MOTORS] = ref.dof[0]
        return BodyPose(ref.root_pos[0], ref.root_quat_wxyz[0], q)

    def align(self, episode: int, motion: str, robot: BodyPose) -> None:
        """Put ``episode``'s clip start on ``robot`` (its pose at the episode's first step)."""
        start = self.clip_pose(motion, 0.0)
        if start is not None:
            self._alignments[(episode, motion)] = align_start(
                start.pelvis_pos, start.pelvis_quat_wxyz, robot.pelvis_pos, robot.pelvis_quat_wxyz)

    def aligned(self, episode: int, motion: str) -> bool:
        return (episode, motion) in self._alignments

    def pose(self, episode: int, motion: str, phase: float) -> BodyPose | None:
        """The ghost at ``phase`` of ``episode`` (unaligned until :meth:`align`); ``None`` if the
        motion has no clip here."""
        ref = self.clip_pose(motion, phase)
        alignment = self._alignments.get((episode, motion))
        if ref is None or alignment is None:
            return ref
        pos, quat = alignment.apply_pose(ref.pelvis_pos[None], ref.pelvis_quat_wxyz[None])
        return BodyPose(pos[0], quat[0], ref.q)
