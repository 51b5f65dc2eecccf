"""One contract for actors of any trainer, bound to the robot's motors by joint name.

An actor lists its joints in its own order (IsaacLab's breadth-first order for BeyondMimic, the
SDK's motor order for holosoma, ASAP's 23 driven joints): every per-joint value it comes with
(gains, default pose, action scale) is in that order. :func:`bind_joints` maps that order to
motor indices; the ``*_problem`` checks say why a value cannot be armed. Every refusal is a
:class:`~asap_ros.core.errors.ConfigError` naming the file, the key (with the joint) and the value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asap_ros.core.errors import ConfigError
from asap_ros.core.policy_spec import ObsTerm
from asap_ros.core.robot import RobotModel, gain_problem

PRECISION_TOLERANCE = 0.01
"""Largest relative change of a gain or action scale that rounding in a file may hide (1 %):
a value written with ``d`` decimals may be off by up to ``0.5 * 10**-d``; BeyondMimic writes 3
decimals, so its wrists' action scale 0.075 (true 0.0745) may be off by 0.67 %, within this."""


@dataclass(frozen=True)
class ActorContract:
    """A validated trainer actor. ``joints`` is the actor's order; arrays named ``*_actor`` are in
    it, the others are [29] in motor order (motors the actor does not drive keep the robot model's
    value)."""

    name: str
    source: Path
    """The spec file (named in every error)."""
    trainer: str
    actor_path: Path
    actor_sha256: str
    external_data: tuple[tuple[Path, str], ...]
    """``(file, sha256)`` of each external-weights file (``MODEL.onnx.data``) the model reads."""
    inputs: tuple[tuple[str, int], ...]
    """ONNX inputs ``(name, width)`` in the model's order; the first is the observation."""
    action_output: str
    joints: tuple[str, ...]
    motor_indices: np.ndarray
    """Motor index of each actor joint (actor order)."""
    terms: tuple[ObsTerm, ...]
    """Observation terms in concatenation order (alphabetical for ASAP and holosoma, the listed
    order for BeyondMimic)."""
    default_q: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    action_scale_actor: np.ndarray
    """rad per unit of raw output; target = default_q + scale * clip(a, +-action_clip)."""
    action_clip: float | None
    """None: the trainer does not clip (BeyondMimic)."""
    control_dt: float
    motion_steps: int | None
    """Frames of a motion held in the model (``time_step`` 0..motion_steps-1); None: none."""
    command_ranges: tuple[tuple[str, float, float], ...]
    """``(name, low, high)`` of each velocity command (holosoma: lin_vel_x, lin_vel_y, ang_vel_yaw)."""
    gait_period_s: float | None
    needs_mocap: bool
    """The observation holds the anchor position and base velocity (BeyondMimic 160)."""
    anchor_index: int | None = None
    """Index of the anchor body (``torso_link``) in the model's body outputs (BeyondMimic)."""

    @property
    def obs_dim(self) -> int:
        return sum(t.dim for t in self.terms)

    @property
    def default_q_actor(self) -> np.ndarray:
        result: np.ndarray = self.default_q[self.motor_indices]
        return result


def bind_joints(names: Sequence[str], robot: RobotModel, source: str | Path, key: str) -> np.ndarray:
    """Motor index of each named joint; refuses a joint the robot lacks or one named twice."""
    indices, seen = [], set()
    for position, name in enumerate(names):
        if name not in robot.joint_names:
            problem = f"joint {position} is not a joint of the robot model {robot.name}"
            raise ConfigError(source, f"{key}[{position}]", problem, name)
        if name in seen:
            raise ConfigError(source, f"{key}[{position}]", "joint named twice", name)
        seen.add(name)
        indices.append(robot.index(name))
    return np.array(indices, dtype=np.int64)


