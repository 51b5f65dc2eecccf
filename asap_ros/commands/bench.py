"""``asap-ros bench tick``: p50/p99 time of one full control step and each stage's share."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    benches = parser.add_subparsers(dest="bench", required=True, metavar="BENCH")
    tick = benches.add_parser(
        "tick", help="decode LowState_ -> observation -> ONNX actor -> targets -> LowCmd_ with CRC"
    )
    tick.add_argument("--policy", default="CR7_level1", help="spec name in policies/ or a spec file (default: %(default)s)")
    tick.add_argument("--steps", type=_positive, default=5000, help="measured control steps (default: %(default)s)")
    tick.add_argument("--warmup", type=_non_negative, default=200, help="steps run first, not measured (default: %(default)s)")
    tick.add_argument("--seed", type=int, default=0, help="sensor-noise seed (default: %(default)s)")
    tick.add_argument("--period-ms", type=_period, default=0.0,
                      help="start one step per period, as the control loop does (20 for 50 Hz); "
                           "0 runs them back to back (default: %(default)s)")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _period(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1000.0:
        raise argparse.ArgumentTypeError(f"must be 0..1000 ms, got {value:g}")
    return value


def run(args: argparse.Namespace) -> int:
    from asap_ros.bench.tick import bench_tick

    result = bench_tick(args.policy, steps=args.steps, warmup=args.warmup, seed=args.seed,
                        period_s=args.period_ms / 1e3)
    print(result.report())
    return 0
