"""``asap-ros policy import MODEL.onnx --out SPEC.yaml``: write a policy spec from a trainer's ONNX
file (BeyondMimic, holosoma, ASAP-family), saying where each value came from; ``check-policy``
takes the spec it writes."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    imp = sub.add_parser("import", help="write a policy spec from an ONNX actor of another trainer")
    imp.add_argument("model", type=Path, help="the actor's ONNX file (external weights MODEL.onnx.data beside it)")
    imp.add_argument("--trainer", default="auto", choices=["auto", "asap", "beyondmimic", "holosoma"],
                     help="whose contract the file follows (auto: from its inputs and metadata)")  # fmt: skip
    imp.add_argument("--out", type=Path, required=True, help="spec file to write")
    imp.add_argument("--name", default=None, help="motion name (default: the file's stem)")
    imp.add_argument("--gains", type=Path, default=None,
                     help="YAML with kp, kd, default_q mappings (joint: value) replacing the imported ones")
    imp.add_argument("--motion-length", type=float, default=None, dest="motion_length",
                     help="seconds of an ASAP-layout motion actor without metadata (e.g. 6.67 for horse_squat)")
    imp.add_argument("--precision-tolerance", type=float, default=None, dest="tolerance",
                     help="largest relative rounding error of a metadata gain or action scale (default 0.01)")
    imp.add_argument("--robot", default=None, help="robot model YAML (default: config/g1_29dof.yaml)")


def run(args: argparse.Namespace) -> int:
    from asap_ros.config.actor_import import import_actor, write_spec
    from asap_ros.config.robot import load_robot_model
    from asap_ros.core.actor_contract import PRECISION_TOLERANCE

    robot = load_robot_model(args.robot)
    tolerance = PRECISION_TOLERANCE if args.tolerance is None else args.tolerance
    imported = import_actor(args.model, robot, args.trainer, gains=args.gains, motion_length_s=args.motion_length,
                            tolerance=tolerance, name=args.name)  # fmt: skip
    write_spec(imported, args.out)
    spec = imported.spec
    print(f"wrote {args.out}: {spec['name']} ({spec['trainer']}), {len(spec['joints'])} joints, "
          f"observation {spec['actor']['inputs'][0]['dim']}")  # fmt: skip
    width = max(len(k) for k in imported.sources)
    for key, source in sorted(imported.sources.items()):
        print(f"  {key:<{width}}  {source}")
    return 0
