"""The per-joint torque scale a delta model implies: "left knee at 65 %".

A motor at ``s`` × torque (no effort clip) is matched by the nominal simulator when
``0.25·Δa = (s − 1)·u`` with ``u = c − q − (kd/kp)·dq`` the PD's position error, ``c`` the target
``0.25·a + default`` (clipped to the joint limits with runtime targets); see
:mod:`asap_ros.testing.delta_oracle`. Over the observations a model was queried on, each joint's
least-squares reading is ``s = 1 + Σ(0.25·Δa·u) / Σu²`` (Δa here: the target offset it added).
A model that leaves a joint alone reads 1; a defect other than a torque scale reads as the torque
scale that best explains it. Inputs and outputs in the delta model's 108/23 layout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from asap_ros.core.robot import RobotModel
from asap_ros.export.delta import term_offset
from asap_ros.export.trainer_sim import ACTION_SCALE
from asap_ros.tracking.kinematics import DRIVEN_MOTORS, NUM_DRIVEN

MIN_EXCITATION_RAD2 = 1e-8
"""Below this mean u² (rad²) a joint's PD error never moved: no reading (NaN)."""


def _term(inputs: np.ndarray, name: str) -> np.ndarray:
    at, scale = term_offset(name)
    return np.asarray(inputs, dtype=np.float64)[:, at : at + NUM_DRIVEN] / scale


def pd_error(inputs: np.ndarray, robot: RobotModel, clamp: bool) -> np.ndarray:
    """(N, 23) ``u = c − q − (kd/kp)·dq`` (rad) of each observation; ``clamp``: ``c`` clipped to the joint limits."""
    driven = DRIVEN_MOTORS
    default = robot.default_q[driven]
    target = ACTION_SCALE * _term(inputs, "actions_open_loop") + default
    if clamp:
        target = np.clip(target, robot.q_lower[driven], robot.q_upper[driven])
    q = _term(inputs, "dof_pos") + default
    return target - q - (robot.kd[driven] / robot.kp[driven]) * _term(inputs, "dof_vel")


def scale_sums(inputs: np.ndarray, added: np.ndarray, robot: RobotModel, clamp: bool) -> np.ndarray:
    """(2, 23) ``Σ(added·u)`` and ``Σu²``: the least-squares sums, to add up over windows."""
    u = pd_error(inputs, robot, clamp)
    return np.stack([(np.asarray(added, dtype=np.float64) * u).sum(axis=0), (u**2).sum(axis=0)])


def implied_scale(sums: np.ndarray, count: int) -> np.ndarray:
    """(23,) ``1 + Σ(added·u)/Σu²`` of :func:`scale_sums` over ``count`` observations (NaN where u never moved)."""
    sums = np.asarray(sums, dtype=np.float64)
    excited = sums[1] > MIN_EXCITATION_RAD2 * max(count, 1)
    return np.where(excited, 1.0 + sums[0] / np.where(excited, sums[1], 1.0), np.nan)


def model_scale(model: Callable[[np.ndarray], np.ndarray], inputs: np.ndarray, robot: RobotModel,
                clamp: bool) -> np.ndarray:  # fmt: skip
    """(23,) the implied scale of ``model`` (one float32 observation -> Δa) queried on ``inputs`` (N, 108)."""
    inputs = np.asarray(inputs, dtype=np.float32)
    delta = np.array([model(row) for row in inputs], dtype=np.float64).reshape(len(inputs), NUM_DRIVEN)
    target = ACTION_SCALE * _term(inputs, "actions_open_loop") + robot.default_q[DRIVEN_MOTORS]
    added = ACTION_SCALE * delta
    if clamp:  # what of the delta survives the joint-limit clip
        low, high = robot.q_lower[DRIVEN_MOTORS], robot.q_upper[DRIVEN_MOTORS]
        added = np.clip(target + added, low, high) - np.clip(target, low, high)
    return implied_scale(scale_sums(inputs, added, robot, clamp), len(inputs))


def to_dict(names: Sequence[str], scale: np.ndarray) -> dict[str, float | None]:
    return {n: (None if np.isnan(s) else float(s)) for n, s in zip(names, scale)}


def scale_lines(scales: dict[str, float | None], top: int = 5) -> list[str]:
    """The joints furthest from full torque first: ``left_knee_joint at 65 %``."""
    known = sorted(((abs(s - 1.0), n, s) for n, s in scales.items() if s is not None), reverse=True)
    return [f"  {n:<28} at {s:.0%}" for _, n, s in known[:top]]
