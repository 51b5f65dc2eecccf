"""``asap-ros gap BAG...``: replay recorded commands open-loop in the nominal simulator; rank joints by divergence."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from asap_ros.commands.export import add_bag_arguments, jobs_for

SHOWN = 5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from asap_ros.export.align import MOCAP_FILTER_MS

    add_bag_arguments(parser, mocap_filter_ms=MOCAP_FILTER_MS)
    parser.add_argument("--window", type=float, default=1.0, help="replay window, s (default %(default)s)")
    parser.add_argument("--skip-start", type=float, default=0.0, metavar="S",
                        help="leave out the first S seconds of each episode, e.g. a simulated session's "
                             "elastic-band release (default %(default)s)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("gap"),
                        help="report directory (default %(default)s; one subdirectory per bag if several)")  # fmt: skip
    parser.add_argument("--sim-config", default=None, help="simulator config (default config/sim.yaml)")


def gap_job(bag: Path, out_root: Path, per_bag_dirs: bool, window_s: float, episodes, mocap_topic: str,
            mocap_filter_ms: float, skip_start_s: float, sim_config, progress) -> tuple:  # fmt: skip
    """Replay one bag and write its report; returns (report path, ranking, skipped episodes, ranking horizon)."""
    from asap_ros.export.gap_report import bag_gap, write_gap_report

    gap = bag_gap(bag, window_s, episodes, mocap_topic, mocap_filter_ms, sim_config, progress,
                  skip_start_s=skip_start_s)  # fmt: skip
    out = out_root / bag.name if per_bag_dirs else out_root
    return write_gap_report(gap, out), gap.ranking(), gap.skipped, gap.rank_horizon_s


def run(args: argparse.Namespace) -> int:
    from asap_ros.export.gap_report import ranking_table, verdict
    from asap_ros.export.parallel import run_per_bag

    jobs = jobs_for(args)
    job = partial(gap_job, out_root=args.out, per_bag_dirs=len(args.bags) > 1, window_s=args.window,
                  episodes=args.episode, mocap_topic=args.mocap_topic, mocap_filter_ms=args.mocap_filter_ms,
                  skip_start_s=args.skip_start,
                  sim_config=args.sim_config,
                  progress=None if jobs == 1 else False)  # fmt: skip
    failed = 0
    for outcome in run_per_bag(job, args.bags, jobs, "gap"):
        if outcome.error is not None:
            print(f"asap-ros gap: error: {outcome.error}")
            failed += 1
            continue
        report, ranking, skipped, horizon_s = outcome.result
        print(f"{outcome.bag}: {verdict(ranking)}")
        print(ranking_table(ranking, horizon_s, limit=SHOWN))
        for line in skipped:
            print(f"  not replayed: {line}")
        print(f"  report: {report}")
    return 2 if failed else 0
