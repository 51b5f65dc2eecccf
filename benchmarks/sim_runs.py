"""The main job, again and again: ``asap-ros sim`` runs in a row (kick and CR7, with and without
``--record``), each beside a floor probe at the control thread's priority; one line per run with
its outcome (a safety limit tripped is an abort) and the loop's late steps against the probe's.

    .venv/bin/python benchmarks/sim_runs.py [--runs 20] [--priority 80] [--out DIR]

Run on an idle machine. Late: a control step finishing (a probe waking) more than 5 ms after its
deadline, the shipped ``late_after_ms``. The ratio is the loop's share over the probe's (what the
product adds to what the machine does to any thread at that priority), with its 95% interval.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from asap_ros.bench.floor_probe import FloorProbe
from asap_ros.bench.rate_ratio import compared_text

ROOT = Path(__file__).resolve().parents[1]
POLICIES = ("policies/kick_level1.yaml", "policies/CR7_level1.yaml")


def one_run(policy: str, record: bool, priority: int, out: Path) -> dict:
    command = [sys.executable, "-m", "asap_ros.cli", "sim", "--policy", policy, "--out", str(out / "run"),
               "--rt-priority", str(priority)]
    if record:
        command += ["--record", str(out / "bags")]
    with FloorProbe(priority) as probe:
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    (out / "output.log").write_text(result.stdout + result.stderr)
    summary_path = out / "run" / "summary.json"
    if not summary_path.exists():
        return {"outcome": f"no summary (exit {result.returncode}): {result.stderr.strip()[-300:]}",
                "probe": probe.lateness}
    summary = json.loads(summary_path.read_text())
    timing = summary.get("timing") or {}
    fault = summary.get("fault")
    return {"outcome": "completed" if summary.get("outcome") == "completed" and not fault else f"ABORTED: {fault or summary.get('outcome')}",
            "steps": timing.get("steps", 0), "late": timing.get("deadline_misses", 0),
            "longest": timing.get("longest_late_run", 0), "probe": probe.lateness}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--priority", type=int, default=80, help="the control thread's SCHED_FIFO priority")
    parser.add_argument("--out", type=Path, help="keep each run's files here (default: a temporary folder)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="sim_runs_"))
    plans = list(itertools.product(POLICIES, (False, True)))
    loop_late = loop_steps = probe_late = probe_count = aborted = 0
    print(f"{args.runs} runs of asap-ros sim, control thread and floor probe at SCHED_FIFO {args.priority} ({out})")
    for i in range(args.runs):
        policy, record = plans[i % len(plans)]
        row = one_run(policy, record, args.priority, out / f"run{i:02d}")
        probe = row["probe"]
        name = f"{Path(policy).stem}{' --record' if record else ''}"
        if "steps" not in row:
            aborted += 1
            print(f"{i + 1:2d} {name:24s} {row['outcome']}")
            continue
        aborted += row["outcome"] != "completed"
        loop_late, loop_steps = loop_late + row["late"], loop_steps + row["steps"]
        probe_late, probe_count = probe_late + probe.misses, probe_count + probe.count
        share = row["late"] / max(row["steps"], 1)
        print(f"{i + 1:2d} {name:24s} {row['outcome']:40s} loop {row['late']:3d}/{row['steps']} late "
              f"({100 * share:.2f}%, run {row['longest']}) | probe {probe.misses:3d}/{probe.count} "
              f"({100 * probe.share:.2f}%, run {probe.longest_run}, max {probe.max_ms:.1f} ms)")
    loop_share, probe_share = loop_late / max(loop_steps, 1), probe_late / max(probe_count, 1)
    ratio = compared_text(loop_late, loop_steps, probe_late, probe_count, "probe")
    print(f"aborted on a safety limit: {aborted} of {args.runs}; late: loop {loop_late}/{loop_steps} "
          f"({100 * loop_share:.3f}%), probe {probe_late}/{probe_count} ({100 * probe_share:.3f}%): {ratio}")


if __name__ == "__main__":
    main()
