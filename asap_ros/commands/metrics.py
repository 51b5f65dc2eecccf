"""``asap-ros metrics BAG...``: E_g-mpjpe, E_mpjpe, E_vel, E_acc, success and per-joint errors per episode."""

from __future__ import annotations

import argparse
import json
from functools import partial

from asap_ros.commands.export import add_bag_arguments, jobs_for

WORST_JOINTS = 5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from asap_ros.export.align import MOCAP_FILTER_MS

    add_bag_arguments(parser, mocap_filter_ms=MOCAP_FILTER_MS)
    parser.add_argument("--clip", default=None, help="clip the episodes tracked (default: from the session)")
    parser.add_argument("--json", action="store_true", help="print the full results as JSON")


def _line(row: dict) -> str:
    t = row["tracking"]
    head = f"{row['bag']} episode {row['episode']} {row['motion']}"
    if t is None:
        return f"{head}: fewer than 4 actor steps, no metrics"
    flag = f", CUT SHORT ({row['outcome']})" if row["cut_short"] else ""
    worst = sorted(t["joint_rmse_rad"].items(), key=lambda kv: -kv[1])[:WORST_JOINTS]
    return (
        f"{head}: E_g-mpjpe {t['g_mpjpe_mm']:.1f} mm, E_mpjpe {t['mpjpe_mm']:.1f} mm, "
        f"E_vel {t['vel_mm_per_frame']:.2f} mm/frame, E_acc {t['acc_mm_per_frame2']:.2f} mm/frame^2, "
        f"success {t['success']} over {t['frames']} frames{flag}\n"
        f"  worst joints (RMSE): " + ", ".join(f"{name} {value * 1000:.1f} mrad" for name, value in worst)
    )


def run(args: argparse.Namespace) -> int:
    from asap_ros.export.episode_metrics import bag_metrics
    from asap_ros.export.parallel import run_per_bag

    job = partial(bag_metrics, clip=args.clip, episodes=args.episode, mocap_topic=args.mocap_topic,
                  mocap_filter_ms=args.mocap_filter_ms)  # fmt: skip
    outcomes = run_per_bag(job, args.bags, jobs_for(args), "metrics")
    rows = [row for o in outcomes if o.result for row in o.result]
    errors = [o.error for o in outcomes if o.error is not None]
    if args.json:
        print(json.dumps({"episodes": rows, "errors": errors}, indent=2))
    else:
        for row in rows:
            print(_line(row))
        for error in errors:
            print(f"asap-ros metrics: error: {error}")
    return 2 if errors else 0
