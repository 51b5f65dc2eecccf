"""Where the gap's "stands out" floor lies: nominal against weak-knees kick sessions (docs/export.md).

Records ``--sessions N`` real-time kick sessions of each profile under ``ROOT/<profile><k>/``
(``asap-ros sim --record`` through :func:`~asap_ros.testing.sim_sessions.record_sim_session`,
one attempt each; those already there are reused), replays each with ``asap-ros gap``'s
ranking (``--skip-start 1``) and prints, over the sessions whose motion had no simulator
stall: the nominal robot's worst joint and the weak knees' lesser knee (ranked divergence,
mrad, and × the median joint), with how many sessions the shipped rule gets right.

    .venv/bin/python benchmarks/gap_floor.py --root runs/gap_floor --sessions 20
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from asap_ros.core.errors import AsapError
from asap_ros.export.gap import STANDS_OUT_MIN_RAD, STANDS_OUT_RATIO, TRIM_SHARE
from asap_ros.export.gap_report import bag_gap
from asap_ros.testing.sim_sessions import record_sim_session, stalls_in_motion

KICK = "policies/kick_level1.yaml"
KNEES = ("left_knee_joint", "right_knee_joint")
SKIP_START_S = 1.0
MRAD = 1e3


def sessions(root: Path, profile: str, count: int) -> list[tuple[str, float, float, bool]]:
    """(name, ranked divergence in rad, × median, the rule's verdict right) per steady session: the
    worst joint for ``nominal`` (right: nothing stands out), the lesser knee otherwise (right:
    both knees stand out)."""
    rows = []
    for k in range(count):
        try:
            session = record_sim_session(root / f"{profile}{k}", profile=profile, policy=KICK, attempts=1)
        except AsapError as exc:
            print(f"{profile}{k}: {exc}")
            continue
        if stalls_in_motion(session.summary):
            print(f"{profile}{k}: left out, the simulator stalled during the motion")
            continue
        ranking = bag_gap(session.bag, progress=False, skip_start_s=SKIP_START_S).ranking()
        if profile == "nominal":
            worst = ranking[0]
            rows.append((f"{profile}{k}", worst.early_rms_rad, worst.ratio_to_median, not any(r.stands_out for r in ranking)))
        else:
            knees = [r for r in ranking if r.joint in KNEES]
            lesser = min(knees, key=lambda r: r.early_rms_rad)
            rows.append((f"{profile}{k}", lesser.early_rms_rad, lesser.ratio_to_median, all(r.stands_out for r in knees)))
    return rows


def describe(label: str, rows: list[tuple[str, float, float, bool]]) -> None:
    if not rows:
        print(f"{label}: no steady session")
        return
    values = np.array([r[1] for r in rows]) * MRAD
    ratios = np.array([r[2] for r in rows])
    print(f"{label}: {len(rows)} steady sessions, {values.min():.2f} / {np.median(values):.2f} / {values.max():.2f} mrad "
          f"(min / median / max), x median joint {ratios.min():.1f}-{ratios.max():.1f}; "
          f"the rule right in {sum(r[3] for r in rows)} of {len(rows)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("runs/gap_floor"))
    parser.add_argument("--sessions", type=int, default=10, help="sessions of each profile (default %(default)s)")
    args = parser.parse_args()
    print(f"rule: above {STANDS_OUT_RATIO:g}x the median joint and {STANDS_OUT_MIN_RAD * MRAD:g} mrad; "
          f"resets every 0.2 s, each joint's worst {TRIM_SHARE:.0%} left out")
    nominal = sessions(args.root, "nominal", args.sessions)
    weak = sessions(args.root, "weak_knees", args.sessions)
    describe("nominal, worst joint", nominal)
    describe("weak_knees, lesser knee", weak)
    if nominal and weak:
        top, low = max(r[1] for r in nominal) * MRAD, min(r[1] for r in weak) * MRAD
        print(f"between them: {top:.2f} .. {low:.2f} mrad (geometric middle {np.sqrt(top * low):.1f})")


if __name__ == "__main__":
    main()
