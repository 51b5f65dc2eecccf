"""ASAP's three actors on the simulated G1, lock-step (``asap-ros rollout``) and in real time over
DDS (``asap-ros sim``), and the table of their tracking errors and control timing.

Each run is its own ``asap-ros`` process (the real-time ones start ``asap_sim`` and pick their
own DDS domain). Acceptance: no run falls; each actor's real-time E_mpjpe is within 20% of its
lock-step E_mpjpe; step latency p99 (LowState arrival -> LowCmd write) is reported (target < 1 ms).
A last pair of rows runs one actor with ``--profile weak_knees`` (knees at 60% torque).

    .venv/bin/python benchmarks/sim_table.py [--out DIR] [--stand-up-s 2] [--rt-priority 50 (0: normal scheduling)]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from asap_ros.sim.summary import load_summary

ACTORS = ("CR7_level1", "kick_level1", "APT_level1")
WEAK_KNEES_ACTOR = "kick_level1"
METRICS = (("g_mpjpe_mm", "E_g-mpjpe"), ("mpjpe_mm", "E_mpjpe"), ("vel_mm_per_frame", "E_vel"), ("acc_mm_per_frame2", "E_acc"))
TOLERANCE = 0.20


def run(kind: str, actor: str, profile: str, out: Path, stand_up_s: float, rt_priority: int) -> dict:
    command = [
        sys.executable, "-m", "asap_ros.cli", kind, "--policy", f"policies/{actor}.yaml", "--profile", profile,
        "--stand-up-s", str(stand_up_s), "--out", str(out),
    ]  # fmt: skip
    if kind == "sim":
        command += ["--rt-priority", str(rt_priority)]
    subprocess.run(command, check=False, timeout=600, stdout=subprocess.DEVNULL)
    return load_summary(out / "summary.json")


def metric(summary: dict, key: str) -> str:
    tracking = summary["tracking"]
    return f"{tracking[key]:.1f}" if tracking else "-"


def row(actor: str, profile: str, lockstep: dict, realtime: dict) -> tuple[str, bool]:
    cells = [actor, profile]
    cells += [f"{metric(lockstep, key)} / {metric(realtime, key)}" for key, _ in METRICS]
    ls, rt = (s["tracking"]["mpjpe_mm"] if s["tracking"] else None for s in (lockstep, realtime))
    within = ls is not None and rt is not None and abs(rt - ls) <= TOLERANCE * ls
    cells.append(f"{(rt - ls) / ls:+.0%}" if ls and rt else "-")
    cells.append(f"{'YES' if lockstep['fell'] else 'no'} / {'YES' if realtime['fell'] else 'no'}")
    timing = realtime["timing"] or {}
    cells.append(f"{timing.get('latency_p99_us', float('nan')) / 1000:.2f}")
    cells.append(str(timing.get("deadline_misses", "-")))
    outcome = realtime["outcome"] if realtime["outcome"] != "completed" else lockstep["outcome"]
    cells.append(outcome if len(outcome) < 90 else outcome[:87] + "...")
    passed = within and not lockstep["fell"] and not realtime["fell"]
    return "| " + " | ".join(cells) + " |", passed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="keep every run's summary here (default: a temporary directory)")
    parser.add_argument("--stand-up-s", type=float, default=2.0, help="stand-up duration of every run (default 2 s)")
    parser.add_argument("--rt-priority", type=int, default=50, help="SCHED_FIFO priority of the real-time runs (0: none)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="asap_sim_table_"))
    header = ["actor", "profile"] + [f"{name} LS / RT" for _, name in METRICS]
    header += ["E_mpjpe RT vs LS", "fell LS / RT", "latency p99 ms", "deadline misses", "outcome"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    results = []
    for actor, profile in [*((a, "nominal") for a in ACTORS), (WEAK_KNEES_ACTOR, "weak_knees")]:
        summaries = [run(kind, actor, profile, out / f"{actor}-{profile}-{kind}", args.stand_up_s, args.rt_priority)
                     for kind in ("rollout", "sim")]  # fmt: skip
        line, passed = row(actor, profile, *summaries)
        lines.append(line)
        results.append(passed)
        print(line, flush=True)
    print()
    print("\n".join(lines))
    print("\nLS: lock-step rollout, RT: real time over DDS; errors in mm (E_vel mm/frame, E_acc mm/frame^2).")
    print(f"{sum(results)} of {len(results)} rows pass (no fall, RT E_mpjpe within {TOLERANCE:.0%} of LS). Runs: {out}")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
