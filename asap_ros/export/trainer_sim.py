"""The nominal MuJoCo G1 with ASAP's delta-trainer semantics (``delta_a_open_loop.py`` at 91df82c).

- Physics at 200 Hz, one policy step every 4 physics steps (``isaacgym.yaml``: fps 200,
  control_decimation 4); the MJCF of ``config/sim.yaml``, the ``nominal`` profile, no band.
- Every physics step the torque is ``kp·(0.25·Δa + 0.25·a + default − q) − kd·dq``, clipped to
  the effort limits (``_compute_torques``: no joint-limit clamp of the target). With ``targets``
  ``runtime`` the target is first clipped to the joint limits as the runtime clips what it sends
  (:meth:`asap_ros.core.robot.RobotModel.clip_targets`): what the robot was commanded. Here MuJoCo's
  actuators compute it (gain kp on the target, bias ``−kp·q − kd·dq``, force range = effort
  limit): with the Euler integrator that is the same explicit PD, and ``mujoco.rollout`` can
  step many copies at once. Gains and default pose: ``config/g1_29dof.yaml`` (ASAP's); the six
  wrist joints (fixed on the training robot) are held all but rigid at 0.
- The delta model's observation (108 values, ``config/obs/delta_a/open_loop.yaml``) is built
  from the simulator: body-frame velocities, pelvis height, joint state, the world-frame
  contact force on each foot (``feet_contact_force``: the ankle-roll links), projected gravity.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from asap_ros.config.assets import asset_path
from asap_ros.config.paths import config_file
from asap_ros.config.robot import load_robot_model
from asap_ros.core.errors import ConfigError
from asap_ros.core.quaternion import quat_conjugate, quat_rotate
from asap_ros.export.delta import DELTA_INPUT_TERMS
from asap_ros.export.leg_odometry import StanceOdometry
from asap_ros.sim.config import BandConfig, load_sim_config
from asap_ros.sim.physics import G1Physics
from asap_ros.sim.profile import load_profile
from asap_ros.tracking.kinematics import DRIVEN_MOTORS

PHYSICS_HZ = 200.0
DECIMATION = 4
ACTION_SCALE = 0.25
WRIST_ARMATURE = 10.0
WRIST_DAMPING = 1000.0
"""Armature (kg m²) and damping (N m s/rad) of the wrist joints: against the 5 N m of their motors and
the hands' inertia their motion stays below a milliradian (MuJoCo integrates joint damping implicitly)."""
FEET = ("left_ankle_roll_link", "right_ankle_roll_link")
"""ASAP's ``feet`` bodies of the G1 (``foot_name: ankle_roll_link``), left first."""
GRAVITY_DIRECTION = np.array([0.0, 0.0, -1.0])
STATE_SPEC = mujoco.mjtState.mjSTATE_FULLPHYSICS
_SCALES = {term.name: term.scale for term in DELTA_INPUT_TERMS}
TRAINER_TARGETS, RUNTIME_TARGETS = "trainer", "runtime"
TARGET_SEMANTICS = (TRAINER_TARGETS, RUNTIME_TARGETS)
"""``trainer``: ASAP's unclamped PD target; ``runtime``: clipped to the joint limits like the deploy's."""


@dataclass(frozen=True)
class BodyState:
    """A recorded state to reset to: root pose and velocities (world frame), the 23 driven joints."""

    root_pos: np.ndarray
    root_quat_wxyz: np.ndarray
    lin_vel_world: np.ndarray
    ang_vel_world: np.ndarray
    dof: np.ndarray
    dof_vel: np.ndarray


