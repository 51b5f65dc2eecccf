"""The ``asap-ros`` command: one entry point, one module per subcommand.

Each subcommand module defines ``add_arguments(parser)`` and ``run(args) -> int`` and is
kept light at import time (heavy imports such as rclpy, mujoco, onnxruntime go inside
``run``), so ``asap-ros --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from asap_ros.core.errors import AsapError

# subcommand -> (module under asap_ros.commands, one-line help); keep heavy imports inside run()
COMMANDS: dict[str, tuple[str, str]] = {
    "check-policy": ("asap_ros.commands.check_policy", "check a policy spec against its ONNX actor and run it once"),
    "policy": ("asap_ros.commands.policy", "write a policy spec from another trainer's ONNX actor (policy import)"),
    "assets": ("asap_ros.commands.assets", "find, verify or fetch ASAP's published assets"),
    "bench": ("asap_ros.commands.bench", "benchmarks of the control path (bench tick)"),
    "doctor": ("asap_ros.commands.doctor", "preflight before launch: network, rt/lowstate, rt/lowcmd writers, ROS, assets, clock"),
    "ctl": ("asap_ros.commands.ctl", "operate a running asap_deploy: stand, start NAME, stop, estop, reset, status"),
    "bag": ("asap_ros.commands.bag", "inspect (info) or recover (repair) a session bag"),
    "sim": ("asap_ros.commands.sim", "run an actor on the simulated G1 in real time over DDS and summarise the run"),
    "rollout": ("asap_ros.commands.rollout", "run an actor on the simulated G1 lock-step in one process (the ideal yardstick)"),
    "export": ("asap_ros.commands.export", "export recorded episodes for offline trainers (asap clip pickle, npz, delta)"),
    "metrics": ("asap_ros.commands.metrics", "tracking metrics (E_g-mpjpe, E_mpjpe, E_vel, E_acc) of recorded episodes"),
    "gap": ("asap_ros.commands.gap", "replay recorded commands in the nominal simulator; rank joints by divergence"),
    "openloop": ("asap_ros.commands.openloop", "ASAP's open-loop protocol in MuJoCo: replay recorded actions, with and without a delta model"),
    "delta": ("asap_ros.commands.delta", "delta-action models: fit one from recordings (delta fit)"),
    "view": ("asap_ros.commands.view", "the robot in the web browser, live or from a session bag (read-only)"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="asap-ros", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        module = importlib.import_module(module_name)
        module.add_arguments(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    module = importlib.import_module(COMMANDS[args.command][0])
    try:
        return int(module.run(args) or 0)
    except AsapError as exc:
        print(f"asap-ros {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
