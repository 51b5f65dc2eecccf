"""Supervisor takeover: ``kill -9`` (or ``kill -STOP``) of asap_deploy while tracking -> first
damping LowCmd from asap_supervisor on rt/lowcmd.

Simulated G1 (``asap_sim``), deploy and supervisor as processes, an independent rt/lowcmd
reader that tells writers apart by their DDS publication handle. Each trial also checks that
the supervisor wrote nothing while the deploy node was alive. Target: within 50 ms.
``--signal STOP`` freezes the process instead (a hang: detected by silence, not by exit).

    .venv/bin/python benchmarks/supervisor_takeover.py [--trials 20] [--signal KILL|STOP]
"""

from __future__ import annotations

import argparse
import random
import signal
import tempfile
import time
from pathlib import Path

from asap_ros.runtime.domains import process_domain
from asap_ros.testing.ros_system import System, distribution_ms, simulator_line, track_or_recover

TARGET_MS = 50.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--signal", choices=("KILL", "STOP"), default="KILL")
    parser.add_argument("--domain", type=int, default=process_domain())
    args = parser.parse_args()
    logs = Path(tempfile.mkdtemp(prefix="supervisor_takeover_"))
    system = System(args.domain, logs)
    latencies: list[int] = []
    early_writes = 0
    faults: list[str] = []
    try:
        system.start()
        released_at = 0
        for trial in range(args.trials):
            if trial:
                system.start_deploy("DAMPING")  # started under the takeover
                system.hand_back_and_stand()
                released_at = time.time_ns()
            while not track_or_recover(system, faults, args.trials):
                pass
            time.sleep(random.uniform(0.2, 0.7))
            writer = system.lowcmd.wait_for(lambda s: True, time.time_ns(), 5.0).writer
            stopped_at = time.time_ns()
            system.signal_deploy(getattr(signal, f"SIG{args.signal}"))
            takeover = system.lowcmd.wait_for(lambda s, writer=writer: s.writer != writer and s.damping, stopped_at, 5.0)
            if takeover is None:
                raise SystemExit(f"trial {trial}: no supervisor damping")
            latencies.append(takeover.stamp_ns - stopped_at)
            early_writes += takeover.writer in system.lowcmd.writers_between(released_at, stopped_at)
            system.deploy.kill()
            system.deploy.wait(10)
    finally:
        system.close()
    within = sum(v <= TARGET_MS * 1e6 for v in latencies)
    print(f"motions lost to a safety fault before the kill (simulated robot in its band): {len(faults)}")
    print(f"kill -{args.signal} of asap_deploy -> first supervisor damping LowCmd: {distribution_ms(latencies)}")
    print(simulator_line(system.sim.stats()))
    print(f"within {TARGET_MS:g} ms: {within}/{len(latencies)}; trials where the supervisor wrote while deploy "
          f"was alive: {early_writes}  (logs: {logs})")


if __name__ == "__main__":
    main()
