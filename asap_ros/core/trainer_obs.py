"""Observations of other trainers' actors, as pure functions of the robot state, the command and
the actor's own previous outputs.

Joint terms are in the actor's joint order (``motor_indices`` maps it to motors). Each term is
``scale * value`` rounded once to float32; terms are concatenated in the order the contract gives:

- holosoma locomotion (``holosoma_inference`` ``policies/base.py``, ``loco_g1_29dof``): the term
  names sorted alphabetically; ``sin_phase``/``cos_phase`` of a two-foot gait clock (left, right)
  that :func:`holosoma_phase_step` advances before each step;
- BeyondMimic (whole_body_tracking's ``observation_names``, in that order): ``command`` is the
  motion's joint_pos and joint_vel that the model itself returned for the previous ``time_step``;
  ``motion_anchor_ori_b`` the first two columns (row-major) of the rotation from the robot's anchor
  body to the motion's; the 160 variant adds ``motion_anchor_pos_b`` and ``base_lin_vel``, which
  need a position estimate (motion capture).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from asap_ros.core.errors import ConfigError
from asap_ros.core.policy_spec import ObsTerm
from asap_ros.core.quaternion import gravity_in_body, quat_conjugate, quat_multiply_one, quat_wxyz_matrix

MOCAP_TERMS = ("motion_anchor_pos_b", "base_lin_vel")
"""BeyondMimic terms that need the anchor's world position and the base velocity (motion capture)."""

STAND_COMMAND = 0.01
"""holosoma stands (both feet at phase pi) while |lin_vel| and |ang_vel| are below this (m/s, rad/s)."""


_LAYOUTS: dict[int, tuple[Sequence[ObsTerm], tuple[tuple[str, int, int], ...], np.ndarray]] = {}
"""Offsets and scale vector of each term list seen, by identity (the entry keeps the list alive,
so its id stays its own); a control loop passes the same list every step."""


def _layout(terms: Sequence[ObsTerm]) -> tuple[tuple[tuple[str, int, int], ...], np.ndarray]:
    hit = _LAYOUTS.get(id(terms))
    if hit is None or hit[0] is not terms:
        blocks, start = [], 0
        for term in terms:
            blocks.append((term.name, start, start + term.dim))
            start += term.dim
        scales = np.concatenate([np.full(t.dim, t.scale) for t in terms])
        if len(_LAYOUTS) >= 64:
            _LAYOUTS.clear()
        hit = _LAYOUTS[id(terms)] = (terms, tuple(blocks), scales)
    return hit[1], hit[2]


def assemble(values: Mapping[str, Any], terms: Sequence[ObsTerm]) -> np.ndarray:
    """Concatenate ``scale * value`` of each term in ``terms``' order: the float64 product rounded
    once to float32, as the trainers compute it."""
    blocks, scales = _layout(terms)
    raw = np.empty(scales.size)
    for name, start, end in blocks:
        value = values[name]
        if np.size(value) != end - start:
            raise ConfigError(None, f"observation.{name}", f"value has {np.size(value)} floats, the term {end - start}")
        raw[start:end] = value
    raw *= scales
    return raw.astype(np.float32)


def projected_gravity(quat_wxyz: np.ndarray) -> np.ndarray:
    """World gravity direction (0, 0, -1) in the body frame."""
    return gravity_in_body(quat_wxyz, np.zeros(3))


def holosoma_phase_step(phase: np.ndarray, command: Sequence[float], period_s: float, dt: float,
                        standing: bool) -> tuple[np.ndarray, bool]:  # fmt: skip
    """holosoma's gait clock one control step on: ``(phase [left, right] in rad, standing)``.

    Each foot advances ``2 pi dt / period`` and wraps into [-pi, pi); with a zero command both
    feet sit at pi (standing); the first step with a command after standing restarts at [0, pi].
    """
    step = 2.0 * math.pi * dt / period_s
    advanced = np.array([math.fmod(p + step + math.pi, 2.0 * math.pi) - math.pi for p in phase])
    vx, vy, wz = command
    if math.hypot(vx, vy) < STAND_COMMAND and abs(wz) < STAND_COMMAND:
        return np.array([math.pi, math.pi]), True
    if standing:
        return np.array([0.0, math.pi]), False
    return advanced, False


