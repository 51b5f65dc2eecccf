"""The machine's real-time floor: a thread that only sleeps to absolute deadlines, at a given priority.

Run as its own process beside a control loop (``python -m asap_ros.bench.floor_probe``): it
shares no GIL and does no work, so its lateness is what the kernel and the hypervisor do to any
thread at that priority. The control loop's lateness beyond it is the product's. It wakes the
way the control loop does (a timed wait on a condition, GIL released) on the loop's own
deadlines: multiples of the period on the monotonic clock (``--phase-ms`` 0), and writes its
wake-up lateness (ns) as JSON when it ends (``--duration``, SIGTERM or SIGINT).

With ``--step-policy`` it is the *step probe*: after each wake-up it runs one real control step of
that policy (:class:`~asap_ros.bench.tick.StepReplay`: decode, observation, ONNX actor, encode),
alone in its process, and its lateness is the step's end past the deadline, as the control loop
counts its own. The benchmarks run it half a period off the loop's deadlines: on them, its step
and the loop's would wait for each other's CPU. Its misses beyond the floor's are what a step's own length exposes to this
machine; the loop's beyond the step probe's are what the loop's process adds (its other threads,
the GIL, DDS), the most a control loop in a process of its own could remove.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asap_ros.bench.rate_ratio import compared_text
from asap_ros.runtime.scheduling import on_grid, run_realtime

__all__ = ["FloorProbe", "Lateness", "beside_the_floor", "lateness_summary", "main", "probe", "with_a_step"]

Work = Callable[[], object]
"""What the step probe runs after each wake-up (its result is ignored)."""

READY = "probing"
"""The probe's first line on stdout: it is about to sleep to its first deadline."""
LATE_AFTER_NS = 5_000_000
"""A wake-up this long past its deadline counts as a miss (the control loop's shipped ``late_after_ms``)."""


@dataclass(frozen=True)
class Lateness:
    """Deadline misses of one series of wake-ups (or control steps)."""

    count: int
    misses: int
    longest_run: int
    """Most misses in a row."""
    p50_ms: float
    p99_ms: float
    max_ms: float

    @property
    def share(self) -> float:
        return self.misses / self.count if self.count else 0.0

    def line(self, name: str) -> str:
        return (f"{name}: {self.misses} of {self.count} late > {LATE_AFTER_NS / 1e6:g} ms ({100 * self.share:.2f}%), "
                f"longest run {self.longest_run}, lateness p50 {self.p50_ms:.2f} ms p99 {self.p99_ms:.2f} ms "
                f"max {self.max_ms:.2f} ms")


def lateness_summary(late_ns: np.ndarray | list[int], late_after_ns: int = LATE_AFTER_NS) -> Lateness:
    """Misses (lateness > ``late_after_ns``), the longest run of them and lateness percentiles."""
    late = np.asarray(late_ns, dtype=np.int64)
    missed = late > late_after_ns
    longest = run = 0
    for miss in missed:
        run = run + 1 if miss else 0
        longest = max(longest, run)
    p50, p99, pmax = (np.percentile(late, [50, 99, 100]) / 1e6) if len(late) else (0.0, 0.0, 0.0)
    return Lateness(len(late), int(missed.sum()), longest, float(p50), float(p99), float(pmax))


def probe(period_ns: int, stop: threading.Event, priority: int = 0, work: Work | None = None,
          phase_ns: int = 0) -> list[int]:  # fmt: skip
    """Sleep to the deadlines ``k·period_ns + phase_ns`` of the monotonic clock until ``stop``; the
    lateness of each wake-up, or with ``work`` (run once after each wake-up) the lateness of its end."""
    note = run_realtime(priority)
    if note:
        print(f"floor_probe: {note}", file=sys.stderr)
    wake = threading.Event()
    late: list[int] = []
    deadline = on_grid(time.monotonic_ns(), period_ns, phase_ns)
    while not stop.is_set():
        wake.wait(max(0.0, (deadline - time.monotonic_ns()) / 1e9))
        if work is not None:
            work()
        now = time.monotonic_ns()
        late.append(now - deadline)
        deadline += period_ns
        if now >= deadline:  # overslept whole periods: keep the grid, as the control loop does
            deadline = on_grid(now, period_ns, deadline)
    return late


def beside_the_floor(late_flags: np.ndarray | list[bool], probe: Lateness, step_probe: Lateness | None = None) -> str:
    """The control loop's late steps (one flag per step, in order) beside the probe's, and the ratio
    of their shares with its 95% interval (the acceptance: at most 1.5); with ``step_probe`` also
    beside the step probe's."""
    flags = np.asarray(late_flags, dtype=bool)
    longest = run = 0
    for late in flags:
        run = run + 1 if late else 0
        longest = max(longest, run)
    share = flags.mean() if len(flags) else 0.0
    misses = int(flags.sum())
    lines = [f"control loop: {misses} of {len(flags)} steps late > {LATE_AFTER_NS / 1e6:g} ms "
             f"({100 * share:.2f}%), longest run {longest}: {_ratio(misses, len(flags), probe, 'probe')}",
             probe.line("floor probe (same priority, same run)")]
    if step_probe is not None:
        lines[0] += f"; {_ratio(misses, len(flags), step_probe, 'step probe')}"
        lines.append(step_probe.line("step probe (the same step alone in a process, same priority, same run)")
                     + f": {_ratio(step_probe.misses, step_probe.count, probe, 'floor probe')}")
    return "\n".join(lines)


