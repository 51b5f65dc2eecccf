"""Recorded sessions of the simulated G1 (``asap-ros sim --record``), for tests and figures.

Each call runs the real-time simulated session in its own process (its own DDS domain) and
returns the bag it recorded with the run's summary, the reference the exported metrics and
the gap analysis are checked against.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from asap_ros.core.errors import AsapError
from asap_ros.sim.stalls import stalls_near

RUN_TIMEOUT_S = 300.0
ATTEMPTS = 3
"""Runs at most until one tracks a motion."""
STEADY_ATTEMPTS = 5
"""Runs at most until one tracks a motion with no simulator stall in it (17-20 s a run here)."""


@dataclass(frozen=True)
class SimSession:
    bag: Path
    summary: dict
    out_dir: Path


def record_sim_session(work: str | Path, profile: str = "nominal", policy: str | None = None,
                       stand_up_s: float = 1.0, attempts: int | None = None,
                       controller_config: str | Path | None = None, steady_motion: bool = False) -> SimSession:  # fmt: skip
    """Run ``asap-ros sim --record`` into ``work`` (kept: reused when it already holds a run).

    The motion may end early (fall, fault): the summary's ``outcome`` says so. A run that ends
    before the actor took 4 steps (the simulated robot dropping off its elastic band can trip
    a safety limit on a busy machine) is run again, ``attempts`` times in all (default
    :data:`ATTEMPTS`, or :data:`STEADY_ATTEMPTS` with ``steady_motion``); each aborted run
    stays in ``work`` with its summary. With ``steady_motion`` so is a run whose simulator
    stalled (a LowState gap over one control period, :mod:`asap_ros.sim.stalls`) while the actor
    ran: the host took CPUs away, and the recorded motion holds late commands the profile's robot
    never saw. Stalls before TRACKING (standing up, the band) or after it do not count.
    """
    work = Path(work)
    attempts = attempts if attempts is not None else STEADY_ATTEMPTS if steady_motion else ATTEMPTS
    stalled = 0
    for attempt in range(attempts):
        session = _run(work / f"attempt{attempt}", profile, policy, stand_up_s, controller_config)
        if session is not None and steady_motion and stalls_in_motion(session.summary):
            stalled += 1
            continue
        if session is not None:
            return session
    raise AsapError(f"simulated session in {work}: no run tracked a motion in {attempts} attempts"
                    + (f" without a simulator stall during it ({stalled} stalled)" if steady_motion else "")
                    + "; see the runs there")


def stalls_in_motion(summary: dict) -> int:
    """The simulator's stalls near the TRACKING steps' LowState ticks (all of them if unknown)."""
    stalls, ticks = summary["sim"]["stalls"], summary.get("motion_ticks")
    return stalls["count"] if ticks is None else stalls_near(stalls, *ticks)


def _run(work: Path, profile: str, policy: str | None, stand_up_s: float,
         controller_config: str | Path | None) -> SimSession | None:
    out, bags = work / "run", work / "bags"
    if not (out / "summary.json").is_file():
        command = [sys.executable, "-m", "asap_ros.cli", "sim", "--profile", profile, "--out", str(out),
                   "--record", str(bags), "--stand-up-s", str(stand_up_s)]  # fmt: skip
        if policy is not None:
            command += ["--policy", policy]
        if controller_config is not None:
            command += ["--controller-config", str(controller_config)]
        result = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        if not (out / "summary.json").is_file():  # exit 1 with a summary: the motion ended early
            raise AsapError(f"asap-ros sim failed (exit {result.returncode}): {result.stdout[-2000:]}")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    recorded = sorted(p for p in bags.glob("*") if (p / "metadata.yaml").is_file())
    if len(recorded) != 1:
        raise AsapError(f"simulated session in {work} left {len(recorded)} bags (expected 1); see {out}")
    return SimSession(recorded[0], summary, out) if summary["tracking"] is not None else None
