"""Golden tests of the trainers' observation builders: each against an observation written out by
hand, offset by offset, from the trainer's documented layout (holosoma ``loco_g1_29dof``:
alphabetical terms; BeyondMimic: ``observation_names`` order) for one recorded-like state. A
reordered joint list or a wrong term order must fail them."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from asap_ros.config.robot import load_robot_model
from asap_ros.core.errors import ConfigError
from asap_ros.core.policy_spec import ObsTerm
from asap_ros.core.trainer_obs import (
    anchor_ori_b,
    beyondmimic_observation,
    holosoma_observation,
    holosoma_phase_step,
    torso_quat,
)  # fmt: skip

ROBOT = load_robot_model()
ISAACLAB = ("left_hip_pitch_joint,right_hip_pitch_joint,waist_yaw_joint,left_hip_roll_joint,right_hip_roll_joint,"
            "waist_roll_joint,left_hip_yaw_joint,right_hip_yaw_joint,waist_pitch_joint,left_knee_joint,"
            "right_knee_joint,left_shoulder_pitch_joint,right_shoulder_pitch_joint,left_ankle_pitch_joint,"
            "right_ankle_pitch_joint,left_shoulder_roll_joint,right_shoulder_roll_joint,left_ankle_roll_joint,"
            "right_ankle_roll_joint,left_shoulder_yaw_joint,right_shoulder_yaw_joint,left_elbow_joint,"
            "right_elbow_joint,left_wrist_roll_joint,right_wrist_roll_joint,left_wrist_pitch_joint,"
            "right_wrist_pitch_joint,left_wrist_yaw_joint,right_wrist_yaw_joint").split(",")  # fmt: skip

HOLOSOMA = [ObsTerm("actions", 29, 1.0), ObsTerm("base_ang_vel", 3, 0.25), ObsTerm("command_ang_vel", 1, 1.0),
            ObsTerm("command_lin_vel", 2, 1.0), ObsTerm("cos_phase", 2, 1.0), ObsTerm("dof_pos", 29, 1.0),
            ObsTerm("dof_vel", 29, 0.05), ObsTerm("projected_gravity", 3, 1.0), ObsTerm("sin_phase", 2, 1.0)]  # fmt: skip
BEYONDMIMIC_154 = [ObsTerm("command", 58, 1.0), ObsTerm("motion_anchor_ori_b", 6, 1.0),
                   ObsTerm("base_ang_vel", 3, 1.0), ObsTerm("joint_pos", 29, 1.0), ObsTerm("joint_vel", 29, 1.0),
                   ObsTerm("actions", 29, 1.0)]  # fmt: skip
BEYONDMIMIC_160 = [BEYONDMIMIC_154[0], ObsTerm("motion_anchor_pos_b", 3, 1.0), BEYONDMIMIC_154[1],
                   ObsTerm("base_lin_vel", 3, 1.0), *BEYONDMIMIC_154[2:]]  # fmt: skip

# one state, every motor different: q_i = 0.01 i - 0.1, dq_i = 0.1 - 0.03 i (motor order)
Q = np.array([0.01 * i - 0.1 for i in range(29)])
DQ = np.array([0.1 - 0.03 * i for i in range(29)])
ROLL = 0.2
PELVIS = np.array([math.cos(ROLL / 2), math.sin(ROLL / 2), 0.0, 0.0])
"""Pelvis rolled 0.2 rad about x: gravity in the body frame is (0, -sin 0.2, -cos 0.2)."""
GYRO = np.array([0.4, -0.8, 1.2])
LAST = np.array([0.5 - 0.02 * i for i in range(29)])
DEFAULT = np.array([0.003 * i for i in range(29)])


def test_holosoma_golden():
    phase = np.array([0.3, 0.3 - math.pi])
    command = (0.5, -0.1, 0.25)
    obs = holosoma_observation(HOLOSOMA, Q, DQ, PELVIS, GYRO, np.arange(29), DEFAULT, LAST, command, phase)
    expected = np.zeros(100)
    expected[0:29] = LAST
    expected[29:32] = [0.1, -0.2, 0.3]  # 0.25 * gyro
    expected[32] = 0.25
    expected[33:35] = [0.5, -0.1]
    expected[35:37] = [math.cos(0.3), math.cos(0.3 - math.pi)]
    expected[37:66] = [0.01 * i - 0.1 - 0.003 * i for i in range(29)]
    expected[66:95] = [0.05 * (0.1 - 0.03 * i) for i in range(29)]
    expected[95:98] = [0.0, -math.sin(ROLL), -math.cos(ROLL)]
    expected[98:100] = [math.sin(0.3), math.sin(0.3 - math.pi)]
    assert obs.dtype == np.float32 and obs.shape == (100,)
    np.testing.assert_allclose(obs, expected.astype(np.float32), rtol=0, atol=1e-7)
    # a reordered joint list (two hips swapped) or terms in the listed, not sorted, order fail it
    swapped = np.arange(29)
    swapped[[0, 6]] = swapped[[6, 0]]
    wrong = holosoma_observation(HOLOSOMA, Q, DQ, PELVIS, GYRO, swapped, DEFAULT, LAST, command, phase)
    assert not np.allclose(wrong, expected, atol=1e-4)
    listed = [HOLOSOMA[i] for i in (1, 7, 3, 2, 5, 6, 0, 8, 4)]  # holosoma's config order
    assert not np.allclose(holosoma_observation(listed, Q, DQ, PELVIS, GYRO, np.arange(29), DEFAULT, LAST,
                                                command, phase), expected, atol=1e-4)  # fmt: skip


def test_holosoma_gait_clock():
    step = 2 * math.pi * 0.02 / 1.0
    phase, standing = holosoma_phase_step(np.array([0.0, math.pi]), (0.0, 0.0, 0.0), 1.0, 0.02, False)
    assert phase.tolist() == [math.pi, math.pi] and standing  # stance: both feet at pi
    phase, standing = holosoma_phase_step(phase, (0.5, 0.0, 0.0), 1.0, 0.02, standing)
    assert phase.tolist() == [0.0, math.pi] and not standing  # walking restarts at [0, pi]
    phase, standing = holosoma_phase_step(phase, (0.5, 0.0, 0.0), 1.0, 0.02, standing)
    assert phase == pytest.approx([step, -math.pi + step])  # the right foot wraps into [-pi, pi)


def _isaaclab_indices() -> np.ndarray:
    return np.array([ROBOT.index(j) for j in ISAACLAB])


def test_beyondmimic_154_golden():
    yaw = 0.3
    q = Q.copy()
    q[[12, 13, 14]] = [yaw, 0.0, 0.0]  # waist yaw only: torso = pelvis turned by yaw about z
    pelvis = np.array([1.0, 0.0, 0.0, 0.0])
    ref_pos, ref_vel = np.linspace(-1, 1, 29), np.linspace(2, -2, 29)
    index = _isaaclab_indices()
    robot_anchor = torso_quat(pelvis, yaw, 0.0, 0.0)
    obs = beyondmimic_observation(BEYONDMIMIC_154, q, DQ, GYRO, index, DEFAULT, LAST, ref_pos, ref_vel,
                                  robot_anchor, np.array([1.0, 0.0, 0.0, 0.0]))  # fmt: skip
    expected = np.zeros(154)
    expected[0:29], expected[29:58] = ref_pos, ref_vel
    c, s = math.cos(yaw), math.sin(yaw)
    expected[58:64] = [c, s, -s, c, 0.0, 0.0]  # Rz(-yaw), first two columns row by row
    expected[64:67] = GYRO
    for position, joint in enumerate(ISAACLAB):
        expected[67 + position] = q[ROBOT.index(joint)] - DEFAULT[position]
        expected[96 + position] = DQ[ROBOT.index(joint)]
    expected[125:154] = LAST
    np.testing.assert_allclose(obs, expected.astype(np.float32), rtol=0, atol=1e-7)
    wrong = beyondmimic_observation(BEYONDMIMIC_154, q, DQ, GYRO, np.arange(29), DEFAULT, LAST, ref_pos, ref_vel,
                                    robot_anchor, np.array([1.0, 0.0, 0.0, 0.0]))  # SDK order, not IsaacLab's
    assert not np.allclose(wrong, expected, atol=1e-4)
    alphabetical = sorted(BEYONDMIMIC_154, key=lambda t: t.name)
    assert not np.allclose(beyondmimic_observation(alphabetical, q, DQ, GYRO, index, DEFAULT, LAST, ref_pos,
                                                   ref_vel, robot_anchor, np.array([1.0, 0, 0, 0])),
                           expected, atol=1e-4)  # fmt: skip


def test_beyondmimic_160_golden_and_refused_without_mocap():
    yaw = 0.5
    robot_anchor = torso_quat(np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]), 0.0, 0.0, 0.0)
    mocap = (np.array([1.0, 2.0, 0.8]), np.array([2.0, 2.0, 0.9]), np.array([0.3, -0.1, 0.05]))
    args = (Q, DQ, GYRO, _isaaclab_indices(), DEFAULT, LAST, np.zeros(29), np.zeros(29), robot_anchor, robot_anchor)
    obs = beyondmimic_observation(BEYONDMIMIC_160, *args, mocap=mocap)
    # motion anchor 1 m ahead in world x, 0.1 m up: in the robot anchor's frame (yaw 0.5)
    np.testing.assert_allclose(obs[58:61], [math.cos(yaw), -math.sin(yaw), 0.1], atol=1e-6)
    np.testing.assert_allclose(obs[61:67], [1, 0, 0, 1, 0, 0], atol=1e-6)  # same orientation
    np.testing.assert_allclose(obs[67:70], [0.3, -0.1, 0.05], atol=1e-7)
    with pytest.raises(ConfigError, match="motion capture") as error:
        beyondmimic_observation(BEYONDMIMIC_160, *args, mocap=None, source="Violin.yaml")
    assert error.value.value == "motion_anchor_pos_b, base_lin_vel" and error.value.file == "Violin.yaml"


def test_torso_fk_matches_mujoco(assets):
    """The anchor by forward kinematics through the waist equals MuJoCo's torso_link on ASAP's G1."""
    model = mujoco.MjModel.from_xml_path(str(assets / "robots" / "g1" / "g1_29dof_anneal_23dof.xml"))
    data = mujoco.MjData(model)
    pelvis = np.array([0.9, 0.1, -0.2, 0.3])
    pelvis /= np.linalg.norm(pelvis)
    waist = {"waist_yaw_joint": 0.4, "waist_roll_joint": -0.2, "waist_pitch_joint": 0.3}
    free = next(j for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE)
    data.qpos[model.jnt_qposadr[free] + 3 : model.jnt_qposadr[free] + 7] = pelvis
    for name, angle in waist.items():
        joint = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
        assert joint >= 0, name
        data.qpos[model.jnt_qposadr[joint]] = angle
    mujoco.mj_kinematics(model, data)
    torso = data.xquat[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "torso_link")]
    ours = torso_quat(pelvis, *waist.values())
    assert abs(abs(float(np.dot(ours, torso))) - 1.0) < 1e-9
    assert anchor_ori_b(ours, torso) == pytest.approx([1, 0, 0, 1, 0, 0], abs=1e-6)
