"""E-stop latency: ``~/estop`` service call while tracking -> first damping LowCmd on rt/lowcmd.

Simulated G1 (``asap_sim``, 500 Hz LowState), asap_deploy and asap_supervisor as processes,
an independent rt/lowcmd reader stamping arrivals. Each trial: stand, start kick_level1, wait
until TRACKING plus a random 0-0.5 s, call ``/asap_deploy/estop``, time the first LowCmd with
kp 0 on every motor from the deploy node's writer, reset. Target: within one control period
(20 ms).

    .venv/bin/python benchmarks/estop_latency.py [--trials 50]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from asap_ros.runtime.domains import process_domain
from asap_ros.testing.ros_system import System, distribution_ms, simulator_line, track_or_recover

PERIOD_MS = 20.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--domain", type=int, default=process_domain())
    args = parser.parse_args()
    logs = Path(tempfile.mkdtemp(prefix="estop_latency_"))
    system = System(args.domain, logs)
    latencies: list[int] = []
    faults: list[str] = []
    try:
        system.start()
        system.ros.trigger("/asap_deploy/estop")  # warm the service connection, then start over
        system.reset_and_stand()
        while len(latencies) < args.trials:
            trial = len(latencies)
            if not track_or_recover(system, faults, args.trials):
                continue
            time.sleep(random.uniform(0.0, 0.5))
            writer = system.lowcmd.wait_for(lambda s: True, time.time_ns(), 5.0).writer
            sent, (ok, message) = system.ros.trigger_at("/asap_deploy/estop")
            first = system.lowcmd.wait_for(lambda s, writer=writer: s.damping and s.writer == writer, sent, 5.0)
            if not ok or first is None:
                raise SystemExit(f"trial {trial}: e-stop failed: {message}")
            latencies.append(first.stamp_ns - sent)
            system.ros.wait_mode("DAMPING", 5.0)
            system.reset_and_stand()
    finally:
        system.close()
    within = sum(v <= PERIOD_MS * 1e6 for v in latencies)
    print(f"trials lost to a safety fault before the e-stop (simulated robot in its band): {len(faults)}")
    for fault in sorted(set(faults)):
        print(f"  {fault}")
    print(f"e-stop service -> first damping LowCmd: {distribution_ms(latencies)}")
    print(simulator_line(system.sim.stats()))
    print(f"within one control period ({PERIOD_MS:g} ms): {within}/{len(latencies)}  (logs: {logs})")


if __name__ == "__main__":
    main()
