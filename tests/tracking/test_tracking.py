"""RunTrace and evaluate_tracking against ASAP's kick clip (real MuJoCo forward kinematics)."""

from __future__ import annotations

import numpy as np
import pytest

from asap_ros.config.clip import load_clip
from asap_ros.config.robot import load_robot_model
from asap_ros.core.policy import PolicyOutput
from asap_ros.core.quaternion import quat_from_yaw, quat_multiply
from asap_ros.core.state_machine import Mode
from asap_ros.tracking.evaluation import FALL_HEIGHT_M, BodyPose, RunTrace, evaluate_tracking
from asap_ros.tracking.kinematics import DRIVEN_MOTORS, sample_clip

KICK = "motions/0-motions_raw_tairantestbed_smpl_video_kick_level1_filter_amass.pkl"
DT = 0.02


@pytest.fixture(scope="module")
def clip(assets):
    return load_clip(assets / KICK)


@pytest.fixture(scope="module")
def joint_names():
    return load_robot_model().joint_names


def policy_step(tick: int, phase: float, done: bool = False) -> PolicyOutput:
    return PolicyOutput(tick, phase, np.zeros(380, np.float32), np.zeros(23, np.float32), np.zeros(29), done)


def clip_trace(clip, steps: int, yaw: float = 0.0, shift=(0.0, 0.0, 0.0), missing=()) -> RunTrace:
    """A trace whose robot follows the clip exactly, seen through a rigid planar move (and a lift)."""
    phases = (np.arange(steps) + 1) * DT / clip.duration_s
    reference = sample_clip(clip, phases * clip.duration_s)
    c, s = np.cos(yaw), np.sin(yaw)
    rotation = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    quats = quat_multiply(quat_from_yaw(yaw), reference.root_quat_wxyz)
    trace = RunTrace()
    trace.add(Mode.PREPARE, None, BodyPose(np.array([0.0, 0.0, 0.8]), np.array([1.0, 0, 0, 0]), np.zeros(29)))
    for k in range(steps):
        q = np.zeros(29)
        q[DRIVEN_MOTORS] = reference.dof[k]
        pose = None if k in missing else BodyPose(rotation @ reference.root_pos[k] + shift, quats[k], q)
        trace.add(Mode.TRACKING, policy_step(k, phases[k], done=k == steps - 1), pose)
    return trace


def test_following_the_clip_exactly_gives_zero_errors(clip, joint_names):
    result = evaluate_tracking(clip_trace(clip, 150), clip, joint_names)
    report = result.report
    assert report.frames == 149  # the first frame is excluded
    for value in (report.g_mpjpe_mm, report.mpjpe_mm, report.vel_mm_per_frame, report.acc_mm_per_frame2):
        assert value == pytest.approx(0.0, abs=1e-6)
    assert report.success and result.completed and result.missing_steps == 0 and result.actor_steps == 150
    assert max(report.joint_rmse_rad.values()) == pytest.approx(0.0, abs=1e-9)
    assert set(report.joint_rmse_rad) == {joint_names[i] for i in DRIVEN_MOTORS}


def test_a_planar_move_is_aligned_away_but_a_lift_is_not(clip, joint_names):
    result = evaluate_tracking(clip_trace(clip, 100, yaw=1.2, shift=(3.0, -2.0, 0.05)), clip, joint_names)
    report = result.report
    assert result.heading_offset_rad == pytest.approx(1.2, abs=1e-9)
    assert report.g_mpjpe_mm == pytest.approx(50.0, abs=1e-6)  # every keypoint 5 cm too high
    assert report.mpjpe_mm == pytest.approx(0.0, abs=1e-6)  # ... but not relative to the pelvis
    assert report.vel_mm_per_frame == pytest.approx(0.0, abs=1e-6)


def test_a_lagging_robot_has_velocity_and_position_errors(clip, joint_names):
    trace = clip_trace(clip, 100)
    trace.phases = [p if np.isnan(p) else p - 5 * DT / clip.duration_s for p in trace.phases]  # robot 5 steps behind
    report = evaluate_tracking(trace, clip, joint_names).report
    assert report.mpjpe_mm > 5.0 and report.vel_mm_per_frame > 0.5 and report.acc_mm_per_frame2 > 0.0


def test_missing_ground_truth_is_counted_and_not_evaluated(clip, joint_names):
    result = evaluate_tracking(clip_trace(clip, 60, missing={10, 11, 30}), clip, joint_names)
    assert result.actor_steps == 60 and result.missing_steps == 3 and result.report.frames == 56


def test_too_few_actor_steps_give_no_metrics(clip, joint_names):
    assert evaluate_tracking(clip_trace(clip, 3), clip, joint_names) is None
    assert evaluate_tracking(RunTrace(), clip, joint_names) is None


def test_unfinished_motion_is_not_completed(clip, joint_names):
    trace = clip_trace(clip, 50)
    trace.motion_done = False
    assert not evaluate_tracking(trace, clip, joint_names).completed


def test_fall_and_lowest_pelvis(clip):
    trace = clip_trace(clip, 20)
    assert not trace.fell() and trace.min_pelvis_height() > FALL_HEIGHT_M
    trace.add(Mode.DAMPING, None, BodyPose(np.array([0.0, 0.0, 0.2]), np.array([1.0, 0, 0, 0]), np.zeros(29)))
    trace.add(Mode.DAMPING, None, None)
    assert trace.fell() and trace.min_pelvis_height() == pytest.approx(0.2)
    assert trace.missing_poses == 1
    assert trace.qpos().shape == (len(trace) - 1, 7 + 29)


def test_the_motion_spans_the_ticks_of_the_tracking_steps_states():
    pose = BodyPose(np.array([0.0, 0.0, 0.8]), np.array([1.0, 0, 0, 0]), np.zeros(29))
    trace = RunTrace()
    trace.add(Mode.PREPARE, None, pose, 1000)
    assert trace.motion_ticks() is None
    trace.add(Mode.TRACKING, policy_step(0, 0.1), None)  # a step without a state has no tick
    for k in range(1, 5):
        trace.add(Mode.TRACKING, policy_step(k, 0.1 * (k + 1)), pose, 1020 + 20 * k)
    trace.add(Mode.DAMPING, None, pose, 1200)
    assert trace.motion_ticks() == (1040, 1100)
    assert trace.state_ticks == [1000, -1, 1040, 1060, 1080, 1100, 1200]