def require_all_motors(names: Sequence[str], robot: RobotModel, source: str | Path, key: str) -> None:
    """A whole-body actor (BeyondMimic, holosoma) must name every motor: a missing one would be
    left without a target from the actor."""
    missing = [j for j in robot.joint_names if j not in names]
    if missing:
        raise ConfigError(source, key, f"the actor does not name {len(missing)} robot joint(s)", ", ".join(missing))


def check_per_joint(
    values: Sequence[float], joints: Sequence[str], robot: RobotModel, source: str | Path, key: str
) -> None:
    """Gains (``kp``/``kd``) and the default pose of each actor joint within the robot model.

    ``key`` ends in ``kp``, ``kd`` or ``default_q``. A gain must be > 0 (a zero gain leaves the
    joint limp under the actor) and within the motor's effort limit (:func:`gain_problem`); a
    default pose within the joint's range [q_min, q_max] (rad).
    """
    if len(values) != len(joints):
        raise ConfigError(source, key, f"has {len(values)} values for {len(joints)} joints", len(values))
    kind = key.rsplit(".", 1)[-1]
    for joint, value in zip(joints, values):
        index = robot.index(joint)
        problem: str | None
        if not np.isfinite(value):
            problem = "must be a finite number"
        elif kind in ("kp", "kd"):
            problem = "must be > 0 (a zero gain leaves the joint limp)" if value <= 0.0 else None
            problem = problem or gain_problem(kind, float(value), float(robot.tau_limit[index]))
        else:
            low, high = float(robot.q_lower[index]), float(robot.q_upper[index])
            problem = None if low <= value <= high else f"outside the joint's range [{low:g}, {high:g}] rad"
        if problem:
            raise ConfigError(source, f"{key}.{joint}", problem, float(value))


def precision_problem(text: str, tolerance: float = PRECISION_TOLERANCE) -> str | None:
    """Why a number written as ``text`` may be too coarse (None: fine): half a unit of its last
    decimal relative to its value exceeds ``tolerance``. Zero and integers are exact."""
    mantissa = text.strip().lower().split("e")[0]
    if "." not in mantissa:
        return None
    decimals = len(mantissa.split(".")[1])
    value = abs(float(text))
    if value == 0.0:
        return None
    error = 0.5 * 10.0**-decimals / value
    if error > tolerance:
        return (f"written with {decimals} decimals: may be off by {100 * error:.2g} %, more than the "
                f"{100 * tolerance:g} % tolerance")  # fmt: skip
    return None


def check_obs_dims(terms: Sequence[ObsTerm], input_dim: int, source: str | Path, key: str) -> None:
    """The named terms must add up to the model's observation width."""
    total = sum(t.dim for t in terms)
    if total != input_dim:
        parts = " + ".join(f"{t.name} {t.dim}" for t in terms)
        raise ConfigError(source, key, f"terms add up to {total} ({parts}) but the model takes {input_dim}", total)


START_POSE_BOUND_RAD = 0.7
"""A motion starts only when every joint it drives is within this of the motion's first frame
(rad). Measured on the simulated G1 (lock-step): from holosoma's stance Jump_wose (elbows 0.55 rad
off) and Violin (right knee 0.67 rad off) start and track to their end; BeyondMimic trains from
perturbed starts. A joint further off is refused."""


def start_pose_problem(q: np.ndarray, start: np.ndarray, joints: Sequence[str], motor_indices: np.ndarray,
                       bound_rad: float = START_POSE_BOUND_RAD) -> str | None:  # fmt: skip
    """Why the robot (``q`` [29]) may not start a motion from ``start`` [29] (None: it may): the
    motion's ``joints`` (at ``motor_indices``) further than ``bound_rad`` off, each with its offset."""
    off = [(joint, float(q[m] - start[m])) for joint, m in zip(joints, motor_indices)
           if abs(q[m] - start[m]) > bound_rad]  # fmt: skip
    if not off:
        return None
    listed = ", ".join(f"{joint} {value:+.3f} rad" for joint, value in off)
    return f"{len(off)} joint(s) more than {bound_rad:g} rad from the motion's start pose: {listed}"
