"""MuJoCo G1: motor-order joint access, pelvis IMU, elastic band, start pose on the ground."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import mujoco
import numpy as np

from asap_ros.core.errors import ConfigError
from asap_ros.sim.config import BandConfig
from asap_ros.sim.profile import RobotProfile
from asap_ros.sim.rotations import cross

GRAVITY = 9.81
FLOOR_GEOM = "floor"
PELVIS_BODY = "pelvis"


class ElasticBand:
    """A damped spring from a fixed anchor to a point on the robot (unitree_mujoco's ``ElasticBand``).

    ``f = (k (d - length) - c v) u`` with ``d`` the anchor distance, ``u`` the unit vector to the
    anchor and ``v`` the attachment point's speed along it. Lowering lengthens the band;
    releasing removes it.
    """

    def __init__(self, stiffness: float, damping: float, anchor: np.ndarray, length: float, enabled: bool):
        self.stiffness = stiffness
        self.damping = damping
        self.anchor = np.asarray(anchor, dtype=np.float64)
        self.length = length
        self.enabled = enabled

    def force(self, point: np.ndarray, velocity: np.ndarray) -> np.ndarray:
        if not self.enabled:
            return np.zeros(3)
        delta = self.anchor - point
        distance = math.sqrt(delta @ delta)
        direction = delta / distance
        speed = float(direction @ velocity)
        return (self.stiffness * (distance - self.length) - self.damping * speed) * direction

    def lower(self, metres: float) -> None:
        """Lengthen the band (negative: shorten), never below zero length."""
        self.length = max(0.0, self.length + metres)


JOINT_LIMIT_TIMECONST_S = 0.005
"""Joint-limit constraint time constant (s): near-rigid stops, as in ASAP's training simulator."""


class G1Physics:
    """The simulated G1 body. Joint arrays are in G1 motor order (the MJCF's actuator order)."""

    def __init__(
        self,
        model_path: str | Path,
        joint_names: Sequence[str],
        timestep: float,
        start_q: np.ndarray,
        profile: RobotProfile,
        band: BandConfig,
        config_source: str = "<sim config>",
        joint_limit_timeconst_s: float = JOINT_LIMIT_TIMECONST_S,
    ):
        self.model_path = str(model_path)
        self.model = mujoco.MjModel.from_xml_path(self.model_path)
        self.model.opt.timestep = timestep
        self._stiffen_joint_limits(joint_limit_timeconst_s)
        self.data = mujoco.MjData(self.model)
        self._bind_motors(list(joint_names))
        self._bind_pelvis()
        self._apply_profile(profile)
        self.total_mass = float(self.model.body_mass.sum())
        self._place_on_ground(np.asarray(start_q, dtype=np.float64))
        self.band = self._make_band(band, config_source)
        self._acc6 = np.zeros(6)

    # --- set-up -----------------------------------------------------------------------------
    def _stiffen_joint_limits(self, timeconst_s: float) -> None:
        """Make joint limits act like the G1's hard stops rather than MuJoCo's soft default.

        With the default constraint time constant (0.02 s) a landing pushes an ankle ~0.12 rad
        past its range; ASAP's actors were trained with near-rigid limits. MuJoCo needs the
        time constant to be at least two timesteps to stay stable.
        """
        m = self.model
        timeconst_s = max(timeconst_s, 2.0 * m.opt.timestep)
        limited = m.jnt_limited.astype(bool)
        m.jnt_solref[limited] = (timeconst_s, 1.0)

    def _bind_motors(self, joint_names: list[str]) -> None:
        m = self.model
        if m.nu != len(joint_names) or not (m.actuator_trntype == mujoco.mjtTrn.mjTRN_JOINT).all():
            raise ConfigError(self.model_path, "actuator", f"expected {len(joint_names)} joint motors, found {m.nu}")
        joint_ids = m.actuator_trnid[:, 0]
        names = [m.joint(j).name for j in joint_ids]
        if names != joint_names:
            raise ConfigError(self.model_path, "actuator", "motor order differs from the robot model", names)
        limits = m.actuator_ctrlrange
        if not m.actuator_ctrllimited.all() or not np.allclose(limits[:, 0], -limits[:, 1]):
            raise ConfigError(self.model_path, "actuator.ctrlrange", "every motor needs a symmetric effort limit")
        self.joint_names = tuple(names)
        self.effort_limit = limits[:, 1].copy()
        self._qpos = m.jnt_qposadr[joint_ids]
        self._dof = m.jnt_dofadr[joint_ids]

    def _bind_pelvis(self) -> None:
        m = self.model
        self.pelvis = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, PELVIS_BODY)
        free = [j for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
        if self.pelvis < 0 or len(free) != 1 or m.jnt_bodyid[free[0]] != self.pelvis or m.jnt_qposadr[free[0]] != 0:
            raise ConfigError(self.model_path, "pelvis", "the pelvis must be the one floating (free-joint) body")

    def _apply_profile(self, profile: RobotProfile) -> None:
        m = self.model
        for joint, value in profile.joint_friction.items():
            m.dof_frictionloss[self._dof[self.joint_names.index(joint)]] = value
        for joint, value in profile.joint_damping.items():
            m.dof_damping[self._dof[self.joint_names.index(joint)]] = value
        for body, offset in profile.mass_offset_kg.items():
            body_id = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, body)
            if body_id < 0:
                problem = f"unknown body name (not in {self.model_path})"
                raise ConfigError(profile.source, "mass_offset_kg", problem, body)
            mass = m.body_mass[body_id] + offset
            if mass <= 0.0:
                problem = f"leaves mass {mass:g} kg (must stay > 0)"
                raise ConfigError(profile.source, f"mass_offset_kg.{body}", problem, offset)
            m.body_inertia[body_id] *= mass / m.body_mass[body_id]
            m.body_mass[body_id] = mass
        mujoco.mj_setConst(m, self.data)

    def _place_on_ground(self, start_q: np.ndarray) -> None:
        """Start pose: ``start_q``, upright, lowest collision geometry touching the floor."""
        m, d = self.model, self.data
        floor = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, FLOOR_GEOM)
        if floor < 0:
            raise ConfigError(self.model_path, "geom", f"no geom named {FLOOR_GEOM!r}")
        d.qpos[:] = m.qpos0
        d.qpos[3:7] = (1.0, 0.0, 0.0, 0.0)
        d.qpos[self._qpos] = start_q
        mujoco.mj_kinematics(m, d)
        fromto = np.zeros(6)
        colliding = [
            g for g in range(m.ngeom) if m.geom_bodyid[g] != 0 and (m.geom_contype[g] or m.geom_conaffinity[g])
        ]
        clearance = min(mujoco.mj_geomDistance(m, d, g, floor, 10.0, fromto) for g in colliding)
        d.qpos[2] -= clearance
        d.qvel[:] = 0.0
        mujoco.mj_forward(m, d)

    def _make_band(self, config: BandConfig, source: str) -> ElasticBand:
        self._band_body = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, config.body)
        if self._band_body < 0:
            raise ConfigError(source, "band.body", f"no such body in {self.model_path}", config.body)
        self._band_point = np.array(config.point_m, dtype=np.float64)
        self._vel6 = np.zeros(6)
        point = self.band_point()
        anchor = np.array([point[0], point[1], config.anchor_height_m])
        distance = config.anchor_height_m - point[2]
        if distance <= 0:
            problem = f"must be above the band's attachment point ({point[2]:.2f} m at the start pose)"
            raise ConfigError(source, "band.anchor_height_m", problem, config.anchor_height_m)
        stretch = config.start_support * self.total_mass * GRAVITY / config.stiffness if config.stiffness else np.inf
        if config.start_support > 0 and stretch > distance:
            raise ConfigError(
                source, "band.start_support",
                f"a band of stiffness {config.stiffness:g} N/m anchored {distance:.2f} m above its attachment "
                f"cannot carry that fraction of {self.total_mass:.1f} kg", config.start_support,
            )
        length = distance - stretch if config.start_support > 0 else distance
        return ElasticBand(config.stiffness, config.damping, anchor, length, config.enabled)

    # --- stepping ---------------------------------------------------------------------------
    def step(self, tau: np.ndarray) -> None:
        """Apply motor torques (motor order) and the band force for one timestep."""
        d = self.data
        d.ctrl[:] = tau
        self._apply_band()
        mujoco.mj_step(self.model, d)

    def _apply_band(self) -> None:
        """Band force at its attachment point (a torque makes up for xfrc_applied acting at the CoM)."""
        m, d, b = self.model, self.data, self._band_body
        point = d.xpos[b] + d.xmat[b].reshape(3, 3) @ self._band_point
        mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_BODY, b, self._vel6, 0)  # [angular, linear at xpos]
        velocity = self._vel6[3:] + cross(self._vel6[:3], point - d.xpos[b])
        force = self.band.force(point, velocity)
        d.xfrc_applied[b, :3] = force
        d.xfrc_applied[b, 3:] = cross(point - d.xipos[b], force)

    def band_point(self) -> np.ndarray:
        """World position of the band's attachment point."""
        d, b = self.data, self._band_body
        return d.xpos[b] + d.xmat[b].reshape(3, 3) @ self._band_point

    def attach_band(self) -> None:
        """Hook the band on again, its anchor moved above the attachment point where the robot is
        now, as a gantry is moved over a robot that walked or fell away from where it started
        (from the start pose's anchor, a robot metres away would be dragged and swung)."""
        self.band.anchor[:2] = self.band_point()[:2]
        self.band.enabled = True

    # --- state ------------------------------------------------------------------------------
    @property
    def time(self) -> float:
        return float(self.data.time)

    @property
    def timestep(self) -> float:
        return float(self.model.opt.timestep)

    def q(self) -> np.ndarray:
        return self.data.qpos[self._qpos]

    def dq(self) -> np.ndarray:
        return self.data.qvel[self._dof]

    def ddq(self) -> np.ndarray:
        return self.data.qacc[self._dof]

    def pelvis_pos(self) -> np.ndarray:
        return self.data.qpos[0:3].copy()

    def pelvis_quat_wxyz(self) -> np.ndarray:
        return self.data.qpos[3:7].copy()

    def gyro(self) -> np.ndarray:
        """Pelvis angular velocity in the pelvis frame (the free joint's rotational velocity)."""
        return self.data.qvel[3:6].copy()

    def accelerometer(self) -> np.ndarray:
        """Pelvis specific force in the pelvis frame (reads +g upwards at rest), from the last step."""
        mujoco.mj_rnePostConstraint(self.model, self.data)  # body accelerations of the last step's state
        mujoco.mj_objectAcceleration(self.model, self.data, mujoco.mjtObj.mjOBJ_BODY, self.pelvis, self._acc6, 1)
        return self._acc6[3:6].copy()
