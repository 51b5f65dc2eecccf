"""``asap-ros rollout``: the actor and the simulated G1 stepped lock-step in one process.

No DDS and no clock: each control step reads the simulator's LowState (encoded and decoded
through the same hg wire layout, noise and float32 rounding as ``asap_sim`` publishes it),
runs the :class:`~asap_ros.core.controller.Controller` on it, hands the encoded LowCmd to the
simulated motors and advances the physics by one control period. The operator script, the
robot profile and the summary are those of ``asap-ros sim``, so this is the ideal yardstick
for the real-time run (zero latency, no lost samples) and the place to debug observations
(``--dump-obs``). Robot profile effects that need a clock (actuation delay) run on the
simulated clock; every command is delivered (the profile's command drop probability applies
to DDS only).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from asap_ros.commands.sim import add_run_arguments, output_dir, policy_path, started_at
from asap_ros.g1.codec import LowCmdEncoder, state_from_record
from asap_ros.g1.layout import LOWCMD_WIRE, LOWSTATE_WIRE

CONTROL_DT_S = 0.02
"""Control period of ASAP's actors (the runs use the actors' own ``phase.control_dt``)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)
    parser.add_argument("--command", action="append", dest="velocity", metavar="VX,VY,WZ[:SECONDS]",
                        help="velocity command segment of a locomotion actor imported with policy import "
                        "(m/s, m/s, rad/s; 10 s when no time is given), or MOTION (the --motion actor); repeat for "
                        "a schedule")
    parser.add_argument("--motion", type=Path, default=None,
                        help="imported motion actor spec that a --command MOTION segment switches to")
    parser.add_argument(
        "--dump-obs", action="store_true", help="also write the actor's observations and raw actions (obs.npy, actions.npy)"
    )


class LockstepG1:
    """The simulated G1 of ``asap_sim`` (same physics, motors, profile, wire format), stepped by the caller."""

    def __init__(self, profile: str, assets_dir: str | Path | None = None, control_dt_s: float = CONTROL_DT_S):
        from asap_ros.sim.config import load_sim_config
        from asap_ros.sim.simulator import Simulator

        config = load_sim_config()
        config = dataclasses.replace(config, profile=profile, mocap=dataclasses.replace(config.mocap, rate_hz=0.0))
        self.sim = Simulator(config, domain=0, assets_dir=assets_dir)  # parts only: start() (DDS) is never called
        self.config = config
        self.physics = self.sim.physics
        self._substeps = round(control_dt_s * config.physics_rate_hz)
        self._tau = np.zeros(len(self.physics.effort_limit))
        self._enabled = np.zeros(len(self._tau), dtype=bool)
        self._cmd_encoder = LowCmdEncoder()
        self.commands = 0

    @property
    def now_ns(self) -> int:
        return round(self.physics.time * 1e9)

    def read_state(self):
        """The LowState the robot would publish now, decoded as the runtime decodes it (both
        stamps on the simulated clock: the run's only clock)."""
        reading = self.sim.reading(self._tau, self._enabled)
        payload = self.sim.lowstate.encode(round(self.physics.time * 1000), reading)
        return state_from_record(LOWSTATE_WIRE.from_cdr(payload), self.now_ns, self.now_ns)

    def pose(self):
        from asap_ros.tracking.evaluation import BodyPose

        physics = self.physics
        return BodyPose(physics.pelvis_pos(), physics.pelvis_quat_wxyz(), physics.q().copy())

    def command(self, command) -> None:
        """Deliver one JointCommand as the encoded LowCmd the motors would receive."""
        from asap_ros.sim.bridge import motor_command

        payload = self._cmd_encoder.encode_cdr(command, self.config.mode_machine)
        record = LOWCMD_WIRE.from_cdr(payload)
        self.deliver(motor_command(record["motor_cmd"][: len(self._tau)]))

    def deliver(self, motor_command: Any) -> None:
        """Hand one decoded :class:`~asap_ros.sim.motors.MotorCommand` to the motors now."""
        self.sim.gate.push(motor_command, self.now_ns)
        self.commands += 1

    def band(self, action: str) -> None:
        from asap_ros.sim.dds_types import BAND_ATTACH, BAND_RELEASE

        if action not in (BAND_ATTACH, BAND_RELEASE):
            raise ValueError(f"lock-step rollout supports band_attach and band_release, not {action!r}")
        if action == BAND_ATTACH:
            self.physics.attach_band()
        else:
            self.physics.band.enabled = False

    def advance(self) -> None:
        """One control period of physics (motor PD every physics step, on the simulated clock)."""
        for _ in range(self._substeps):
            self._tau, self._enabled = self.sim.step_physics(self.now_ns)

    def stats(self) -> dict[str, Any]:
        return {
            "profile": self.sim.profile.name,
            "physics_rate_hz": self.config.physics_rate_hz,
            "sim_time_s": self.physics.time,
            "commands_applied": self.sim.gate.applied,
            "limp_events": self.sim.gate.limp_events,
            "max_motor_temperature_c": float(self.sim.thermal.temperature_c.max()),
        }