def holosoma_observation(
    terms: Sequence[ObsTerm], q: np.ndarray, dq: np.ndarray, quat_wxyz: np.ndarray, gyro: np.ndarray,
    motor_indices: np.ndarray, default_q_actor: np.ndarray, last_action: np.ndarray,
    command: Sequence[float], phase: np.ndarray,
) -> np.ndarray:  # fmt: skip
    """holosoma locomotion observation; ``q``/``dq`` [29] motor order, ``command`` (vx, vy, wz)."""
    values = {
        "actions": last_action,
        "base_ang_vel": gyro,
        "command_ang_vel": command[2],
        "command_lin_vel": command[:2],
        "cos_phase": np.cos(phase),
        "dof_pos": q[motor_indices] - default_q_actor,
        "dof_vel": dq[motor_indices],
        "projected_gravity": projected_gravity(quat_wxyz),
        "sin_phase": np.sin(phase),
    }
    return assemble(values, terms)


def _axis_quat(axis: int, angle: float) -> np.ndarray:
    quat = np.zeros(4)
    quat[0], quat[1 + axis] = math.cos(angle / 2.0), math.sin(angle / 2.0)
    return quat


def torso_quat(pelvis_quat_wxyz: np.ndarray, waist_yaw: float, waist_roll: float, waist_pitch: float) -> np.ndarray:
    """Orientation of the G1's ``torso_link`` (BeyondMimic's anchor) by forward kinematics from the
    pelvis IMU through the waist: yaw about z, then roll about x, then pitch about y (the URDF's
    joint axes; the joint origins have no rotation)."""
    quat = np.asarray(pelvis_quat_wxyz, dtype=np.float64)
    for axis, angle in ((2, waist_yaw), (0, waist_roll), (1, waist_pitch)):
        quat = quat_multiply_one(quat, _axis_quat(axis, angle))
    return quat


def yaw_aligned(motion_quat_wxyz: np.ndarray, yaw_offset: float) -> np.ndarray:
    """The motion's orientation turned about world z by ``yaw_offset`` (rad): the model's motion is
    in its training world frame; deployed, its start heading is turned onto the robot's."""
    return quat_multiply_one(_axis_quat(2, yaw_offset), motion_quat_wxyz)


def anchor_ori_b(robot_anchor_quat: np.ndarray, motion_anchor_quat: np.ndarray) -> np.ndarray:
    """First two columns, row-major [r00, r01, r10, r11, r20, r21], of the motion anchor's
    orientation in the robot anchor's frame."""
    relative = quat_multiply_one(quat_conjugate(robot_anchor_quat), motion_anchor_quat)
    return np.asarray(quat_wxyz_matrix(relative)[:, :2].reshape(-1))


def beyondmimic_observation(
    terms: Sequence[ObsTerm], q: np.ndarray, dq: np.ndarray, gyro: np.ndarray, motor_indices: np.ndarray,
    default_q_actor: np.ndarray, last_action: np.ndarray, ref_joint_pos: np.ndarray, ref_joint_vel: np.ndarray,
    robot_anchor_quat: np.ndarray, motion_anchor_quat: np.ndarray,
    mocap: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None, source: str | None = None,
) -> np.ndarray:  # fmt: skip
    """BeyondMimic observation. ``ref_joint_*`` are the model's previous ``joint_pos``/``joint_vel``
    outputs (actor order). ``mocap`` = (robot anchor position [3] world, motion anchor position [3]
    world, base linear velocity [3] body frame), required when a term needs it."""
    values = {
        "command": np.concatenate((ref_joint_pos, ref_joint_vel)),
        "motion_anchor_ori_b": anchor_ori_b(robot_anchor_quat, motion_anchor_quat),
        "base_ang_vel": gyro,
        "joint_pos": q[motor_indices] - default_q_actor,
        "joint_vel": dq[motor_indices],
        "actions": last_action,
    }
    needed = [t.name for t in terms if t.name in MOCAP_TERMS]
    if needed:
        if mocap is None:
            problem = "needs the anchor position and base velocity from motion capture, and none is given"
            raise ConfigError(source, f"observation.{needed[0]}", problem, ", ".join(needed))
        robot_pos, motion_pos, base_lin_vel = mocap
        # R(robot anchor)^T (p_motion - p_robot): the motion's anchor in the robot anchor's frame
        values["motion_anchor_pos_b"] = quat_wxyz_matrix(robot_anchor_quat).T @ (motion_pos - robot_pos)
        values["base_lin_vel"] = base_lin_vel
    return assemble(values, terms)
