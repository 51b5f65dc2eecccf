"""``asap-ros rollout --policy IMPORTED.yaml``: a trainer actor (``policy import``) on the simulated
G1, lock-step in one process (the ``rollout`` yardstick's physics, motors and wire format).

The run: the band holds the robot while its joints blend in ``--stand-up-s`` (default 2 s) to the
actor's start pose (a BeyondMimic motion's first frame, else the contract's default pose) at the
contract's gains; the band is released and the actor runs: a motion to its end, a locomotion actor
through its ``--command VX,VY,WZ[:SECONDS]`` segments (in order; 10 s when no time is given). This
harness has no safety state machine: it measures the actor, it is not the deploy path.

Summary (``summary.json``): fell (pelvis below ``FALL_HEIGHT_M`` or tilted beyond
``FALL_TILT_DEG``), per command segment the distance travelled, the mean velocity in the heading
frame and the yaw rate against the command; for a BeyondMimic motion the mean joint error to the
model's own reference and the anchor orientation error (and, 160 variant, the anchor position
error, the simulator's ground truth standing in for motion capture).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

FALL_HEIGHT_M = 0.45
"""Pelvis height (m) under which the robot counts as fallen (standing: ~0.75 m)."""
FALL_TILT_DEG = 60.0
DEFAULT_SEGMENT_S = 10.0


def parse_commands(texts: list[str] | None) -> list[tuple[np.ndarray, float]]:
    """``VX,VY,WZ[:SECONDS]`` -> [(command, seconds)]; refuses anything else naming the text."""
    from asap_ros.core.errors import ConfigError

    segments = []
    for text in texts or []:
        body, _, seconds = text.partition(":")
        try:
            values = [float(v) for v in body.split(",")]
            duration = float(seconds) if seconds else DEFAULT_SEGMENT_S
        except ValueError:
            raise ConfigError("--command", None, "must be VX,VY,WZ[:SECONDS] (m/s, m/s, rad/s, s)", text) from None
        if len(values) != 3 or duration <= 0 or not all(math.isfinite(v) for v in values):
            raise ConfigError("--command", None, "must be VX,VY,WZ[:SECONDS] (m/s, m/s, rad/s, s)", text)
        segments.append((np.array(values), duration))
    return segments


def _tilt_deg(quat: np.ndarray) -> float:
    w, x, y, z = quat
    return math.degrees(math.acos(max(-1.0, min(1.0, 1.0 - 2.0 * (x * x + y * y)))))


def run_actor(spec: Path, commands: list[str] | None, profile: str, stand_up_s: float | None, out: Path) -> int:
    import mujoco

    from asap_ros.commands.rollout import LockstepG1
    from asap_ros.config.actor_spec import load_actor_spec
    from asap_ros.config.robot import load_robot_model
    from asap_ros.core.quaternion import quat_conjugate, quat_multiply, quat_rotate, quat_to_rotvec, yaw_of
    from asap_ros.core.state import JointCommand
    from asap_ros.runtime.trainer_step import TrainerStep, start_pose

    robot = load_robot_model()
    contract = load_actor_spec(spec, robot)
    segments = parse_commands(commands)
    if contract.motion_steps is None and not segments:
        segments = [(np.zeros(3), DEFAULT_SEGMENT_S)]
    robot_sim = LockstepG1(profile, control_dt_s=contract.control_dt)
    physics = robot_sim.physics
    torso = mujoco.mj_name2id(physics.model, mujoco.mjtObj.mjOBJ_BODY, "torso_link")
    stepper = TrainerStep(contract, robot)
    target_pose = start_pose(contract, robot)
    dt = contract.control_dt
    began = time.monotonic()

    def send(q: np.ndarray) -> None:
        robot_sim.command(JointCommand(q=q, kp=contract.kp.copy(), kd=contract.kd.copy()))
        robot_sim.advance()

    first = robot_sim.read_state().q.copy()
    blend_steps = max(1, round((2.0 if stand_up_s is None else stand_up_s) / dt))
    for k in range(blend_steps):
        send(first + (target_pose - first) * min(1.0, (k + 1) / (0.75 * blend_steps)))
    robot_sim.band("band_release")

    state = robot_sim.read_state()
    stepper.reset(state)
    if contract.needs_mocap:
        stepper.align_position(physics.data.xpos[torso].copy())
    fell_at: float | None = None
    joint_err, ori_err, pos_err = [], [], []
    seg_reports: list[dict[str, Any]] = []
    plan = segments if contract.motion_steps is None else [(np.zeros(3), contract.motion_steps * dt)]
    t_actor = 0.0
    for command, duration in plan:
        applied = stepper.set_command(command)
        start_pos, start_yaw = physics.pelvis_pos(), float(yaw_of(physics.pelvis_quat_wxyz()))
        velocities, yaw_rates = [], []
        for _ in range(round(duration / dt)):
            state = robot_sim.read_state()
            mocap = None
            if contract.needs_mocap:
                quat = physics.pelvis_quat_wxyz()
                mocap = (physics.data.xpos[torso].copy(), quat_rotate(quat_conjugate(quat), physics.data.qvel[0:3]))
            output = stepper.step(state, mocap)
            send(output.q_target)
            t_actor += dt
            quat = physics.pelvis_quat_wxyz()
            heading = float(yaw_of(quat))
            v_world = physics.data.qvel[0:3]
            c, s = math.cos(heading), math.sin(heading)
            velocities.append((c * v_world[0] + s * v_world[1], -s * v_world[0] + c * v_world[1]))
            yaw_rates.append(float(physics.data.qvel[5]))  # body z rate, ~ yaw rate when upright
            if output.reference_q is not None:
                joint_err.append(float(np.mean(np.abs(physics.q()[contract.motor_indices]
                                                       - output.reference_q[contract.motor_indices]))))  # fmt: skip
                torso_quat = physics.data.xquat[torso].copy()
                relative = quat_multiply(quat_conjugate(torso_quat), output.reference_anchor_quat)
                ori_err.append(math.degrees(float(np.linalg.norm(quat_to_rotvec(relative)))))
                if contract.needs_mocap:
                    pos_err.append(float(np.linalg.norm(physics.data.xpos[torso] - output.reference_anchor_pos)))
            if fell_at is None and (physics.pelvis_pos()[2] < FALL_HEIGHT_M or _tilt_deg(quat) > FALL_TILT_DEG):
                fell_at = t_actor
            if output.done:
                break
        moved = physics.pelvis_pos() - start_pos
        velocity = np.mean(velocities, axis=0) if velocities else np.zeros(2)
        turned = (float(yaw_of(physics.pelvis_quat_wxyz())) - start_yaw + math.pi) % (2 * math.pi) - math.pi
        seg_reports.append({
            "command": [float(v) for v in applied], "seconds": duration,
            "distance_m": float(np.hypot(moved[0], moved[1])),
            "mean_velocity_heading_m_s": [float(v) for v in velocity],
            "velocity_error_m_s": float(np.hypot(velocity[0] - applied[0], velocity[1] - applied[1])),
            "mean_yaw_rate_rad_s": float(np.mean(yaw_rates)) if yaw_rates else 0.0,
            "yaw_rate_error_rad_s": abs(float(np.mean(yaw_rates)) - float(applied[2])) if yaw_rates else 0.0,
            "turned_rad": turned,
        })  # fmt: skip
    summary: dict[str, Any] = {
        "actor": contract.name, "trainer": contract.trainer, "spec": str(spec), "profile": profile,
        "fell": fell_at is not None, "fell_at_s": fell_at, "actor_time_s": t_actor,
        "motion_steps": contract.motion_steps, "steps_run": stepper.time_step,
        "segments": seg_reports if contract.motion_steps is None else [],
        "wall_time_s": time.monotonic() - began,
    }  # fmt: skip
    if joint_err:
        summary["tracking"] = {"mean_joint_error_rad": float(np.mean(joint_err)),
                               "mean_anchor_orientation_error_deg": float(np.mean(ori_err)),
                               **({"mean_anchor_position_error_m": float(np.mean(pos_err))} if pos_err else {})}
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    return 1 if fell_at is not None else 0