StepObserver = Callable[[Any, Any, Any], None]
"""``observer(state, output, pose)`` of each lock-step control step (RobotState, StepOutput, BodyPose)."""


def run_lockstep(setup: Any, robot_sim: LockstepG1, observe: StepObserver) -> Any:
    """Run the operator script of ``setup`` on ``robot_sim`` to its end; returns the script."""
    from asap_ros.core.errors import RejectedRequest
    from asap_ros.sim.session import BandAction, OperatorScript

    script, controller = OperatorScript(setup.plan), setup.controller
    while not script.finished:
        t_s = robot_sim.physics.time
        for action in script.poll(t_s, controller.mode, controller.fault_reason):
            if isinstance(action, BandAction):
                robot_sim.band(action.action)
                continue
            try:
                controller.request(action, robot_sim.now_ns)
            except RejectedRequest as exc:
                script.rejected(t_s, action, str(exc))
        state, pose = robot_sim.read_state(), robot_sim.pose()
        output = controller.step(state, robot_sim.now_ns)
        observe(state, output, pose)
        robot_sim.command(output.command)
        robot_sim.advance()
    return script


def run(args: argparse.Namespace) -> int:
    from asap_ros.config.actor_spec import is_actor_spec

    if args.policy is not None and is_actor_spec(args.policy):
        from asap_ros.commands.actor_rollout import run_actor

        return run_actor(args.policy, args.velocity, args.profile, args.stand_up_s, output_dir(args.out), args.motion,
                         args.dump_obs)
    if args.velocity:
        raise SystemExit("asap-ros rollout: --command is for a locomotion actor imported with policy import")
    from asap_ros.sim.session import COMPLETED, prepare_run
    from asap_ros.sim.summary import format_result, summarize_run, write_summary
    from asap_ros.tracking.evaluation import RunTrace

    setup = prepare_run(policy_path(args.policy), args.onnx, args.clip, args.stand_up_s,
                        controller_config=args.controller_config)
    robot_sim = LockstepG1(args.profile, control_dt_s=setup.controller.control_dt)
    out_dir = output_dir(args.out)
    trace = RunTrace()
    observations: list[np.ndarray] = []
    actions: list[np.ndarray] = []

    def observe(state: Any, output: Any, pose: Any) -> None:
        trace.add(output.mode, output.policy, pose, state.tick)
        if output.policy is not None and args.dump_obs:
            observations.append(output.policy.obs)
            actions.append(output.policy.raw_action)

    began, stamp = time.monotonic(), started_at()
    script = run_lockstep(setup, robot_sim, observe)
    files = {}
    if args.dump_obs:
        files = {"obs": str(out_dir / "obs.npy"), "actions": str(out_dir / "actions.npy")}
        np.save(files["obs"], np.array(observations, dtype=np.float32).reshape(-1, setup.policy.spec.input_dim))
        np.save(files["actions"], np.array(actions, dtype=np.float32).reshape(-1, setup.policy.spec.output_dim))
    summary = summarize_run(
        "rollout", setup, script, trace, profile=robot_sim.sim.profile.name, started_at=stamp,
        wall_time_s=time.monotonic() - began, sim_time_s=robot_sim.physics.time,
        timing=None, sim_stats=robot_sim.stats(), files=files,
    )  # fmt: skip
    path = write_summary(summary, out_dir / "summary.json")
    print(format_result(summary.to_dict()))
    print(f"summary: {path}")
    return 0 if summary.outcome == COMPLETED and not summary.fell else 1
