"""Keypoint FK on ASAP's G1 model, clip resampling and start alignment."""

from __future__ import annotations

import numpy as np
import pytest

from asap_ros.config.clip import MotionClip, load_clip
from asap_ros.core.errors import AssetError
from asap_ros.core.quaternion import quat_from_yaw, quat_multiply, quat_rotate, quat_slerp, quat_to_rotvec, yaw_of
from asap_ros.tracking.kinematics import (
    DRIVEN_MOTORS,
    KEYPOINT_NAMES,
    KeypointModel,
    align_start,
    control_step_times,
    reference_at_steps,
    sample_clip,
)

KICK = "motions/0-motions_raw_tairantestbed_smpl_video_kick_level1_filter_amass.pkl"
IDENTITY = np.array([[1.0, 0.0, 0.0, 0.0]])


@pytest.fixture(scope="module")
def model(assets) -> KeypointModel:
    return KeypointModel()


def kp(model: KeypointModel, name: str) -> int:
    return KEYPOINT_NAMES.index(name)


def single(model: KeypointModel, root=(0.0, 0.0, 0.0), quat=IDENTITY, dof=None) -> np.ndarray:
    dof = np.zeros((1, 23)) if dof is None else np.asarray(dof, dtype=float).reshape(1, -1)
    return model.keypoints(np.array([root], dtype=float), np.asarray(quat, dtype=float).reshape(1, 4), dof)[0]


def test_keypoint_set_is_asaps_24_bodies_plus_hands_and_head(model):
    assert len(KEYPOINT_NAMES) == 27 and KEYPOINT_NAMES[0] == "pelvis"
    assert KEYPOINT_NAMES[-3:] == ("left_hand_link", "right_hand_link", "head_link")
    assert not any("wrist" in name for name in KEYPOINT_NAMES)


def test_zero_pose_matches_the_model_offsets(model):
    points = single(model, root=(1.0, 2.0, 0.8))
    np.testing.assert_allclose(points[0], [1.0, 2.0, 0.8])
    # left_hip_pitch_link sits at (0, 0.064452, -0.1027) in the pelvis frame (XML)
    np.testing.assert_allclose(points[kp(model, "left_hip_pitch_link")], [1.0, 2.064452, 0.6973], atol=1e-9)
    # head: 0.42 m up the torso z axis; the torso is not rotated at zero waist angles
    head, torso = points[kp(model, "head_link")], points[kp(model, "torso_link")]
    np.testing.assert_allclose(head - torso, [0, 0, 0.42], atol=1e-9)


def test_hand_offset_turns_with_the_elbow(model):
    straight = single(model)
    dof = np.zeros(23)
    dof[18] = np.pi / 2  # left elbow (motor 18), axis y: the forearm x axis turns to -z
    bent = single(model, dof=dof)
    hand, elbow = kp(model, "left_hand_link"), kp(model, "left_elbow_link")
    np.testing.assert_allclose(straight[hand] - straight[elbow], [0.25, 0.0, 0.0], atol=2e-3)
    np.testing.assert_allclose(bent[hand] - bent[elbow], [0.0, 0.0, -0.25], atol=2e-3)
    np.testing.assert_allclose(bent[elbow], straight[elbow], atol=1e-12)  # the elbow joint moves only the forearm
    untouched = kp(model, "right_hand_link")
    np.testing.assert_allclose(bent[untouched], straight[untouched], atol=1e-12)


def test_root_motion_moves_every_keypoint_rigidly(model):
    rng = np.random.default_rng(1)
    dof = rng.uniform(-0.4, 0.4, (1, 23))
    quat = quat_multiply(quat_from_yaw(0.7), np.array([np.cos(0.2), np.sin(0.2), 0.0, 0.0]))
    at_origin = single(model, dof=dof)
    moved = single(model, root=(0.3, -1.2, 0.9), quat=quat, dof=dof)
    np.testing.assert_allclose(moved, quat_rotate(quat, at_origin) + [0.3, -1.2, 0.9], atol=1e-9)


def test_motor_order_input_ignores_wrists(model):
    rng = np.random.default_rng(2)
    dof = rng.uniform(-0.4, 0.4, (5, 23))
    q29 = rng.uniform(-1.0, 1.0, (5, 29))  # wrists get arbitrary angles
    q29[:, DRIVEN_MOTORS] = dof
    root, quat = np.tile([0.0, 0.0, 0.8], (5, 1)), np.tile(IDENTITY, (5, 1))
    np.testing.assert_array_equal(model.keypoints(root, quat, q29), model.keypoints(root, quat, dof))


