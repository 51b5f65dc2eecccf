"""``asap-ros rollout --policy IMPORTED.yaml``: a trainer actor (``policy import``) on the simulated
G1, lock-step in one process (the ``rollout`` yardstick's physics, motors and wire format).

The run: the band holds the robot while its joints blend in ``--stand-up-s`` (default 2 s) to the
actor's start pose (a BeyondMimic motion's first frame, else the contract's default pose) at the
contract's gains; the band is released and the actor runs: a motion to its end, a locomotion actor
through its ``--command VX,VY,WZ[:SECONDS]`` segments (in order; 10 s when no time is given). A
``--command MOTION`` segment switches to the ``--motion SPEC`` actor straight from the locomotion
actor's stance: the motion starts only if every joint is within
:data:`~asap_ros.core.actor_contract.START_POSE_BOUND_RAD` of its first frame (else the run stops,
naming the joints and their offsets), runs to its end and hands back to the locomotion actor. (A
PD blend to the first frame while standing free, or an upper-body blend under holosoma, made the
G1 fall or step away here; BeyondMimic's actors start well from holosoma's stance.) This harness
has no safety state machine: it measures the actors, it is not the deploy path.

With ``--dump-obs`` every actor step is also written to ``steps.npz``: ``t_s``, ``segment``,
``time_step`` (of a motion in the model; a locomotion actor's step count), ``q``, ``q_target``,
``reference_q`` (the model's own, NaN without one) and per segment ``obs_<i>``, ``actions_<i>``.

Summary (``summary.json``): fell (pelvis below ``FALL_HEIGHT_M`` or tilted beyond
``FALL_TILT_DEG``), per command segment the distance travelled, the mean velocity in the heading
frame and the yaw rate against the command; per motion the mean joint error to the model's own
reference and the anchor orientation error (and, 160 variant, the anchor position error, the
simulator's ground truth standing in for motion capture).
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
MOTION = "MOTION"


def parse_commands(texts: list[str] | None) -> list[tuple[np.ndarray, float] | str]:
    """``VX,VY,WZ[:SECONDS]`` or ``MOTION`` -> [(command, seconds) | MOTION]; refuses anything else
    naming the text."""
    from asap_ros.core.errors import ConfigError

    segments: list[tuple[np.ndarray, float] | str] = []
    for text in texts or []:
        if text == MOTION:
            segments.append(MOTION)
            continue
        body, _, seconds = text.partition(":")
        try:
            values = [float(v) for v in body.split(",")]
            duration = float(seconds) if seconds else DEFAULT_SEGMENT_S
        except ValueError:
            raise ConfigError("--command", None, "must be VX,VY,WZ[:SECONDS] (m/s, m/s, rad/s, s) or MOTION", text) from None
        if len(values) != 3 or duration <= 0 or not all(math.isfinite(v) for v in values):
            raise ConfigError("--command", None, "must be VX,VY,WZ[:SECONDS] (m/s, m/s, rad/s, s) or MOTION", text)
        segments.append((np.array(values), duration))
    return segments


def _tilt_deg(quat: np.ndarray) -> float:
    w, x, y, z = quat
    return math.degrees(math.acos(max(-1.0, min(1.0, 1.0 - 2.0 * (x * x + y * y)))))


class ActorSession:
    """The lock-step G1 and the actors on it; every step goes through :meth:`send`."""

    def __init__(self, profile: str, control_dt: float):
        import mujoco

        from asap_ros.commands.rollout import LockstepG1

        self.sim = LockstepG1(profile, control_dt_s=control_dt)
        self.physics = self.sim.physics
        self.torso = mujoco.mj_name2id(self.physics.model, mujoco.mjtObj.mjOBJ_BODY, "torso_link")
        self.dt = control_dt
        self.t_s = 0.0
        self.fell_at: float | None = None
        self.rows: list[tuple[Any, ...]] = []
        """Per actor step: (t_s, segment, time_step, q, q_target, obs, raw_action, reference_q)."""

    def record(self, segment: int, state: Any, output: Any) -> None:
        reference = output.reference_q if output.reference_q is not None else np.full(29, np.nan)
        self.rows.append((self.t_s, segment, output.time_step, state.q.copy(), output.q_target.copy(),
                          output.obs.copy(), output.raw_action.copy(), reference))  # fmt: skip

    def save(self, path: Path) -> None:
        """The recorded steps as one npz (obs and actions keep each actor's width: one array per
        segment), the time step of a motion in the model beside each row."""
        columns = list(zip(*self.rows)) if self.rows else [[]] * 8
        segments = np.array(columns[1], dtype=np.int64)
        data: dict[str, np.ndarray] = {
            "t_s": np.array(columns[0]), "segment": segments, "time_step": np.array(columns[2], dtype=np.int64),
            "q": np.array(columns[3]), "q_target": np.array(columns[4]), "reference_q": np.array(columns[7]),
        }  # fmt: skip
        for segment in sorted(set(segments.tolist())):
            rows = [r for r in self.rows if r[1] == segment]
            data[f"obs_{segment}"] = np.array([r[5] for r in rows], dtype=np.float32)
            data[f"actions_{segment}"] = np.array([r[6] for r in rows], dtype=np.float32)
        np.savez(path, **data)

    def send(self, q: np.ndarray, kp: np.ndarray, kd: np.ndarray) -> None:
        from asap_ros.core.state import JointCommand

        self.sim.command(JointCommand(q=q, kp=kp.copy(), kd=kd.copy()))
        self.sim.advance()
        self.t_s += self.dt
        quat = self.physics.pelvis_quat_wxyz()
        fallen = self.physics.pelvis_pos()[2] < FALL_HEIGHT_M or _tilt_deg(quat) > FALL_TILT_DEG
        if self.fell_at is None and fallen:
            self.fell_at = self.t_s

    def blend(self, pose: np.ndarray, seconds: float, kp: np.ndarray, kd: np.ndarray) -> None:
        """Linear blend of every joint from where it is to ``pose`` in 3/4 of ``seconds``, then held."""
        first = self.sim.read_state().q.copy()
        steps = max(1, round(seconds / self.dt))
        for k in range(steps):
            self.send(first + (pose - first) * min(1.0, (k + 1) / (0.75 * steps)), kp, kd)

    def mocap(self) -> tuple[np.ndarray, np.ndarray]:
        from asap_ros.core.quaternion import quat_conjugate, quat_rotate

        quat = self.physics.pelvis_quat_wxyz()
        return self.physics.data.xpos[self.torso].copy(), quat_rotate(quat_conjugate(quat), self.physics.data.qvel[0:3])

    def walk(self, stepper: Any, command: np.ndarray, duration: float, segment: int = 0) -> dict[str, Any]:
        from asap_ros.core.quaternion import yaw_of

        physics = self.physics
        applied = stepper.set_command(command)
        start_pos, start_yaw = physics.pelvis_pos(), float(yaw_of(physics.pelvis_quat_wxyz()))
        velocities, yaw_rates = [], []
        for _ in range(round(duration / self.dt)):
            state = self.sim.read_state()
            output = stepper.step(state)
            self.record(segment, state, output)
            self.send(output.q_target, stepper.contract.kp, stepper.contract.kd)
            heading = float(yaw_of(physics.pelvis_quat_wxyz()))
            v_world, c, s = physics.data.qvel[0:3], math.cos(heading), math.sin(heading)
            velocities.append((c * v_world[0] + s * v_world[1], -s * v_world[0] + c * v_world[1]))
            yaw_rates.append(float(physics.data.qvel[5]))  # body z rate, ~ the yaw rate when upright
        moved = physics.pelvis_pos() - start_pos
        velocity, yaw_rate = np.mean(velocities, axis=0), float(np.mean(yaw_rates))
        turned = (float(yaw_of(physics.pelvis_quat_wxyz())) - start_yaw + math.pi) % (2 * math.pi) - math.pi
        return {
            "command": [float(v) for v in applied], "seconds": duration,
            "distance_m": float(np.hypot(moved[0], moved[1])),
            "mean_velocity_heading_m_s": [float(v) for v in velocity],
            "velocity_error_m_s": float(np.hypot(velocity[0] - applied[0], velocity[1] - applied[1])),
            "mean_yaw_rate_rad_s": yaw_rate, "yaw_rate_error_rad_s": abs(yaw_rate - float(applied[2])),
            "turned_rad": turned,
        }  # fmt: skip

    def motion(self, stepper: Any, segment: int = 0) -> dict[str, Any]:
        from asap_ros.core.quaternion import quat_conjugate, quat_multiply, quat_to_rotvec

        physics, contract = self.physics, stepper.contract
        stepper.reset(self.sim.read_state())
        if contract.needs_mocap:
            stepper.align_position(physics.data.xpos[self.torso].copy())
        joint_err, ori_err, pos_err = [], [], []
        began = self.t_s
        while True:
            mocap = self.mocap() if contract.needs_mocap else None
            state = self.sim.read_state()
            output = stepper.step(state, mocap)
            self.record(segment, state, output)
            self.send(output.q_target, contract.kp, contract.kd)
            if output.reference_q is not None:
                actor_q = contract.motor_indices
                joint_err.append(float(np.mean(np.abs(physics.q()[actor_q] - output.reference_q[actor_q]))))
                relative = quat_multiply(quat_conjugate(physics.data.xquat[self.torso].copy()),
                                         output.reference_anchor_quat)  # fmt: skip
                ori_err.append(math.degrees(float(np.linalg.norm(quat_to_rotvec(relative)))))
                if contract.needs_mocap:
                    pos_err.append(float(np.linalg.norm(physics.data.xpos[self.torso] - output.reference_anchor_pos)))
            if output.done:
                break
        report: dict[str, Any] = {"motion": contract.name, "steps_run": stepper.time_step,
                                  "motion_steps": contract.motion_steps, "seconds": self.t_s - began}  # fmt: skip
        if joint_err:
            report["tracking"] = {"mean_joint_error_rad": float(np.mean(joint_err)),
                                  "mean_anchor_orientation_error_deg": float(np.mean(ori_err))}  # fmt: skip
            if pos_err:
                report["tracking"]["mean_anchor_position_error_m"] = float(np.mean(pos_err))
        return report


def run_actor(spec: Path, commands: list[str] | None, profile: str, stand_up_s: float | None, out: Path,
              motion_spec: Path | None = None, dump: bool = False) -> int:  # fmt: skip
    from asap_ros.config.actor_spec import load_actor_spec
    from asap_ros.config.robot import load_robot_model
    from asap_ros.core.actor_contract import start_pose_problem
    from asap_ros.core.errors import ConfigError
    from asap_ros.runtime.trainer_step import TrainerStep, start_pose

    robot = load_robot_model()
    contract = load_actor_spec(spec, robot)
    plan = parse_commands(commands)
    if MOTION in plan and motion_spec is None:
        raise ConfigError("--command", None, "a MOTION segment needs --motion SPEC", MOTION)
    if contract.motion_steps is not None:
        plan = [MOTION]
    elif not plan:
        plan = [(np.zeros(3), DEFAULT_SEGMENT_S)]
    session = ActorSession(profile, contract.control_dt)
    stepper = TrainerStep(contract, robot)
    motion = stepper if contract.motion_steps is not None else None
    if motion is None and motion_spec is not None:
        motion = TrainerStep(load_actor_spec(motion_spec, robot), robot)
    began = time.monotonic()
    session.blend(start_pose(contract, robot), 2.0 if stand_up_s is None else stand_up_s, contract.kp, contract.kd)
    session.sim.band("band_release")
    stepper.reset(session.sim.read_state())
    reports: list[dict[str, Any]] = []
    refused: str | None = None
    for index, segment in enumerate(plan):
        if isinstance(segment, str):
            assert motion is not None
            if motion is not stepper:
                first = start_pose(motion.contract, robot)
                refused = start_pose_problem(session.sim.read_state().q, first, motion.contract.joints,
                                             motion.contract.motor_indices)
                if refused:
                    reports.append({"motion": motion.contract.name, "refused": refused})
                    break
            reports.append(session.motion(motion, index))
            if motion is not stepper:
                stepper.reset(session.sim.read_state())  # the locomotion actor takes over again
        else:
            reports.append(session.walk(stepper, *segment, index))
        if session.fell_at is not None:
            break
    summary: dict[str, Any] = {
        "actor": contract.name, "trainer": contract.trainer, "spec": str(spec), "profile": profile,
        "fell": session.fell_at is not None, "fell_at_s": session.fell_at, "sim_time_s": session.t_s,
        "refused": refused, "segments": reports, "wall_time_s": time.monotonic() - began,
    }  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    if dump:
        session.save(out / "steps.npz")
        summary["files"] = {"steps": str(out / "steps.npz")}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    return 1 if session.fell_at is not None or refused else 0
