"""One control step of a trainer actor: the robot state in, a [29] joint target with the contract's
gains out. Every motor the actor does not drive holds the contract's default pose.

- holosoma: the gait clock advances, then the observation (alphabetical terms) is built with the
  velocity command clipped to the model's ``command_ranges``;
- BeyondMimic: the observation holds the reference the model returned at the previous
  ``time_step`` (at time_step 0: a first call on the zero observation, as RoboJuDo deploys it); the
  motion's heading is turned onto the robot's at the start; the motion is done after
  ``motion_steps`` steps;
- ASAP layout: :class:`~asap_ros.core.policy.PolicyRunner` on a spec made from the contract.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from asap_ros.core.actor_contract import ActorContract
from asap_ros.core.errors import ConfigError
from asap_ros.core.policy import PolicyRunner
from asap_ros.core.policy_spec import HistorySpec, PolicySpec
from asap_ros.core.quaternion import yaw_of
from asap_ros.core.robot import RobotModel
from asap_ros.core.state import RobotState
from asap_ros.core.trainer_obs import (
    beyondmimic_observation,
    holosoma_observation,
    holosoma_phase_step,
    torso_quat,
    yaw_aligned,
)  # fmt: skip
from asap_ros.runtime.trainer_actor import TrainerActor

WAIST = ("waist_yaw_joint", "waist_roll_joint", "waist_pitch_joint")
Mocap = tuple[np.ndarray, np.ndarray]
"""(torso_link position [3] world, pelvis linear velocity [3] body frame) from motion capture."""


@dataclass
class TrainerOutput:
    q_target: np.ndarray
    obs: np.ndarray
    raw_action: np.ndarray
    time_step: int
    done: bool
    reference_q: np.ndarray | None = None
    """The model's own reference joint_pos for this step, [29] motor order (BeyondMimic)."""
    reference_anchor_quat: np.ndarray | None = None
    reference_anchor_pos: np.ndarray | None = None


def asap_spec_of(contract: ActorContract, robot: RobotModel) -> PolicySpec:
    """An ASAP :class:`PolicySpec` of an imported ASAP-layout contract (terms + 4-step history)."""
    terms = tuple(t for t in contract.terms if not t.name.startswith("history"))
    history = next(t for t in contract.terms if t.name.startswith("history"))
    length = history.dim // sum(t.dim for t in terms)
    driven = contract.joints
    if contract.motion_steps is None:
        raise ConfigError(contract.source, "motion", "an ASAP-layout motion actor needs motion.length_s or steps")
    scales = contract.action_scale_actor
    if not np.all(scales == scales[0]):
        raise ConfigError(contract.source, "action.scale", "ASAP's layout takes one action scale for all joints",
                          sorted({float(v) for v in scales}))  # fmt: skip
    return PolicySpec(
        name=contract.name, source=contract.source, actor_path=contract.actor_path,
        actor_sha256=contract.actor_sha256, input_name=contract.inputs[0][0], input_dim=contract.inputs[0][1],
        output_name=contract.action_output, output_dim=len(driven), driven_joints=driven,
        driven_indices=contract.motor_indices, observed_joints=driven, observed_indices=contract.motor_indices,
        reference_joints=(), reference_indices=np.zeros(0, dtype=np.int64), snap_indices=np.zeros(0, dtype=np.int64),
        commands=None, terms=terms, history=HistorySpec(history.name, length, tuple(t.name for t in terms), True),
        action_scale=float(contract.action_scale_actor[0]), action_clip=contract.action_clip or 100.0,
        default_q=contract.default_q, kp=contract.kp, kd=contract.kd, control_dt=contract.control_dt,
        phase_start=0.0, clip_path=None, clip_duration_s=contract.motion_steps * contract.control_dt,
        prepare_pose=contract.default_q, prepare_blend_s=1.0, prepare_hold_s=0.0,
    )  # fmt: skip