@pytest.mark.parametrize(
    "root, quat, dof, message",
    [
        (np.zeros((2, 3)), np.tile(IDENTITY, (3, 1)), np.zeros((2, 23)), "same T"),
        (np.zeros((2, 3)), np.tile(IDENTITY, (2, 1)), np.zeros((2, 22)), "(T, 23) or (T, 29)"),
        (np.zeros((2, 3)), np.array([[1, 0, 0, 0], [2, 0, 0, 0]]), np.zeros((2, 23)), "frame 1 is not a unit"),
        (np.array([[0, 0, np.nan], [0, 0, 0]]), np.tile(IDENTITY, (2, 1)), np.zeros((2, 23)), "root_pos has non-fin"),
    ],
)
def test_bad_inputs_are_refused(model, root, quat, dof, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        model.keypoints(root, quat, dof)


def test_models_other_than_asaps_23_dof_robot_are_refused(assets, tmp_path):
    with pytest.raises(AssetError, match="expected one free root joint and 23 hinge joints.*29 hinge"):
        KeypointModel(assets / "robots/g1/scene_29dof.xml")  # wrists are joints there
    with pytest.raises(AssetError, match="cannot load MuJoCo model .*missing.xml"):
        KeypointModel(tmp_path / "missing.xml")


def test_shipped_clip_stands_upright_on_its_feet(model, assets):
    """Checks the clip conventions (x, y, z, w root quaternion, dof order) end to end."""
    clip = load_clip(assets / KICK)
    points = model.clip_keypoints(clip)
    assert points.shape == (clip.num_frames, 27, 3)
    feet_z = points[:, [kp(model, "left_ankle_roll_link"), kp(model, "right_ankle_roll_link")], 2]
    support_z = feet_z.min(axis=1)  # the lower foot carries the robot in every frame
    assert support_z.min() > 0.0 and support_z.max() < 0.15
    assert np.all(points[:, kp(model, "head_link"), 2] > points[:, 0, 2] + 0.3)
    np.testing.assert_allclose(points[:, 0], clip.root_pos, atol=1e-12)


# -- resampling --------------------------------------------------------------------------


def toy_clip() -> MotionClip:
    """3 frames at 10 fps: x moves 0 → 1 → 3, yaw 0 → 90° → 90°, dof[0] 0 → 1 → 2."""
    yaw = np.array([0.0, np.pi / 2, np.pi / 2])
    quat_wxyz = quat_from_yaw(yaw)
    dof = np.zeros((3, 23))
    dof[:, 0] = [0.0, 1.0, 2.0]
    return MotionClip(
        name="toy",
        fps=10.0,
        root_pos=np.array([[0.0, 0, 0.8], [1.0, 0, 0.8], [3.0, 0, 0.8]]),
        root_quat_xyzw=quat_wxyz[:, [1, 2, 3, 0]],
        dof=dof,
    )


def test_control_step_k_tracks_clip_time_k_plus_one_steps():
    np.testing.assert_allclose(control_step_times(3, dt=0.02, start_s=0.5), [0.52, 0.54, 0.56])


def test_sampling_interpolates_and_slerps():
    ref = sample_clip(toy_clip(), np.array([0.0, 0.05, 0.1, 0.15]))
    np.testing.assert_allclose(ref.root_pos[:, 0], [0.0, 0.5, 1.0, 2.0])
    np.testing.assert_allclose(ref.dof[:, 0], [0.0, 0.5, 1.0, 1.5])
    np.testing.assert_allclose(yaw_of(ref.root_quat_wxyz), [0.0, np.pi / 4, np.pi / 2, np.pi / 2], atol=1e-12)


def test_sampling_holds_the_last_frame_past_the_end():
    clip = toy_clip()
    ref = reference_at_steps(clip, num_steps=12, dt=0.02)  # last step at 0.24 s > duration 0.2 s
    np.testing.assert_allclose(ref.root_pos[-3:, 0], [3.0, 3.0, 3.0])
    np.testing.assert_allclose(ref.times_s[0], 0.02)
    np.testing.assert_allclose(ref.root_pos[0, 0], 0.2)  # 0.02 s = 0.2 of the first 0.1 s interval


def test_slerp_and_rotvec():
    a, b = quat_from_yaw(0.0), quat_from_yaw(1.0)
    np.testing.assert_allclose(quat_slerp(a, b, 0.25), quat_from_yaw(0.25), atol=1e-12)
    np.testing.assert_allclose(quat_slerp(a, -b, 0.5), quat_from_yaw(0.5), atol=1e-12)  # shortest path
    np.testing.assert_allclose(quat_to_rotvec(quat_from_yaw(-0.3)), [0, 0, -0.3], atol=1e-12)


# -- start alignment ---------------------------------------------------------------------


def test_alignment_puts_reference_start_on_the_robot(model):
    ref_quat = quat_multiply(quat_from_yaw(2.5), np.array([np.cos(0.1), 0.0, np.sin(0.1), 0.0]))
    robot_quat = quat_from_yaw(-0.4)
    align = align_start(np.array([5.0, -3.0, 0.9]), ref_quat, np.array([0.2, 0.1, 0.75]), robot_quat)
    pos, quat = align.apply_pose(np.array([[5.0, -3.0, 0.9], [6.0, -3.0, 1.0]]), np.stack([ref_quat, ref_quat]))
    np.testing.assert_allclose(pos[0], [0.2, 0.1, 0.9], atol=1e-12)  # x, y moved; z untouched
    np.testing.assert_allclose(yaw_of(quat[0]), -0.4, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(pos[1] - pos[0]), np.linalg.norm([1.0, 0.0, 0.1]), atol=1e-12)
    np.testing.assert_allclose(pos[1] - pos[0], [np.cos(-0.4 - 2.5), np.sin(-0.4 - 2.5), 0.1], atol=1e-12)
    # aligning keypoints equals computing them from the aligned root
    dof = np.random.default_rng(3).uniform(-0.3, 0.3, (1, 23))
    raw = single(model, root=(5.0, -3.0, 0.9), quat=ref_quat, dof=dof)
    from_aligned_root = single(model, root=pos[0], quat=quat[0], dof=dof)
    np.testing.assert_allclose(align.apply_points(raw), from_aligned_root, atol=1e-9)
