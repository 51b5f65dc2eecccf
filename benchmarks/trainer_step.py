"""Time of one control step of other trainers' actors against their ONNX actor alone.

Each spec is made by ``policy import`` from ``../shared/trainer-actors`` (or given); the states are
those of a lock-step run of the actor on the simulated G1 (``asap-ros rollout``'s harness; holosoma
walking at 0.5 m/s). Then, over those states, a fresh :class:`TrainerStep` runs back to back
(observation, ONNX Runtime, targets) and, after each step, the actor alone on its observation
and time step (interleaved: both under the same load). Prints p50/p99 of both and the ratio step / actor at p50: the figure ``asap-ros bench
tick`` gives ASAP's actors as (observation + targets + inference) / inference. Asserts nothing.

    .venv/bin/python benchmarks/trainer_step.py [--steps 600] [SPEC.yaml ...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from asap_ros.commands.actor_rollout import ActorSession
from asap_ros.config.actor_import import import_actor, write_spec
from asap_ros.config.actor_spec import load_actor_spec
from asap_ros.config.robot import load_robot_model
from asap_ros.runtime.trainer_step import TrainerStep, start_pose

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "trainer-actors"
FILES = {"beyondmimic/Jump_wose.onnx": {}, "beyondmimic/Violin.onnx": {}, "holosoma/ppo_g1_29dof.onnx": {},
         "kungfubot/horse_squat.onnx": {"trainer": "asap", "motion_length_s": 6.67,
                                        "gains": Path(__file__).resolve().parents[1] / "config" / "trainers"
                                        / "kungfubot_gains.yaml"}}  # fmt: skip


def _states(spec: Path, steps: int) -> list:
    robot = load_robot_model()
    contract = load_actor_spec(spec, robot)
    session = ActorSession("nominal", contract.control_dt)
    stepper = TrainerStep(contract, robot)
    session.blend(start_pose(contract, robot), 2.0, contract.kp, contract.kd)
    session.sim.band("band_release")
    stepper.reset(session.sim.read_state())
    stepper.set_command((0.5, 0.0, 0.0))
    states = []
    while len(states) < steps:
        state = session.sim.read_state()
        states.append(state)
        output = stepper.step(state, session.mocap() if contract.needs_mocap else None)
        session.send(output.q_target, contract.kp, contract.kd)
        if output.done:
            stepper.reset(session.sim.read_state())
    return states


def bench(spec: Path, steps: int) -> tuple[str, np.ndarray, np.ndarray]:
    robot = load_robot_model()
    contract = load_actor_spec(spec, robot)
    states = _states(spec, steps)
    stepper = TrainerStep(contract, robot)
    stepper.reset(states[0])
    stepper.set_command((0.5, 0.0, 0.0))
    mocap = (np.array([0.0, 0.0, 1.0]), np.zeros(3)) if contract.needs_mocap else None
    step_ns, actor_ns = [], []
    for state in states:  # interleaved, so that both see the same load on the machine
        start = time.perf_counter_ns()
        output = stepper.step(state, mocap)
        step_ns.append(time.perf_counter_ns() - start)
        obs = output.obs.copy()
        start = time.perf_counter_ns()
        stepper.actor(obs, output.time_step)
        actor_ns.append(time.perf_counter_ns() - start)
        if output.done:
            stepper.reset(state)
    return contract.name, np.array(step_ns) / 1e3, np.array(actor_ns) / 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("specs", nargs="*", type=Path, help="imported specs (default: the four shared files)")
    parser.add_argument("--steps", type=int, default=600)
    args = parser.parse_args(argv)
    specs = list(args.specs)
    with tempfile.TemporaryDirectory() as tmp:
        if not specs:
            robot = load_robot_model()
            for name, kwargs in FILES.items():
                out = Path(tmp) / (Path(name).stem + ".yaml")
                write_spec(import_actor(SHARED / name, robot, **kwargs), out)
                specs.append(out)
        print(f"{'actor':<14} {'step p50 us':>11} {'p99':>8} {'actor p50 us':>12} {'p99':>8} {'ratio p50':>9}")
        for spec in specs:
            name, step, actor = bench(spec, args.steps)
            p50s, p99s, p50a, p99a = (float(np.percentile(a, p)) for a, p in ((step, 50), (step, 99), (actor, 50),
                                                                               (actor, 99)))  # fmt: skip
            print(f"{name:<14} {p50s:11.1f} {p99s:8.1f} {p50a:12.1f} {p99a:8.1f} {p50s / p50a:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
