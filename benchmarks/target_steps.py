"""The largest per-step joint-target change of ASAP's actors in every mode that applies torque:
the measurement behind ``safety.max_target_step_rad`` in ``config/controller.yaml``.

Each actor runs the scripted operator sequence lock-step on the simulated G1 (``asap-ros
rollout``: stand-up, HOLD with the standing actor, PREPARE blend, TRACKING, HOLD blend back),
with the limit lifted so that nothing is cut short. Per mode it prints the largest change of any
joint's target from one step to the next (compared as the check compares it:
``asap_ros.core.safety.step_reference``), its p99, where it happened, and how many steps the shipped
limit would have faulted.

    .venv/bin/python benchmarks/target_steps.py [--profiles nominal weak_knees worn] [--stand-up-s 10]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

from asap_ros.commands.rollout import LockstepG1, run_lockstep
from asap_ros.config.controller import load_controller_config
from asap_ros.config.paths import config_file, policies_dir
from asap_ros.core.safety import step_reference
from asap_ros.core.state_machine import Mode
from asap_ros.sim.session import prepare_run

ACTORS = ("CR7_level1", "kick_level1", "APT_level1")
MODES = (Mode.STAND_UP, Mode.HOLD, Mode.PREPARE, Mode.TRACKING)


@dataclasses.dataclass
class Jumps:
    """Per mode: every step's largest target change, and the largest with its place."""

    steps: dict[Mode, list[float]] = dataclasses.field(default_factory=lambda: collections.defaultdict(list))
    worst: dict[Mode, tuple[float, str]] = dataclasses.field(default_factory=dict)


def measure(actor: str, profile: str, stand_up_s: float, controller_config: Path) -> tuple[Jumps, str]:
    setup = prepare_run(policies_dir() / f"{actor}.yaml", stand_up_s=stand_up_s, controller_config=controller_config)
    names = setup.robot.joint_names
    jumps, previous, entered = Jumps(), [None], collections.Counter()
    last_mode = [None]

    def observe(state, output, _pose) -> None:
        mode, command = output.mode, output.command
        entered[mode] += mode is not last_mode[0]
        tick = 0 if mode is not last_mode[0] else observe.tick + 1
        observe.tick, last_mode[0] = tick, mode
        if previous[0] is not None and mode in MODES:
            jump = np.abs(command.q - step_reference(previous[0].q, previous[0].kp, state.q))
            i = int(np.argmax(jump))
            jumps.steps[mode].append(float(jump[i]))
            if jump[i] > jumps.worst.get(mode, (-1.0, ""))[0]:
                jumps.worst[mode] = (float(jump[i]), f"{names[i]}, step {tick} of {mode.name} #{entered[mode]}")
        previous[0] = command

    observe.tick = 0
    script = run_lockstep(setup, LockstepG1(profile, control_dt_s=setup.controller.control_dt), observe)
    return jumps, script.outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", nargs="+", default=["nominal", "weak_knees", "worn"])
    parser.add_argument("--stand-up-s", type=float, default=load_controller_config().stand_up_duration_s)
    args = parser.parse_args(argv)
    limit = load_controller_config().safety.max_target_step_rad
    data = yaml.safe_load(config_file("controller.yaml").read_text())
    data["safety"]["max_target_step_rad"] = 100.0  # measure, do not fault
    with tempfile.TemporaryDirectory() as folder:
        lifted = Path(folder) / "controller.yaml"
        lifted.write_text(yaml.safe_dump(data))
        print(f"shipped max_target_step_rad: {limit:g} rad; stand-up {args.stand_up_s:g} s\n")
        print("| actor | profile | mode | steps | p99 rad | max rad | where | over the limit |")
        print("|---|---|---|---|---|---|---|---|")
        overall = (0.0, "")
        for profile in args.profiles:
            for actor in ACTORS:
                jumps, outcome = measure(actor, profile, args.stand_up_s, lifted)
                for mode in MODES:
                    values = np.array(jumps.steps[mode])
                    worst, where = jumps.worst[mode]
                    overall = max(overall, (worst, f"{actor} {profile}: {where}"))
                    print(f"| {actor} | {profile} | {mode.name} | {len(values)} | {np.percentile(values, 99):.3f} | "
                          f"{worst:.3f} | {where} | {int((values > limit).sum())} |")
                if outcome != "completed":
                    print(f"| {actor} | {profile} | run ended early: {outcome} | | | | | |")
        print(f"\nlargest: {overall[0]:.3f} rad ({overall[1]}); limit / largest = {limit / overall[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
