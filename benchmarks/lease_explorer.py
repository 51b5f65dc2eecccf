"""Explore fault schedules of the rt/lowcmd lease and print what breaks, and how fast.

    .venv/bin/python benchmarks/lease_explorer.py --schedules 100000 [--first 0] [--jobs 2]

Plays ``draw(seed)`` for ``--schedules`` seeds from ``--first`` on (:mod:`asap_ros.testing.lease_explorer`,
the shipped timing), in ``--jobs`` processes, and prints the rate (schedules per second, each 3 s
of virtual time), how many schedules failed, and for each kind of failure the first seed that
showed it, after how many schedules, and that schedule shrunk, as a replayable expression. A
failure's kind is its invariant and what its shrunk schedule holds (two supervisors, a supervisor
stopped or killed, a receive path held up, overruns, an attacker), named after the review's
findings where one matches. Asserts nothing; exits 1 when anything failed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time

from asap_ros.testing.lease_explorer import violations
from asap_ros.testing.schedules import Schedule, draw, shrink


def label(invariant: str, schedule: Schedule) -> str:
    """The review's name for a failure of ``invariant`` with (shrunk) ``schedule``, else a plain one."""
    kinds = set(schedule.kinds())
    on_supervisor = {f.kind for f in schedule.faults if f.who.startswith("supervisor")}
    estop = bool(kinds & {"estop", "combo"})
    if "attack" in kinds:
        return f"S1 ({invariant}: a forged grant or beat)"
    if invariant in ("I2", "I4") and schedule.supervisors == 2 and estop and on_supervisor & {"kill", "stop", "restart", "deaf"}:
        return f"N1 ({invariant}: a held e-stop released on a hand-over)"
    if invariant == "I1" and "deaf" in on_supervisor:
        return ("N2 (I1: a deaf secondary writes beside the deploy node)" if schedule.supervisors == 2
                else "N4 (I1: a deaf supervisor writes beside the deploy node)")
    if invariant == "I3" and "overrun" in kinds and on_supervisor & {"kill", "restart", "stop"}:
        return "N3 (I3: a dead supervisor and overrunning steps leave no writer)"
    if invariant in ("I2", "I4") and estop and schedule.supervisors == 2:
        return f"N5 ({invariant}: an e-stop the supervisor with authority never held)"
    if invariant == "I3" and kinds & {"stop", "overrun"} and not on_supervisor:
        return "N6 (I3: stiff again after a command gap past the robot's timeout)"
    return f"{invariant} ({', '.join(sorted(kinds - {'stand', 'start'}))})"


def _play(seed: int) -> tuple[int, list[str]]:
    return seed, sorted({v.invariant for v in violations(draw(seed))})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=max(1, multiprocessing.cpu_count()))
    args = parser.parse_args(argv)
    seeds = range(args.first, args.first + args.schedules)
    began = time.perf_counter()
    failing: dict[int, list[str]] = {}
    with multiprocessing.Pool(args.jobs) as pool:
        for done, (seed, broken) in enumerate(pool.imap(_play, seeds, chunksize=64), 1):
            if broken:
                failing[seed] = broken
            if done % 10_000 == 0:
                print(f"  {done} schedules, {len(failing)} failing, {done / (time.perf_counter() - began):.0f}/s", flush=True)
    seconds = time.perf_counter() - began
    print(f"{args.schedules} schedules in {seconds:.1f} s: {args.schedules / seconds:.0f} schedules/s on {args.jobs} "
          f"processes; {len(failing)} failing")
    seen: dict[str, tuple[int, Schedule]] = {}
    for seed in sorted(failing):
        for invariant in failing[seed]:
            shrunk = shrink(draw(seed), lambda s, n=invariant: any(v.invariant == n for v in violations(s)))
            name = label(invariant, shrunk)
            if name not in seen:
                seen[name] = (seed, shrunk)
        if len(seen) >= 12:
            break
    for name, (seed, shrunk) in sorted(seen.items()):
        print(f"\n{name}: first at seed {seed}, schedule {seed - args.first + 1}\n  {shrunk!r}")
        for v in violations(shrunk):
            print(f"  -> {v}")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