class TrainerSim:
    """One MuJoCo G1 stepped the trainer's way; joint arrays in G1 motor order unless named ``driven``."""

    def __init__(self, physics_hz: float = PHYSICS_HZ, decimation: int = DECIMATION, sim_config: str | None = None,
                 targets: str = TRAINER_TARGETS, profile: str | None = None):  # fmt: skip
        """``profile``: a robot profile whose torque scale the motors get (``factor·clip(τ, ±L)``, as
        :mod:`asap_ros.sim.motors` scales): the simulator given a simulated robot's true defect."""
        if not physics_hz > 0 or decimation < 1:
            raise ConfigError(None, "--physics-hz/--decimation", "must be positive", (physics_hz, decimation))
        if targets not in TARGET_SEMANTICS:
            raise ConfigError(None, "--targets", f"must be one of {', '.join(TARGET_SEMANTICS)}", targets)
        self.target_semantics = targets
        """``trainer`` (no joint-limit clamp, ASAP's) or ``runtime`` (clipped as the deploy does)."""
        config = load_sim_config(sim_config)
        robot_file = config.robot if "/" in config.robot else config_file(config.robot)
        self.robot = load_robot_model(robot_file)
        nominal = load_profile("nominal", self.robot.joint_names)
        self.physics = G1Physics(asset_path(config.model), self.robot.joint_names, 1.0 / physics_hz,
                                 self.robot.default_q, nominal, BandConfig(enabled=False), config.source)  # fmt: skip
        self.model, self.data = self.physics.model, self.physics.data
        self.decimation = int(decimation)
        self.physics_hz = float(physics_hz)
        self.policy_dt = self.decimation / self.physics_hz
        self.default_q = np.asarray(self.robot.default_q, dtype=np.float64)
        self.driven_default = self.default_q[DRIVEN_MOTORS]
        self.kp = np.asarray(self.robot.kp, dtype=np.float64)
        self.kd = np.asarray(self.robot.kd, dtype=np.float64)
        self.effort_limit = self.physics.effort_limit.copy()
        self._make_pd_actuators()
        if profile is not None:
            self._scale_torque(load_profile(profile, self.robot.joint_names).torque_scale)
        self._hold_wrists()
        self.odometry = StanceOdometry(self.model)
        m = self.model
        joints = m.actuator_trnid[:, 0]
        self._qpos, self._qvel = m.jnt_qposadr[joints], m.jnt_dofadr[joints]
        self._driven_qpos, self._driven_qvel = self._qpos[DRIVEN_MOTORS], self._qvel[DRIVEN_MOTORS]
        self._feet = np.array([m.body(name).id for name in FEET])
        self._geom_foot = np.full(m.ngeom, -1)
        for n, body in enumerate(self._feet):
            self._geom_foot[m.geom_bodyid == body] = n
        pos, quat, dof = self.pose()
        self.start_state = BodyState(pos, quat, np.zeros(3), np.zeros(3), dof, np.zeros(len(dof)))
        """The default pose standing on the floor, at rest."""
        self.state_size = mujoco.mj_stateSize(m, STATE_SPEC)
        self._qpos_offset = mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_TIME)
        self._force6 = np.zeros(6)
        self.description = (f"{config.model}, {self.physics_hz:g} Hz physics, policy every {self.decimation} steps, "
                            f"{profile or 'nominal'} profile, PD kp·(target − q) − kd·dq clipped to the effort limits, target "
                            + ("0.25·(a + Δa) + default (trainer: unclamped)" if targets == TRAINER_TARGETS else
                               "clip(0.25·(a + Δa) + default, joint limits) (runtime)"))  # fmt: skip

    def _make_pd_actuators(self) -> None:
        """Turn the MJCF's torque motors into the PD law on a position target (ctrl)."""
        m = self.model
        m.actuator_gaintype[:] = mujoco.mjtGain.mjGAIN_FIXED
        m.actuator_biastype[:] = mujoco.mjtBias.mjBIAS_AFFINE
        m.actuator_gainprm[:] = 0.0
        m.actuator_biasprm[:] = 0.0
        m.actuator_gainprm[:, 0] = self.kp
        m.actuator_biasprm[:, 1] = -self.kp
        m.actuator_biasprm[:, 2] = -self.kd
        m.actuator_ctrllimited[:] = 0
        m.actuator_forcelimited[:] = 1
        m.actuator_forcerange[:, 0] = -self.effort_limit
        m.actuator_forcerange[:, 1] = self.effort_limit
        if m.opt.integrator != mujoco.mjtIntegrator.mjINT_EULER:
            raise ConfigError(self.physics.model_path, "option.integrator",
                              "the trainer's explicit PD needs MuJoCo's Euler integrator", int(m.opt.integrator))  # fmt: skip

    def _scale_torque(self, scale: np.ndarray) -> None:
        """Motor j delivers ``scale[j]·clip(τ, ±L)`` (PD gains and force range scaled alike)."""
        m, factor = self.model, np.asarray(scale, dtype=np.float64)[:, None]
        m.actuator_gainprm[:, :1] *= factor
        m.actuator_biasprm[:, :3] *= factor
        m.actuator_forcerange *= factor

    def _hold_wrists(self) -> None:
        """Make the six wrist joints (not on the training robot, whose wrists are fixed) all but rigid."""
        m = self.model
        wrists = [i for i in range(len(self.default_q)) if i not in set(DRIVEN_MOTORS.tolist())]
        dofs = m.jnt_dofadr[m.actuator_trnid[wrists, 0]]
        m.dof_armature[dofs] = WRIST_ARMATURE
        m.dof_damping[dofs] = WRIST_DAMPING

    # --- targets and stepping -----------------------------------------------------------------
    def targets(self, action: np.ndarray, delta: np.ndarray, delta_scale: float = ACTION_SCALE) -> np.ndarray:
        """(..., 29) PD targets: driven joints ``delta_scale·Δa + 0.25·a + default``, wrists 0; with ``runtime``
        targets clipped to the joint limits by the runtime's own clip."""
        action = np.asarray(action, dtype=np.float64)
        ctrl = np.broadcast_to(self.default_q, action.shape[:-1] + (len(self.default_q),)).copy()
        ctrl[..., DRIVEN_MOTORS] = delta_scale * np.asarray(delta, dtype=np.float64) + ACTION_SCALE * action
        ctrl[..., DRIVEN_MOTORS] += self.driven_default
        if self.target_semantics == RUNTIME_TARGETS:
            self.robot.clip_targets(ctrl, out=ctrl)
        return ctrl

    @property
    def clamps_targets(self) -> bool:
        """The PD targets are clipped to the joint limits (``runtime`` semantics)."""
        return self.target_semantics == RUNTIME_TARGETS

    def reset(self, state: BodyState, leg_odometry: bool = False) -> str | None:
        """Put the body in ``state`` (angular velocity rotated into the free joint's body frame).

        With ``leg_odometry`` the pelvis linear velocity is the stance foot's
        (:class:`~asap_ros.export.leg_odometry.StanceOdometry`), ``state.lin_vel_world`` only where no
        foot is planted; returns where it came from (``None`` without)."""
        d = self.data
        mujoco.mj_resetData(self.model, d)
        d.qpos[0:3] = state.root_pos
        d.qpos[3:7] = state.root_quat_wxyz / np.linalg.norm(state.root_quat_wxyz)
        d.qvel[0:3] = state.lin_vel_world
        d.qvel[3:6] = quat_rotate(quat_conjugate(d.qpos[3:7]), state.ang_vel_world)
        d.qpos[self._driven_qpos] = state.dof
        d.qvel[self._driven_qvel] = state.dof_vel
        d.ctrl[:] = self.default_q
        if leg_odometry:
            return self.odometry.set_pelvis_velocity(d, state.lin_vel_world)
        mujoco.mj_forward(self.model, d)
        return None

    def step(self, ctrl: np.ndarray) -> None:
        """One policy step: ``decimation`` physics steps with the PD on ``ctrl`` (29 targets)."""
        self.data.ctrl[:] = ctrl
        for _ in range(self.decimation):
            mujoco.mj_step(self.model, self.data)

    def physics_step(self, ctrl: np.ndarray) -> None:
        """One physics step with the PD on ``ctrl`` (29 targets)."""
        self.data.ctrl[:] = ctrl
        mujoco.mj_step(self.model, self.data)

    def state(self) -> np.ndarray:
        """The full physics state vector (for :func:`mujoco.rollout`)."""
        out = np.empty(self.state_size)
        mujoco.mj_getState(self.model, self.data, out, STATE_SPEC)
        return out

    def qpos_of(self, states: np.ndarray) -> np.ndarray:
        """(..., nq) positions in state vectors."""
        return states[..., self._qpos_offset : self._qpos_offset + self.model.nq]

    def qvel_of(self, states: np.ndarray) -> np.ndarray:
        """(..., nv) velocities in state vectors."""
        start = self._qpos_offset + self.model.nq
        return states[..., start : start + self.model.nv]

    def driven_of_qpos(self, qpos: np.ndarray) -> np.ndarray:
        return qpos[..., self._driven_qpos]

    def driven_of_qvel(self, qvel: np.ndarray) -> np.ndarray:
        return qvel[..., self._driven_qvel]

    def pose(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Root position, root orientation (w, x, y, z) and the 23 driven joint angles now."""
        q = self.data.qpos
        return q[0:3].copy(), q[3:7].copy(), q[self._driven_qpos].copy()

    def velocities(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Root linear and angular velocity (world frame) and the 23 driven joint velocities now."""
        q, v = self.data.qpos, self.data.qvel
        return v[0:3].copy(), quat_rotate(q[3:7], v[3:6]), v[self._driven_qvel].copy()

    # --- the delta model's observation --------------------------------------------------------
    def feet_contact_force(self) -> np.ndarray:
        """(6,) world-frame contact force on the left then the right foot, N (as IsaacGym's net contact force)."""
        m, d, force = self.model, self.data, self._force6
        out = np.zeros((2, 3))
        for i in range(d.ncon):
            contact = d.contact[i]
            foot1, foot2 = self._geom_foot[contact.geom1], self._geom_foot[contact.geom2]
            if foot1 < 0 and foot2 < 0:
                continue
            mujoco.mj_contactForce(m, d, i, force)
            world = contact.frame.reshape(3, 3).T @ force[:3]  # force of geom1 on geom2, world frame
            if foot2 >= 0:
                out[foot2] += world
            if foot1 >= 0:
                out[foot1] -= world
        return out.reshape(6)

    def delta_observation(self, previous_delta: np.ndarray, action_open_loop: np.ndarray) -> np.ndarray:
        """(108,) float32 input of the open-loop delta model, terms in alphabetical order, scaled."""
        d = self.data
        quat = d.qpos[3:7]
        inverse = quat_conjugate(quat)
        values = {
            "actions": previous_delta,
            "actions_open_loop": action_open_loop,
            "base_ang_vel": d.qvel[3:6],
            "base_lin_vel": quat_rotate(inverse, d.qvel[0:3]),
            "base_pos_z": d.qpos[2:3],
            "dof_pos": d.qpos[self._driven_qpos] - self.driven_default,
            "dof_vel": d.qvel[self._driven_qvel],
            "feet_contact_force": self.feet_contact_force(),
            "projected_gravity": quat_rotate(inverse, GRAVITY_DIRECTION),
        }
        return np.concatenate([np.asarray(values[t.name], dtype=np.float64) * _SCALES[t.name]
                               for t in DELTA_INPUT_TERMS]).astype(np.float32)  # fmt: skip

