"""Fault injection on the simulated G1: every failure ends in damping (or HOLD) from exactly one writer.

asap_deploy and asap_supervisor run as real processes against the simulated G1 over real DDS,
at the shipped settings (150 ms lease, 200 ms takeover, 60 ms e-stop window, 5 ms late margin);
an independent rt/lowcmd reader attributes every sample to its DDS writer (publication handle).
Each scenario provokes one fault and prints: the time from the fault to the first damping (or
HOLD) command on the bus, the most distinct writers seen on rt/lowcmd in any 20 ms window
(must be 1), the commands with kp > 0 after the first damping one (must be 0), and what the
operator sees (deploy fault, supervisor state).

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

from asap_ros.runtime.domains import process_domain
from asap_ros.sim.process import stop_gracefully
from asap_ros.testing.ros_system import ROOT, RogueWriter, System, max_writers_in_window, simulator_line


@dataclass
class Row:
    scenario: str
    to_safe_ms: float | None
    """Fault -> first damping (or HOLD) command on rt/lowcmd; None: none seen."""
    writers: int | None
    """None: not a measure of this scenario (a rogue writer is a second writer by design)."""
    stiff_after: int
    """Commands with kp > 0 after the first damping one (must be 0)."""
    reason: str


def operator_view(system: System) -> str:
    latched = system.ros.latched
    system.ros.spin_until(lambda: False, 0.3)
    fault = latched.get("/asap_deploy/fault", "") or "-"
    return f"deploy {latched.get('/asap_deploy/mode', '?')}: {fault} | supervisor {latched.get('/asap_supervisor/state', '?')}"


def observe(system: System, name: str, fault_at_ns: int, settle_s: float = 1.0,
            safe: Callable = lambda s: s.damping, reset_at_ns: int | None = None) -> Row:
    """The row of a fault injected at ``fault_at_ns`` (wall clock, as the observer's stamps);
    ``reset_at_ns``: the operator's reset, after which stiffness is the operator's Stand."""
    first = system.lowcmd.wait_for(safe, fault_at_ns, 10.0)
    time.sleep(settle_s)
    samples = system.lowcmd.between(fault_at_ns - 1_000_000_000, time.time_ns())
    stiff = [s for s in samples if first is not None and s.stamp_ns > first.stamp_ns and not s.damping
             and (reset_at_ns is None or s.stamp_ns < reset_at_ns)]
    return Row(name, (first.stamp_ns - fault_at_ns) / 1e6 if first else None, max_writers_in_window(samples),
               len(stiff), operator_view(system))


def hang(seconds: float) -> Callable[[System], Row]:
    def scenario(system: System) -> Row:
        system.track()
        stopped_at = time.time_ns()
        system.signal_deploy(signal.SIGSTOP)
        time.sleep(seconds)
        system.signal_deploy(signal.SIGCONT)
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


def stall(system: System) -> Row:
    """One 300 ms actor step (a stall between the step's verdict and its write), no e-stop."""
    return injected("a 300 ms step, no e-stop", "slow=0.3@motion_tick=25", "TAKEOVER")(system)


def supervisor_dies(system: System) -> Row:
    """SIGSTOP of the deploy node 1 s (takeover), SIGCONT, then SIGKILL of the supervisor: the
    fault is the kill; the row's time is from the supervisor's last command to the deploy node's
    first after it."""
    system.track()
    system.signal_deploy(signal.SIGSTOP)
    system.ros.spin_until(lambda: system.ros.latched.get("/asap_supervisor/state", "").startswith("TAKEOVER"), 5.0)
    time.sleep(0.8)
    system.signal_deploy(signal.SIGCONT)
    time.sleep(0.5)
    supervisor = system.lowcmd.between(time.time_ns() - 200_000_000, time.time_ns())[-1].writer
    killed = time.time_ns()
    os.kill(system.supervisor.pid, signal.SIGKILL)
    system.supervisor.wait(10)
    row = observe(system, "supervisor killed during a takeover (from its last command)", killed, settle_s=1.0,
                  safe=lambda s: s.writer != supervisor)
    last = max(s.stamp_ns for s in system.lowcmd.between(killed - 500_000_000, killed + 500_000_000)
               if s.writer == supervisor)
    first = system.lowcmd.wait_for(lambda s: s.writer != supervisor, last, 1.0)
    row.to_safe_ms = (first.stamp_ns - last) / 1e6 if first else None
    system.start_supervisor()
    return row


def combo_held(system: System) -> Row:
    """L2+B held on the remote, then ``ctl reset`` and ``ctl stand`` while it is held."""
    from asap_ros.core.remote import parse_combo

    system.track()
    pressed = time.time_ns()
    system.press_remote(parse_combo("L2+B"))
    try:
        system.ros.wait_mode("DAMPING", 5.0)
        reset, stand = system.ctl("reset"), system.ctl("stand")
        row = observe(system, "L2+B held, ctl reset + ctl stand while held", pressed, settle_s=0.5)
        row.reason += f" | ctl reset: {reset.stdout.strip()} | ctl stand: {stand.stdout.strip()}"
    finally:
        system.press_remote(frozenset())
    return row


def two_supervisors(system: System) -> Row:
    """A second supervisor; SIGSTOP of the deploy node 1 s, SIGCONT, ctl reset, ctl stand."""
    second = system.start_second_supervisor()
    try:
        time.sleep(3.0)  # its start-up and listening
        system.track()
        stopped = time.time_ns()
        system.signal_deploy(signal.SIGSTOP)
        time.sleep(1.0)
        system.signal_deploy(signal.SIGCONT)
        time.sleep(1.0)
        reset_at = time.time_ns()
        reset, stand = system.ctl("reset"), system.ctl("stand")
        system.ros.wait_mode("HOLD", 30.0)
        row = observe(system, "a second supervisor; SIGSTOP 1 s, SIGCONT, ctl reset, ctl stand (kp > 0 counted "
                      "until the reset)", stopped, settle_s=0.5, reset_at_ns=reset_at)
        row.reason += f" | ctl reset: {reset.returncode}, ctl stand: {stand.returncode}"
    finally:
        stop_gracefully(second)
    return row


def estop_restart(system: System) -> Row:
    """An e-stop, then the supervisor killed and started again: the e-stop is still held."""
    sent, _ = system.ros.trigger_at("/asap_supervisor/estop")
    system.ros.wait_mode("DAMPING", 5.0)
    os.kill(system.supervisor.pid, signal.SIGKILL)
    system.supervisor.wait(10)
    system.start_supervisor()
    refused = system.ros.trigger("/asap_deploy/reset")
    row = observe(system, "e-stop, supervisor killed and restarted", sent, settle_s=0.5)
    row.reason += f" | deploy reset: {refused}"
    return row


def rogue_writer(system: System) -> Row:
    """A third participant writes damping at 50 Hz; the deploy node hangs (SIGSTOP)."""
    system.track()
    with RogueWriter():
        stopped = time.time_ns()
        system.signal_deploy(signal.SIGSTOP)
        try:
            system.ros.spin_until(lambda: system.ros.latched.get("/asap_supervisor/state", "").startswith("TAKEOVER"),
                                  5.0)
            taken = time.time_ns()
        finally:
            system.signal_deploy(signal.SIGCONT)
    time.sleep(1.0)
    stiff = [s for s in system.lowcmd.between(taken, time.time_ns()) if not s.damping]
    row = Row("a third writer on rt/lowcmd, deploy hung (to TAKEOVER state)", (taken - stopped) / 1e6, None,
              len(stiff), operator_view(system))
    return row


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
        "stall": stall,
        "supervisor-dies": supervisor_dies,
        "combo-held": combo_held,
        "two-supervisors": two_supervisors,
        "estop-restart": estop_restart,
        "rogue-writer": rogue_writer,
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
    print("| scenario | fault -> first damping/HOLD command (ms) | max writers in a 20 ms window | kp > 0 after the "
          "first damping | what the operator sees |")
    print("|---|---|---|---|---|")
    for row in rows:
        latency = f"{row.to_safe_ms:.1f}" if row.to_safe_ms is not None else "none"
        writers = "-" if row.writers is None else row.writers
        print(f"| {row.scenario} | {latency} | {writers} | {row.stiff_after} | {row.reason} |")
    print(simulator_line(system.sim.stats()))
    print(f"(logs: {logs})")


if __name__ == "__main__":
    main()
