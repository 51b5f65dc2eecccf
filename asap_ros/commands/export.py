"""``asap-ros export BAG...``: recorded episodes -> trainer clip pickle, ASAP-logger npz, delta-action arrays."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

FORMATS = ("asap", "npz", "delta")


def add_bag_arguments(parser: argparse.ArgumentParser, mocap_filter_ms: float) -> None:
    """Arguments shared by ``export``, ``metrics`` and ``gap``."""
    from asap_ros.recording import topics

    parser.add_argument("bags", nargs="+", type=Path, metavar="BAG", help="session bag directories")
    parser.add_argument("--episode", type=int, action="append", metavar="N",
                        help="only episode N (repeatable; default: all)")  # fmt: skip
    parser.add_argument("--mocap-topic", default=topics.MOCAP_POSE, help="mocap pose topic (default %(default)s)")
    parser.add_argument("--mocap-filter-ms", type=float, default=mocap_filter_ms,
                        help="root pose = least-squares parabola through the mocap samples within this half "
                             "window (noise filter); 0: interpolate/slerp (default %(default)s)")  # fmt: skip
    parser.add_argument("-j", "--jobs", type=int, default=0,
                        help="bags processed in parallel (default: all cores)")  # fmt: skip


def jobs_for(args: argparse.Namespace) -> int:
    from asap_ros.export.parallel import default_jobs

    return min(args.jobs or default_jobs(), len(args.bags))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bag_arguments(parser, mocap_filter_ms=0.0)
    parser.add_argument("--format", action="append", choices=FORMATS, dest="formats",
                        help="asap (trainer clip pickle), npz (ASAP logger keys), delta (s, a, s'); "
                             "repeatable (default: asap)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("export"), help="output directory (default %(default)s)")
    parser.add_argument("--clip", default=None, help="clip the episodes tracked (default: from the session)")
    parser.add_argument("--action", choices=("raw", "executed"), default="raw",
                        help="what fills the action key: the actor's raw output (ASAP's convention, default) or the "
                             "raw-equivalent of the target the robot executed after the joint-limit clamp")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from asap_ros.export.actions import clamp_lines
    from asap_ros.export.exporter import export_bag
    from asap_ros.export.parallel import run_per_bag

    jobs = jobs_for(args)
    job = partial(export_bag, out_dir=args.out, formats=args.formats or ["asap"], episodes=args.episode,
                  clip=args.clip, mocap_topic=args.mocap_topic, mocap_filter_ms=args.mocap_filter_ms,
                  progress=None if jobs == 1 else False, action=args.action)  # fmt: skip
    failed = 0
    for outcome in run_per_bag(job, args.bags, jobs, "export"):
        if outcome.error is not None:
            print(f"asap-ros export: error: {outcome.error}")
            failed += 1
            continue
        for e in outcome.result:
            stream, error = e.sync["largest_stream"], e.sync["largest_ms"]
            flag = f"CUT SHORT ({e.outcome})" if e.cut_short else e.outcome
            print(f"{Path(e.bag).name} episode {e.episode} {e.motion}: {e.actor_steps} ticks, {flag}; "
                  f"root from {e.root_source}; largest sync error {error:.2f} ms ({stream})")  # fmt: skip
            for line in clamp_lines(e.clamped):
                print(f"  {line}")
            for note in e.notes:
                print(f"  note: {note}")
            for file in e.files:
                print(f"  -> {file}")
    return 2 if failed else 0