class TrainerStep:
    """Runs one trainer actor; :meth:`reset` at its start (the robot's state then)."""

    def __init__(self, contract: ActorContract, robot: RobotModel):
        self.contract = contract
        self.robot = robot
        self.actor = TrainerActor(contract)
        self._indices = contract.motor_indices
        self._default_actor = contract.default_q_actor
        self._waist = [robot.index(j) for j in WAIST]
        self._asap: PolicyRunner | None = None
        if contract.trainer == "asap":
            spec = asap_spec_of(contract, robot)
            self._asap = PolicyRunner(spec, robot, lambda obs: self.actor(obs))
        self.command = np.zeros(3)
        self.reset(RobotState())

    def reset(self, state: RobotState) -> None:
        self.time_step = 0
        self.last_action = np.zeros(len(self.contract.joints), dtype=np.float32)
        self.phase, self.standing = np.array([0.0, math.pi]), False
        if self._asap is not None:
            self._asap.reset()
        if self.contract.trainer == "beyondmimic":
            self.actor(np.zeros(self.contract.obs_dim, dtype=np.float32), 0)
            self._reference = {n: r.copy() for n, r in self.actor.reference.items()}
            anchor = self._anchor_index()
            robot_yaw = float(yaw_of(self._robot_anchor(state)))
            motion_yaw = float(yaw_of(self._reference["body_quat_w"][anchor]))
            self.yaw_offset = robot_yaw - motion_yaw
            self._xy_offset = np.zeros(3)
            self._align_anchor()

    def _align_anchor(self) -> None:
        """The current reference's anchor in the robot's world: turned by the heading offset and
        shifted by the xy offset (kept for the next step's observation and this step's output)."""
        anchor = self._anchor_index()
        self._anchor_quat = yaw_aligned(self._reference["body_quat_w"][anchor], self.yaw_offset)
        self._anchor_pos = _turn(self._reference["body_pos_w"][anchor], self.yaw_offset) + self._xy_offset

    def align_position(self, robot_anchor_pos: np.ndarray) -> None:
        """Put the motion's start anchor under the robot's (xy; heights kept), for the 160 variant."""
        start = self._reference["body_pos_w"][self._anchor_index()]
        turned = _turn(start, self.yaw_offset)
        self._xy_offset = np.array([robot_anchor_pos[0] - turned[0], robot_anchor_pos[1] - turned[1], 0.0])
        self._align_anchor()

    def set_command(self, command: Sequence[float]) -> np.ndarray:
        """The velocity command (vx m/s, vy m/s, wz rad/s), clipped to the model's ranges."""
        ranges = {name: (low, high) for name, low, high in self.contract.command_ranges}
        clipped = np.array(command, dtype=np.float64)
        for i, name in enumerate(("lin_vel_x", "lin_vel_y", "ang_vel_yaw")):
            if name in ranges:
                clipped[i] = min(max(clipped[i], ranges[name][0]), ranges[name][1])
        self.command = clipped
        return clipped

    def _anchor_index(self) -> int:
        index = self.contract.anchor_index
        if index is None:
            raise ConfigError(self.contract.source, "motion.anchor_index", "needed to read the motion's anchor")
        return index

    def _robot_anchor(self, state: RobotState) -> np.ndarray:
        return torso_quat(state.quat_wxyz, *(float(state.q[i]) for i in self._waist))

    def _targets(self, action: np.ndarray) -> np.ndarray:
        clip = self.contract.action_clip
        raw = action if clip is None else np.minimum(np.maximum(action, -clip), clip)  # np.clip is slower
        q_target = np.array(self.contract.default_q, dtype=np.float64)
        q_target[self._indices] = self._default_actor + self.contract.action_scale_actor * raw
        self.robot.clip_targets(q_target, out=q_target)
        return q_target

    def step(self, state: RobotState, mocap: Mocap | None = None) -> TrainerOutput:
        trainer = self.contract.trainer
        if self._asap is not None:
            out = self._asap.step(state)
            self.time_step += 1
            return TrainerOutput(out.q_target, out.obs, out.raw_action, self.time_step - 1, out.done)
        if trainer == "holosoma":
            period = self.contract.gait_period_s or 1.0
            self.phase, self.standing = holosoma_phase_step(self.phase, self.command, period, self.contract.control_dt,
                                                            self.standing)  # fmt: skip
            obs = holosoma_observation(self.contract.terms, state.q, state.dq, state.quat_wxyz, state.gyro,
                                       self._indices, self._default_actor, self.last_action, self.command, self.phase)
            action = self.actor(obs)
            self.last_action = np.minimum(np.maximum(action, -100.0), 100.0)  # holosoma's clip, float32
            self.time_step += 1
            return TrainerOutput(self._targets(action), obs, action, self.time_step - 1, False)
        return self._beyondmimic(state, mocap)

    def _beyondmimic(self, state: RobotState, mocap: Mocap | None) -> TrainerOutput:
        reference, motion_quat, motion_pos = self._reference, self._anchor_quat, self._anchor_pos
        robot_anchor = self._robot_anchor(state)
        full = None if mocap is None else (mocap[0], motion_pos, mocap[1])
        obs = beyondmimic_observation(self.contract.terms, state.q, state.dq, state.gyro, self._indices,
                                      self._default_actor, self.last_action, reference["joint_pos"],
                                      reference["joint_vel"], robot_anchor, motion_quat, full,
                                      str(self.contract.source))  # fmt: skip
        step = min(self.time_step, (self.contract.motion_steps or 1) - 1)
        action = self.actor(obs, step)
        self.last_action = action.astype(np.float32)
        self._reference = {n: r.copy() for n, r in self.actor.reference.items()}
        self._align_anchor()
        reference_q = np.array(self.contract.default_q, dtype=np.float64)
        reference_q[self._indices] = self._reference["joint_pos"]
        self.time_step += 1
        done = self.contract.motion_steps is not None and self.time_step >= self.contract.motion_steps
        return TrainerOutput(self._targets(action), obs, action, step, done, reference_q, self._anchor_quat,
                             self._anchor_pos)


def _turn(vector: np.ndarray, yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([c * vector[0] - s * vector[1], s * vector[0] + c * vector[1], vector[2]])


def start_pose(contract: ActorContract, robot: RobotModel) -> np.ndarray:
    """[29] pose to blend to before the actor starts: a BeyondMimic motion's first frame, else the
    contract's default pose."""
    pose = np.array(contract.default_q, dtype=np.float64)
    if contract.trainer == "beyondmimic":
        actor = TrainerActor(contract)
        actor(np.zeros(contract.obs_dim, dtype=np.float32), 0)
        pose[contract.motor_indices] = actor.reference["joint_pos"]
    return np.clip(pose, robot.q_lower, robot.q_upper)