def with_a_step(probe_late_ns: np.ndarray | list[int], step_ns: float, late_after_ns: int = LATE_AFTER_NS) -> str:
    """The floor probe's wake-ups after which a step of ``step_ns`` (the loop's median) would have
    ended more than ``late_after_ns`` past the deadline: the misses a loop with that step gets from
    this machine alone, its own misses included."""
    late = np.asarray(probe_late_ns, dtype=np.int64)
    would = int((late + step_ns > late_after_ns).sum())
    share = would / len(late) if len(late) else 0.0
    return (f"floor probe with the loop's median step ({step_ns / 1e6:.2f} ms) after each wake-up: {would} of "
            f"{len(late)} would end late > {late_after_ns / 1e6:g} ms ({100 * share:.3f}%)")


def _ratio(misses: int, count: int, other: Lateness, name: str) -> str:
    return compared_text(misses, count, other.misses, other.count, name)


class FloorProbe:
    """The probe as a child process for the length of a ``with`` block (benchmarks): started before
    the loop it is compared with, stopped after it; :attr:`lateness` is its summary afterwards."""

    def __init__(self, priority: int, period_ms: float = 20.0, cpu: int | None = None,
                 step_policy: str | None = None, phase_ms: float = 0.0) -> None:
        import tempfile

        self._json = Path(tempfile.mkdtemp(prefix="floor_probe_")) / "probe.json"
        self._command = [sys.executable, "-m", "asap_ros.bench.floor_probe", "--priority", str(priority),
                         "--period-ms", str(period_ms), "--phase-ms", str(phase_ms), "--json", str(self._json)]
        if cpu is not None:
            self._command += ["--cpu", str(cpu)]
        if step_policy is not None:
            self._command += ["--step-policy", step_policy]
        self._process: subprocess.Popen | None = None
        self.late_ns: list[int] = []
        self.lateness: Lateness | None = None

    def __enter__(self) -> FloorProbe:
        """Start the probe and return once it sleeps to its first deadline (a step probe has
        loaded its policy by then)."""
        self._process = subprocess.Popen(self._command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self._process.stdout is not None
        if self._process.stdout.readline().strip() != READY:
            _, err = self._process.communicate(timeout=30)
            raise RuntimeError(f"floor probe failed to start (exit {self._process.returncode}): {err.strip()}")
        return self

    def __exit__(self, *_exc: object) -> None:
        assert self._process is not None
        self._process.send_signal(signal.SIGTERM)
        _, err = self._process.communicate(timeout=30)
        if self._process.returncode != 0 or not self._json.exists():
            raise RuntimeError(f"floor probe failed (exit {self._process.returncode}): {err.strip()}")
        self.late_ns = json.loads(self._json.read_text())["late_ns"]
        self.lateness = lateness_summary(self.late_ns)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="floor_probe", description=__doc__.splitlines()[0])
    parser.add_argument("--priority", type=int, default=0, help="SCHED_FIFO priority (0: normal)")
    parser.add_argument("--period-ms", type=float, default=20.0)
    parser.add_argument("--phase-ms", type=float, default=0.0,
                        help="deadlines this far past multiples of the period (0: the control loop's own)")
    parser.add_argument("--cpu", type=int, help="pin to this CPU")
    parser.add_argument("--duration", type=float, help="seconds (default: until SIGTERM/SIGINT)")
    parser.add_argument("--json", type=Path, required=True, help="write the lateness list (ns) here")
    parser.add_argument("--step-policy", help="run one control step of this policy (spec name or file) per wake-up")
    args = parser.parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    work = None
    if args.step_policy is not None:
        from asap_ros.bench.tick import StepReplay
        from asap_ros.core.errors import ConfigError

        try:
            work = StepReplay.load(args.step_policy)
        except (ConfigError, OSError) as exc:
            print(f"floor_probe: --step-policy {args.step_policy}: {exc}", file=sys.stderr)
            return 2
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    result: list[list[int]] = []
    period_ns = int(args.period_ms * 1e6)
    worker = threading.Thread(target=lambda: result.append(probe(period_ns, stop, args.priority, work,
                                                                  int(args.phase_ms * 1e6))),
                              name="floor-probe")
    print(READY, flush=True)
    worker.start()
    stop.wait(args.duration)
    stop.set()
    worker.join()
    args.json.write_text(json.dumps({"period_ms": args.period_ms, "phase_ms": args.phase_ms, "priority": args.priority,
                                     "step_policy": args.step_policy, "late_ns": result[0]}))
    print(lateness_summary(result[0]).line("step probe" if work is not None else "floor probe"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
