"""ASAP tracking metrics: hand-computed cases, invariances, success and the report."""

from __future__ import annotations

import json

import numpy as np
import pytest

from asap_ros.tracking.metrics import (
    e_acc,
    e_g_mpjpe,
    e_mpjpe,
    e_vel,
    first_failure,
    joint_rmse,
    tracking_report,
)


def offsets_case() -> tuple[np.ndarray, np.ndarray]:
    """2 bodies, 4 frames; frame 0 is 1 m off (must be excluded), then constant offsets:
    body 0 by (3, 4, 0) mm (5 mm), body 1 by (0, 0, 10) mm."""
    reference = np.zeros((4, 2, 3))
    reference[:, 1] = [0.0, 0.0, 1.0]
    robot = reference.copy()
    robot[0] += 1.0
    robot[1:, 0] += [0.003, 0.004, 0.0]
    robot[1:, 1] += [0.0, 0.0, 0.010]
    return robot, reference


def test_position_errors_by_hand():
    robot, reference = offsets_case()
    assert e_g_mpjpe(robot, reference) == pytest.approx(7.5)  # (5 + 10) / 2
    # relative to body 0: body 1 is off by (-3, -4, 10) mm = sqrt(125); body 0 by 0
    assert e_mpjpe(robot, reference) == pytest.approx(np.sqrt(125.0) / 2)
    assert e_vel(robot, reference) == pytest.approx(0.0, abs=1e-12)  # frame 0's jump is excluded
    assert e_acc(robot, reference) == pytest.approx(0.0, abs=1e-12)


def test_velocity_and_acceleration_by_hand():
    """One body moving along x by 0, 1, 3, 6 mm in frames 1-4 (frame 0 far away, excluded)."""
    reference = np.zeros((5, 1, 3))
    robot = reference.copy()
    robot[:, 0, 0] = [9.0, 0.0, 0.001, 0.003, 0.006]
    assert e_vel(robot, reference) == pytest.approx(2.0)  # steps 1, 2, 3 mm
    assert e_acc(robot, reference) == pytest.approx(1.0)  # second differences 1, 1 mm
    assert e_g_mpjpe(robot, reference) == pytest.approx(2.5)  # 0, 1, 3, 6 mm


def test_identical_motions_score_zero():
    rng = np.random.default_rng(0)
    motion = rng.normal(size=(20, 27, 3))
    report = tracking_report(motion, motion.copy(), [f"b{i}" for i in range(27)])
    assert report.g_mpjpe_mm == report.mpjpe_mm == report.vel_mm_per_frame == report.acc_mm_per_frame2 == 0.0
    assert report.success and report.first_failure_frame is None


def test_translation_shifts_global_error_only():
    rng = np.random.default_rng(1)
    reference = rng.normal(size=(30, 27, 3))
    robot = reference + rng.normal(scale=0.02, size=reference.shape)
    shift = np.array([0.3, -0.4, 0.0])  # 500 mm
    base = [f(robot, reference) for f in (e_mpjpe, e_vel, e_acc)]
    shifted = [f(robot + shift, reference) for f in (e_mpjpe, e_vel, e_acc)]
    np.testing.assert_allclose(shifted, base, rtol=1e-12)
    assert e_g_mpjpe(reference + shift, reference) == pytest.approx(500.0)
    assert e_g_mpjpe(robot + shift, reference) > e_g_mpjpe(robot, reference) + 400.0


def test_success_fails_when_mean_body_distance_exceeds_half_a_metre():
    reference = np.zeros((6, 3, 3))
    robot = reference.copy()
    robot[0] += 5.0  # the excluded first frame never fails a motion
    robot[3, :2, 0] = 0.9  # mean over 3 bodies = 0.6 m
    robot[4, :1, 0] = 1.2  # mean = 0.4 m
    assert first_failure(robot, reference) == 3
    report = tracking_report(robot, reference, ["a", "b", "c"])
    assert not report.success and report.first_failure_frame == 3
    assert report.max_mean_body_distance_m == pytest.approx(0.6)
    robot[3, :2, 0] = 0.75  # mean 0.5: not above the threshold
    assert tracking_report(robot, reference, ["a", "b", "c"]).success


def test_joint_rmse_by_hand():
    reference = np.zeros((4, 2))
    robot = np.array([[3.0, 0.0], [0.1, 0.0], [-0.1, 0.2], [0.1, 0.0]])
    np.testing.assert_allclose(joint_rmse(robot, reference), [0.1, np.sqrt(0.04 / 3)])


def test_report_per_body_and_dict():
    robot, reference = offsets_case()
    report = tracking_report(
        robot,
        reference,
        ["pelvis", "hand"],
        robot_dof=np.ones((4, 1)),
        reference_dof=np.zeros((4, 1)),
        joint_names=["knee"],
    )
    assert report.frames == 3
    assert report.per_body_g_mpjpe_mm == pytest.approx({"pelvis": 5.0, "hand": 10.0})
    assert report.per_body_mpjpe_mm == pytest.approx({"pelvis": 0.0, "hand": np.sqrt(125.0)})
    assert report.joint_rmse_rad == pytest.approx({"knee": 1.0})
    data = json.loads(json.dumps(report.to_dict()))
    assert data["g_mpjpe_mm"] == pytest.approx(7.5) and data["success"] is True


@pytest.mark.parametrize(
    "robot, reference, message",
    [
        (np.zeros((5, 2, 3)), np.zeros((5, 3, 3)), "both be"),
        (np.zeros((3, 2, 3)), np.zeros((3, 2, 3)), "at least 4 frames"),
        (np.full((5, 2, 3), np.nan), np.zeros((5, 2, 3)), "robot keypoints have non-finite"),
    ],
)
def test_bad_inputs_are_refused(robot, reference, message):
    with pytest.raises(ValueError, match=message):
        e_g_mpjpe(robot, reference)


def test_report_refuses_mismatched_names():
    robot, reference = offsets_case()
    with pytest.raises(ValueError, match="3 body names for 2 keypoints"):
        tracking_report(robot, reference, ["a", "b", "c"])
    with pytest.raises(ValueError, match="needs robot_dof, reference_dof and joint_names"):
        tracking_report(robot, reference, ["a", "b"], robot_dof=np.zeros((4, 1)))
