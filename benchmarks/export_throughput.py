"""Export throughput: how long ``asap-ros export`` takes for one hour of recorded session.

Synthesises a session bag with the recorder's ``BagWriter`` (asap_ros.testing.synthetic_bags: 500 Hz
LowState, 50 Hz actor steps and LowCmds, 200 Hz mocap, zstd chunks flushed every second),
then exports every episode in all three formats in one process and prints the figures.
Target: one hour of recording in under 60 s.

    .venv/bin/python benchmarks/export_throughput.py [--minutes 60] [--keep DIR]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from asap_ros.config.robot import load_robot_model
from asap_ros.export.exporter import export_bag
from asap_ros.testing.synthetic_bags import PREPARE_S, SyntheticPlan, write_synthetic_session

EPISODE_S = 20.0
HOLD_S = 4.0
TARGET_S_PER_HOUR = 60.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="recorded session length (default 60)")
    parser.add_argument("--keep", type=Path, help="write the bag and exports here and keep them (else a temp dir)")
    parser.add_argument("--bag", type=Path, help="export this existing bag instead of synthesising one")
    args = parser.parse_args()

    work = args.keep or Path(tempfile.mkdtemp(prefix="asap_export_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        bag = args.bag
        if bag is None:
            episodes = max(1, round(args.minutes * 60 / (EPISODE_S + HOLD_S + PREPARE_S)))
            plan = SyntheticPlan(episodes=episodes, episode_s=EPISODE_S, hold_s=HOLD_S)
            began = time.perf_counter()
            bag = write_synthetic_session(work / "session", plan, load_robot_model().default_q)
            print(f"synthesised {episodes} episodes in {time.perf_counter() - began:.1f} s")
        recorded_s, size = _bag_figures(bag)
        began = time.perf_counter()
        exported = export_bag(bag, work / "export", ["asap", "npz", "delta"], progress=False)
        elapsed = time.perf_counter() - began
        ticks = sum(e.actor_steps for e in exported)
        per_hour = elapsed * 3600.0 / recorded_s
        print(f"bag: {recorded_s / 60:.1f} min recorded, {size / 1e6:.0f} MB, {len(exported)} episodes, "
              f"{ticks} actor ticks")  # fmt: skip
        print(f"export (asap + npz + delta, 1 process): {elapsed:.1f} s = {recorded_s / elapsed:.0f}x real time")
        print(f"per hour of recording: {per_hour:.1f} s (target < {TARGET_S_PER_HOUR:.0f} s): "
              f"{'met' if per_hour < TARGET_S_PER_HOUR else 'NOT met'}")  # fmt: skip
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


def _bag_figures(bag: Path) -> tuple[float, int]:
    from rosbags.rosbag2 import Reader

    with Reader(bag) as reader:
        return reader.duration / 1e9, sum(f.stat().st_size for f in bag.glob("*.mcap"))


if __name__ == "__main__":
    main()
