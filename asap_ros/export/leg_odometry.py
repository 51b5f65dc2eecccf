"""The pelvis linear velocity a reset takes from what the robot measures: stance-foot leg odometry.

The G1 measures its angular velocity (gyro) and joint velocities, not its linear velocity; a
velocity differentiated from motion capture is off by a few cm/s (the fit's bandwidth and noise),
and pushed into a planted foot that is a jolt the open loop carries through the window. With the
pelvis pose, joint angles, joint velocities and angular velocity in place, the lower foot is taken
to stand still when it is within :data:`STANCE_CLEARANCE_M` of the floor and planted (its speed
with the fallback velocity below :data:`PLANTED_SPEED_M_S`): the pelvis linear velocity is the one
that keeps it still. Otherwise the fallback (motion capture) stays.

One code path for every reset from a recording: ``gap``'s replay and ``openloop``/``delta fit``'s
``--reset-velocity measured``.
"""

from __future__ import annotations

import mujoco
import numpy as np

from asap_ros.sim.physics import FLOOR_GEOM

FEET = ("left_ankle_roll_link", "right_ankle_roll_link")
STANCE_CLEARANCE_M = 0.003
"""A foot this close to the floor at a reset is taken to be standing (its velocity is zero);
loaded feet sink about 1 mm into MuJoCo's soft floor."""
PLANTED_SPEED_M_S = 0.25
"""...and planted: its speed with the fallback pelvis velocity is below this, m/s (mocap noise is a few cm/s)."""
STANCE, FALLBACK = "stance", "mocap"
"""Where a reset's pelvis linear velocity came from: leg odometry, or the fallback (motion capture)."""


class StanceOdometry:
    """Leg odometry on one MuJoCo G1 model (its floor geom and the two feet's colliding geoms)."""

    def __init__(self, model: mujoco.MjModel):
        self.model = model
        self._floor = model.geom(FLOOR_GEOM).id
        colliding = [g for g in range(model.ngeom) if model.geom_contype[g] or model.geom_conaffinity[g]]
        self._foot_geoms = {foot: [g for g in colliding if model.geom_bodyid[g] == foot]
                            for foot in (model.body(name).id for name in FEET)}  # fmt: skip
        self._velocity = np.zeros(6)
        self._fromto = np.zeros(6)

    def set_pelvis_velocity(self, data: mujoco.MjData, fallback_lin_vel_world: np.ndarray) -> str:
        """Set ``data.qvel[0:3]`` (world frame, m/s) from the stance foot, else to the fallback; returns
        :data:`STANCE` or :data:`FALLBACK`. Positions, angular and joint velocities must be set; ends
        with ``mj_forward``."""
        model = self.model
        data.qvel[0:3] = 0.0
        mujoco.mj_forward(model, data)
        clearance = {foot: self._clearance(data, geoms) for foot, geoms in self._foot_geoms.items()}
        stance = min(clearance, key=clearance.__getitem__)  # the lower foot carries the weight
        mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_BODY, stance, self._velocity, 0)
        relative = self._velocity[3:].copy()  # foot velocity with the pelvis at rest; it adds the pelvis velocity
        fallback = np.asarray(fallback_lin_vel_world, dtype=np.float64)
        planted = np.linalg.norm(fallback + relative) < PLANTED_SPEED_M_S
        if clearance[stance] < STANCE_CLEARANCE_M and planted:
            data.qvel[0:3], source = -relative, STANCE
        else:
            data.qvel[0:3], source = fallback, FALLBACK
        mujoco.mj_forward(model, data)
        return source

    def _clearance(self, data: mujoco.MjData, geoms: list[int]) -> float:
        """Distance from the floor to the nearest of ``geoms`` (negative: penetrating), m."""
        return min(mujoco.mj_geomDistance(self.model, data, g, self._floor, 10 * STANCE_CLEARANCE_M, self._fromto)
                   for g in geoms)  # fmt: skip
