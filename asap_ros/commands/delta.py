"""``asap-ros delta fit RECORDING... --out MODEL.onnx``: a delta-action model fitted on the CPU."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from asap_ros.commands.openloop import add_recording_arguments

    sub = parser.add_subparsers(dest="delta_command", required=True, metavar="ACTION")
    fit = sub.add_parser("fit", help="fit a delta-action model (ONNX actor_obs 108 -> action 23) to recordings",
                         description="Per policy step, the Δa that makes the nominal trainer simulator reach the "
                                     "recorded next state (Gauss-Newton on mujoco.rollout), then a model of the "
                                     "delta model's 108 inputs (per joint, ridge or a small MLP, chosen on held-out "
                                     "motions), "
                                     "written as ONNX in ASAP's export shape.")  # fmt: skip
    add_recording_arguments(fit)
    fit.add_argument("--out", type=Path, required=True, metavar="MODEL", help="the ONNX file to write")
    fit.add_argument("--model", choices=("auto", "joint", "ridge", "mlp"), default="auto",
                     help="joint: each joint's Δa from its own action, angle and velocity; ridge: from all 108 "
                          "inputs; mlp: a small network; auto: the one whose held-out motions replay best "
                          "(default %(default)s)")  # fmt: skip
    fit.add_argument("--fit-ticks", type=int, default=3, metavar="N",
                     help="fit each transition's Δa over the next N policy steps (held over them), so that one "
                          "jolt is not a target (default %(default)s; 1: the one-step fit)")  # fmt: skip
    fit.add_argument("--threads", type=int, default=0, help="rollout threads (default: all cores)")
    fit.add_argument("--report", type=Path, default=None, metavar="PATH", help="write the fit report as JSON")


def run(args: argparse.Namespace) -> int:
    import json

    from asap_ros.commands.openloop import load_for
    from asap_ros.export.delta_fit import fit_delta, report_text, write_model
    from asap_ros.export.openloop import first_row
    from asap_ros.export.parallel import default_jobs
    from asap_ros.export.progress import Progress

    recordings, replayer = load_for(args)
    total = sum(max(0, len(r) - 1 - first_row(r, args.skip_start)) for r in recordings)
    with Progress(total, "delta fit", "steps") as bar:
        model, report, _ = fit_delta(recordings, replayer, args.model, args.threads or default_jobs(), bar.advance,
                                     args.skip_start, args.fit_ticks)
    print(report_text(report))
    print(f"model: {write_model(model, report, args.out, replayer)}")
    if args.report is not None:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")
        print(f"report: {args.report}")
    return 0
