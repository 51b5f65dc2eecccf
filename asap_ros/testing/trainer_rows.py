"""Motion rows written by the trainer simulator itself, for a robot whose motors give known torque factors.

The "real robot" is :class:`asap_ros.export.trainer_sim.TrainerSim` with each motor's PD gains
and effort limit multiplied by its factor (``factor·clip(τ, ±L)``, as :mod:`asap_ros.sim.motors`
scales), driven from a standing pose by smooth known actions and
saved as ASAP saves a motion: row i = the state after action i, and action i. Replaying the
rows with factors 1 and a perfect delta must reproduce them; the nominal replay must not.
"""

from __future__ import annotations

import numpy as np

from asap_ros.core.quaternion import quat_conjugate, quat_rotate, quat_to_rotvec
from asap_ros.export.motion_rows import MotionRows
from asap_ros.export.trainer_sim import TrainerSim
from asap_ros.tracking.kinematics import NUM_DRIVEN

AMPLITUDE = 0.8
"""Raw action amplitude (0.2 rad of target about the default pose): every target stays inside the
joint limits (the ankle rolls', ±0.26 rad, are the narrowest), so no clamp is involved unless
``action_offset`` pushes a joint's actions past a limit (as ASAP's actors do the ankle rolls); a
simulator with ``runtime`` targets then clips them, like the robot."""


def simulated_rows(torque_scale: np.ndarray | float = 1.0, steps: int = 120, seed: int = 0,
                   motion: str = "simulated", sim: TrainerSim | None = None,
                   action_offset: np.ndarray | float = 0.0) -> MotionRows:  # fmt: skip
    """``steps`` rows of a robot at ``torque_scale`` (one factor, or 29 in motor order), raw actions
    offset by ``action_offset`` (23, or one value)."""
    sim = sim or TrainerSim()
    model = sim.model
    saved = model.actuator_gainprm.copy(), model.actuator_biasprm.copy(), model.actuator_forcerange.copy()
    factor = np.broadcast_to(np.asarray(torque_scale, dtype=np.float64), (model.nu,))[:, None]
    model.actuator_gainprm[:, :1] *= factor  # s·(kp·target − kp·q − kd·dq), clipped to s·effort limit
    model.actuator_biasprm[:, :3] *= factor
    model.actuator_forcerange *= factor
    try:
        rng = np.random.default_rng(seed)
        frequency, phase = rng.uniform(0.5, 1.5, NUM_DRIVEN), rng.uniform(0, 2 * np.pi, NUM_DRIVEN)
        times = (np.arange(steps + 1)) * sim.policy_dt
        actions = AMPLITUDE * np.sin(2 * np.pi * frequency * times[:, None] + phase) + action_offset
        actions = actions.astype(np.float32)
        sim.reset(sim.start_state)
        pos, quat, dof = np.empty((steps, 3)), np.empty((steps, 4)), np.empty((steps, NUM_DRIVEN))
        lin, ang, dof_vel = np.empty((steps, 3)), np.empty((steps, 3)), np.empty((steps, NUM_DRIVEN))
        for i in range(steps):
            sim.step(sim.targets(actions[i], np.zeros(NUM_DRIVEN)))
            pos[i], quat[i], dof[i] = sim.pose()
            lin[i], ang[i], dof_vel[i] = sim.velocities()
    finally:
        model.actuator_gainprm[:], model.actuator_biasprm[:], model.actuator_forcerange[:] = saved
    return MotionRows(name=f"{motion}_seed{seed}", motion=motion, source="<trainer simulator>", fps=1 / sim.policy_dt,
                      root_pos=pos, root_quat_wxyz=quat, dof=dof, action=actions[:steps], root_lin_vel_world=lin,
                      root_ang_vel_world=ang, dof_vel=dof_vel)  # fmt: skip


def export_fields(rows: MotionRows, action: np.ndarray, axes: np.ndarray) -> dict:
    """``rows`` as an ``asap-ros export --format asap`` motion entry (with ``action`` as given, and the
    gyro: the body-frame angular velocity); ``axes``: the driven joints' axes (``pose_aa``)."""
    pose = np.concatenate([quat_to_rotvec(rows.root_quat_wxyz)[:, None], axes[None] * rows.dof[:, :, None],
                           np.zeros((len(rows), 3, 3))], axis=1)  # fmt: skip
    fields = {"root_trans_offset": rows.root_pos.astype(np.float32), "pose_aa": pose.astype(np.float32),
              "dof": rows.dof.astype(np.float32), "action": action.astype(np.float32), "fps": rows.fps,
              "root_lin_vel": rows.root_lin_vel_world, "root_ang_vel": rows.root_ang_vel_world, "dof_vel": rows.dof_vel}
    if rows.root_ang_vel_world is not None:
        fields["gyro"] = quat_rotate(quat_conjugate(rows.root_quat_wxyz), rows.root_ang_vel_world)
    return fields
