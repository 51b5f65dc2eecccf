"""Fault injection on the simulated G1: every failure ends in damping (or HOLD) from exactly one writer.

asap_deploy and asap_supervisor run as real processes against the simulated G1 over real DDS;
an independent rt/lowcmd reader attributes every sample to its DDS writer (publication handle).
Each scenario provokes one fault and prints: the time from the fault to the first damping (or
HOLD) command on the bus, the most distinct writers seen on rt/lowcmd in any 20 ms window
(must be 1), and the reason the operator sees (deploy fault, supervisor state).

    .venv/bin/python benchmarks/faults.py [--only NAME ...] [--long-hang-s 25]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from asap_ros.runtime.dds import process_domain
from asap_ros.testing.ros_system import ROOT, System, max_writers_in_window, simulator_line


@dataclass
class Row:
    scenario: str
    to_safe_ms: float | None
    """Fault -> first damping (or HOLD) command on rt/lowcmd; None: none seen."""
    writers: int
    reason: str


def operator_view(system: System) -> str:
    latched = system.ros.latched
    system.ros.spin_until(lambda: False, 0.3)
    fault = latched.get("/asap_deploy/fault", "") or "-"
    return f"deploy {latched.get('/asap_deploy/mode', '?')}: {fault} | supervisor {latched.get('/asap_supervisor/state', '?')}"


def observe(system: System, name: str, fault_at_ns: int, settle_s: float = 1.0,
            safe: Callable = lambda s: s.damping) -> Row:
    """The row of a fault injected at ``fault_at_ns`` (wall clock, as the observer's stamps)."""
    first = system.lowcmd.wait_for(safe, fault_at_ns, 10.0)
    time.sleep(settle_s)
    samples = system.lowcmd.between(fault_at_ns - 1_000_000_000, time.time_ns())
    return Row(name, (first.stamp_ns - fault_at_ns) / 1e6 if first else None, max_writers_in_window(samples),
               operator_view(system))


def hang(seconds: float) -> Callable[[System], Row]:
    def scenario(system: System) -> Row:
        system.track()
        stopped_at = time.time_ns()
        os.kill(system.deploy.pid, signal.SIGSTOP)
        time.sleep(seconds)
        os.kill(system.deploy.pid, signal.SIGCONT)
        return observe(system, f"SIGSTOP {seconds:g} s, then SIGCONT", stopped_at, settle_s=2.0)
    return scenario


def kill_9(system: System) -> Row:
    system.track()
    return observe(system, "kill -9 while tracking", system.kill_deploy())


def restart_during_takeover(system: System) -> Row:
    system.track()
    killed_at = system.kill_deploy()
    system.lowcmd.wait_for(lambda s: s.damping, killed_at, 10.0)
    system.start_deploy("DAMPING")
    env = {**os.environ, "ROS_DOMAIN_ID": str(system.domain)}
    stand = subprocess.run([sys.executable, "-m", "asap_ros.cli", "ctl", "stand"], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
    row = observe(system, "kill -9, deploy restarted during the takeover", killed_at, settle_s=2.0)
    row.reason += f" | ctl stand: {stand.stdout.strip()}"
    return row


def injected(name: str, faults: str, marker: str) -> Callable[[System], Row]:
    """A deploy process started with ``ASAP_ROS_FAULT_INJECTION=faults``, tracking; the fault is
    taken to happen after the last command with stiffness, once the deploy node's fault or the
    supervisor's state shows ``marker``."""
    def scenario(system: System) -> Row:
        system.restart_nodes({"ASAP_ROS_FAULT_INJECTION": faults})
        started = time.time_ns()
        system.track()
        latched = system.ros.latched
        system.ros.spin_until(lambda: marker in latched.get("/asap_deploy/fault", "")
                              or marker in latched.get("/asap_supervisor/state", ""), 20.0)
        return observe(system, name, _last_stiff_command(system, started), settle_s=1.0)
    return scenario


def _last_stiff_command(system: System, since_ns: int) -> int:
    """Arrival of the last command with stiffness: the fault is between it and the first damping."""
    stiff = [s for s in system.lowcmd.between(since_ns, time.time_ns()) if not s.damping]
    return stiff[-1].stamp_ns if stiff else since_ns


def estop_during_slow_steps(system: System) -> Row:
    system.restart_nodes({"ASAP_ROS_FAULT_INJECTION": "slow=0.3@motion_tick=20+"})
    system.track()
    time.sleep(0.6)
    sent, (ok, message) = system.ros.trigger_at("/asap_deploy/estop")
    row = observe(system, "e-stop during 300 ms steps", sent, settle_s=1.0)
    row.reason += f" | e-stop reply: {ok}, {message}"
    return row


def clock_step(system: System) -> Row:
    """The loop's system clock steps 10 s back mid-motion: no damping ("none") is the right row."""
    system.restart_nodes({"ASAP_ROS_FAULT_INJECTION": "clock=-10@motion_tick=30"})
    started = time.time_ns()
    system.track()
    assert system.ros.wait_mode("HOLD", 60.0), f"the motion did not end in HOLD: {system.ros.latched}"
    return observe(system, "system clock 10 s back at motion step 30", started, settle_s=0.5)


def sim_motor(name: str, action: str, value: float, release: tuple[str, float]) -> Callable[[System], Row]:
    """The simulated motor 3 reports ``action`` = ``value`` while tracking; HOLD counts as safe."""
    def scenario(system: System) -> Row:
        system.restart_nodes()
        system.track()
        at = time.time_ns()
        system.sim.request(action, value, motor=3)
        try:
            return observe(system, name, at, settle_s=1.0,
                           safe=lambda s: s.damping or system.ros.latched.get("/asap_deploy/mode") == "HOLD")
        finally:
            system.sim.request(release[0], release[1], motor=3)
    return scenario


def scenarios(long_hang_s: float) -> dict[str, Callable[[System], Row]]:
    from asap_ros.sim.dds_types import MOTOR_ERROR, MOTOR_TEMPERATURE, MOTOR_TEMPERATURE_RELEASE

    release_heat = (MOTOR_TEMPERATURE_RELEASE, 0.0)
    return {
        "hang": hang(2.0),
        "long-hang": hang(long_hang_s),
        "kill": kill_9,
        "restart": restart_during_takeover,
        "raise": injected("a control step raises", "raise@motion_tick=30", "control step raised"),
        "thread-exit": injected("the control thread ends", "exit@motion_tick=30", "TAKEOVER"),
        "inf": injected("+inf actor output", "inf=3@motion_tick=40", "policy kick_level1"),
        "slow-estop": estop_during_slow_steps,
        "clock-step": clock_step,
        "motor-error": sim_motor("motor error bit", MOTOR_ERROR, 0x200, (MOTOR_ERROR, 0)),
        "hot-abort": sim_motor("motor at 80 C (abort level)", MOTOR_TEMPERATURE, 80.0, release_heat),
        "hot-limit": sim_motor("motor at 90 C (hard limit)", MOTOR_TEMPERATURE, 90.0, release_heat),
    }


ATTEMPTS = 2
"""Tries per scenario: a restart of the nodes or a Stand around it can fail on this loaded guest."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="scenario names (default: all)")
    parser.add_argument("--long-hang-s", type=float, default=25.0)
    parser.add_argument("--domain", type=int, default=process_domain())
    args = parser.parse_args()
    table = scenarios(args.long_hang_s)
    chosen = args.only or list(table)
    unknown = sorted(set(chosen) - set(table))
    if unknown:
        raise SystemExit(f"unknown scenario(s) {', '.join(unknown)} (known: {', '.join(table)})")
    logs = Path(tempfile.mkdtemp(prefix="faults_"))
    system = System(args.domain, logs)
    rows: list[Row] = []
    try:
        system.start()
        for name in chosen:
            for attempt in range(1, ATTEMPTS + 1):
                try:
                    system.ensure_holding()
                    rows.append(table[name](system))
                    break
                except AssertionError as exc:  # the set-up around the scenario failed: said, then once more
                    print(f"{name}: attempt {attempt} failed: {str(exc).splitlines()[0]}", file=sys.stderr, flush=True)
                    if attempt == ATTEMPTS:
                        raise
            print(f"{name}: done", file=sys.stderr, flush=True)
    finally:
        system.close()
    print("| scenario | fault -> first damping/HOLD command (ms) | max writers in a 20 ms window | what the operator sees |")
    print("|---|---|---|---|")
    for row in rows:
        latency = f"{row.to_safe_ms:.1f}" if row.to_safe_ms is not None else "none"
        print(f"| {row.scenario} | {latency} | {row.writers} | {row.reason} |")
    print(simulator_line(system.sim.stats()))
    print(f"(logs: {logs})")


if __name__ == "__main__":
    main()
