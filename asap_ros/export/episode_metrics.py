"""Tracking metrics of a recorded episode, computed exactly as the simulated run computes its own.

The recorded body (mocap pelvis pose and the robot's joint angles at each actor tick) goes
through :func:`asap_ros.tracking.evaluation.evaluate_tracking`, the function behind the sim summary:
same keypoints, same phase-aligned reference, same start alignment, same metrics.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

from asap_ros.config.clip import MotionClip
from asap_ros.core.policy import PolicyOutput
from asap_ros.core.state_machine import Mode
from asap_ros.export.align import MOCAP_FILTER_MS, AlignedEpisode, align_episode
from asap_ros.export.bag import SessionBag
from asap_ros.export.clips import resolve_clip
from asap_ros.recording import topics
from asap_ros.tracking.evaluation import BodyPose, RunTrace, TrackingResult, evaluate_tracking
from asap_ros.tracking.kinematics import KeypointModel


def episode_trace(aligned: AlignedEpisode) -> RunTrace:
    """One TRACKING step per actor tick, with the recorded body pose as the "ground truth"."""
    root_pos = aligned.require_root_position("tracking metrics (world-frame keypoints)")
    trace = RunTrace()
    done = aligned.episode.steps.done()
    for k in range(len(aligned)):
        step = PolicyOutput(
            tick=int(aligned.tick[k]),
            phase=float(aligned.phase[k]),
            obs=aligned.obs[k],
            raw_action=aligned.raw_action[k],
            q_target=aligned.q_target[k],
            done=bool(done[k]),
        )
        trace.add(Mode.TRACKING, step, BodyPose(root_pos[k], aligned.root_quat_wxyz[k], aligned.q[k]))
    return trace


def episode_tracking(
    aligned: AlignedEpisode, clip: MotionClip, joint_names: tuple[str, ...], keypoints: KeypointModel
) -> TrackingResult | None:
    """Metrics of one episode against ``clip`` (``None``: fewer than 4 actor steps)."""
    return evaluate_tracking(episode_trace(aligned), clip, joint_names, keypoints)


def bag_metrics(
    bag_path: str | Path,
    clip: str | Path | None = None,
    episodes: Sequence[int] | None = None,
    mocap_topic: str = topics.MOCAP_POSE,
    mocap_filter_ms: float = MOCAP_FILTER_MS,
) -> list[dict]:
    """Metrics of every episode of a bag, as JSON-ready dicts (``tracking`` null if < 4 steps)."""
    from asap_ros.config.clip import load_clip
    from asap_ros.config.robot import load_robot_model

    joint_names = load_robot_model().joint_names
    load_clip_once = functools.cache(load_clip)
    keypoints = KeypointModel()
    rows = []
    with SessionBag(bag_path, mocap_topic) as bag:
        session = bag.session_info()
        clip_of = functools.cache(lambda motion: resolve_clip(motion, session, bag.path, clip))
        for marker, episode in bag.iter_episodes(episodes):
            clip_path = clip_of(marker.motion)
            aligned = align_episode(episode, int(mocap_filter_ms * 1e6))
            result = episode_tracking(aligned, load_clip_once(clip_path), joint_names, keypoints)
            rows.append({
                "bag": str(bag.path), "episode": episode.index, "motion": episode.motion, "clip": str(clip_path),
                "outcome": episode.outcome, "cut_short": episode.cut_short, "estop": episode.estop,
                "actor_steps": len(aligned), "root_source": aligned.root_source, "sync": aligned.sync.to_dict(),
                "tracking": result.to_dict() if result is not None else None,
            })  # fmt: skip
    return rows
