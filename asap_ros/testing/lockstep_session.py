"""A lock-step session kept whole: the simulator's full state and the delivered LowCmd of every tick.

``asap-ros rollout``'s :class:`~asap_ros.commands.rollout.LockstepG1` runs the operator script
(stand-up, HOLD, PREPARE, TRACKING) with the project's own controller, wire format and simulated
G1. Kept per control tick k (at ``t_k``, before the tick's command): MuJoCo's integration state,
the :class:`~asap_ros.sim.motors.MotorCommand` the motors decoded, the actor's raw action, and
what the robot measured (joints, gyro) beside the true pelvis pose and velocity.

:func:`replay_exact` steps the recorded commands from a recorded full state with the recording's
own physics (the same simulator, profile and rate): the yardstick every open-loop replay is
measured against (it reproduces the recording bit for bit). :meth:`LockstepSession.rows` gives
the tracked part as the delta trainer's motion rows, row i = the state after action i.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from asap_ros.commands.rollout import LockstepG1, run_lockstep
from asap_ros.config.paths import policies_dir
from asap_ros.core.quaternion import quat_rotate
from asap_ros.core.state_machine import Mode
from asap_ros.export.motion_rows import MotionRows
from asap_ros.sim.motors import MotorCommand
from asap_ros.sim.session import prepare_run
from asap_ros.tracking.kinematics import DRIVEN_MOTORS

STATE_SPEC = mujoco.mjtState.mjSTATE_INTEGRATION
"""Everything ``mj_step`` reads: time, qpos, qvel, act, warm start, ctrl, applied forces, mocap."""


@dataclass(frozen=True)
class LockstepSession:
    """Per control tick (K rows) of one lock-step session; joint arrays in G1 motor order (29)."""

    motion: str
    profile: str
    physics_hz: float
    control_dt: float
    state: np.ndarray
    """(K, n) MuJoCo integration state at the tick, before its command."""
    commands: tuple[MotorCommand, ...]
    tracking: np.ndarray
    """(K,) bool: the motion's actor produced this tick's command (TRACKING)."""
    raw_action: np.ndarray
    """(K, 23) float32 the actor's raw output (zeros outside TRACKING)."""
    root_pos: np.ndarray
    root_quat_wxyz: np.ndarray
    lin_vel_world: np.ndarray
    """(K, 3) true pelvis velocity, m/s (the free joint's)."""
    ang_vel_body: np.ndarray
    """(K, 3) true pelvis angular velocity in the pelvis frame = the gyro (nominal profile: no noise), rad/s."""
    q: np.ndarray
    dq: np.ndarray

    def tracked(self) -> np.ndarray:
        """Tick indices of the TRACKING part."""
        return np.flatnonzero(self.tracking)

    def rows(self) -> MotionRows:
        """The TRACKING ticks as motion rows: row i = the state at tick k_i + 1, the action of tick k_i;
        root velocities the true ones, ``gyro`` the body-frame angular velocity."""
        ticks = self.tracked()[:-1]
        after = ticks + 1
        quat = self.root_quat_wxyz[after]
        return MotionRows(
            name=f"lockstep_{self.profile}_{self.motion}", motion=self.motion, source="<lock-step session>",
            fps=1.0 / self.control_dt, root_pos=self.root_pos[after], root_quat_wxyz=quat,
            dof=self.q[after][:, DRIVEN_MOTORS], action=self.raw_action[ticks],
            root_lin_vel_world=self.lin_vel_world[after],
            root_ang_vel_world=quat_rotate(quat, self.ang_vel_body[after]),
            dof_vel=self.dq[after][:, DRIVEN_MOTORS], gyro=self.ang_vel_body[after],
        )  # fmt: skip


def record_lockstep(motion: str, profile: str = "nominal", stand_up_s: float = 2.0) -> LockstepSession:
    """Run ``policies/<motion>.yaml`` lock-step on a ``profile`` G1 and keep every tick."""
    setup = prepare_run(policies_dir() / f"{motion}.yaml", stand_up_s=stand_up_s)
    robot_sim = LockstepG1(profile, control_dt_s=setup.controller.control_dt)
    model, data = robot_sim.physics.model, robot_sim.physics.data
    size = mujoco.mj_stateSize(model, STATE_SPEC)
    ticks: list[tuple] = []
    states: list[np.ndarray] = []
    driven = len(DRIVEN_MOTORS)

    def observe(state, output, pose) -> None:  # noqa: ANN001 - RobotState, StepOutput, BodyPose
        full = np.empty(size)
        mujoco.mj_getState(model, data, full, STATE_SPEC)
        states.append(full)
        policy = output.policy if output.mode is Mode.TRACKING else None
        action = np.zeros(driven, np.float32) if policy is None else np.asarray(policy.raw_action, np.float32)
        physics = robot_sim.physics
        ticks.append((policy is not None, action[:driven], pose.pelvis_pos, pose.pelvis_quat_wxyz,
                      data.qvel[0:3].copy(), physics.gyro(), physics.q().copy(), physics.dq().copy()))  # fmt: skip

    commands: list[MotorCommand] = []

    original = robot_sim.deliver

    def deliver(command: MotorCommand) -> None:
        original(command)
        commands.append(command)

    robot_sim.deliver = deliver  # type: ignore[method-assign]
    run_lockstep(setup, robot_sim, observe)
    columns = list(zip(*ticks))
    return LockstepSession(
        motion=motion, profile=profile, physics_hz=robot_sim.config.physics_rate_hz,
        control_dt=float(setup.controller.control_dt), state=np.array(states), commands=tuple(commands),
        tracking=np.array(columns[0]), raw_action=np.array(columns[1], np.float32),
        root_pos=np.array(columns[2]), root_quat_wxyz=np.array(columns[3]), lin_vel_world=np.array(columns[4]),
        ang_vel_body=np.array(columns[5]), q=np.array(columns[6]), dq=np.array(columns[7]),
    )  # fmt: skip


@dataclass(frozen=True)
class ExactReplay:
    """The body at ticks ``start .. start + ticks`` of an exact replay (row 0: the reset)."""

    root_pos: np.ndarray
    root_quat_wxyz: np.ndarray
    q: np.ndarray


def replay_exact(session: LockstepSession, start: int, ticks: int, pelvis_offset_m: np.ndarray | None = None) -> ExactReplay:
    """From tick ``start``'s full state (pelvis moved by ``pelvis_offset_m``, world frame), the recorded
    commands of ticks ``start ..`` stepped by a fresh simulator of the recording's profile and rate."""
    robot_sim = LockstepG1(session.profile, control_dt_s=session.control_dt)
    robot_sim.physics.band.enabled = False  # the motion runs off the band
    model, data = robot_sim.physics.model, robot_sim.physics.data
    mujoco.mj_setState(model, data, session.state[start], STATE_SPEC)
    if pelvis_offset_m is not None:
        data.qpos[0:3] += pelvis_offset_m
    mujoco.mj_forward(model, data)
    physics = robot_sim.physics
    pos, quat, q = [physics.pelvis_pos()], [physics.pelvis_quat_wxyz()], [physics.q().copy()]
    for k in range(start, start + ticks):
        robot_sim.deliver(session.commands[k])
        robot_sim.advance()
        pos.append(physics.pelvis_pos())
        quat.append(physics.pelvis_quat_wxyz())
        q.append(physics.q().copy())
    return ExactReplay(np.array(pos), np.array(quat), np.array(q))
