"""The wall clock: what keeps it in sync (chrony, systemd-timesyncd) and whether it may be stepped.

Control deadlines run on the monotonic clock, which a step never moves; recorded stamps are wall
time (``time.time_ns()``), so a step shows up as a jump in a recording.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from asap_ros.doctor.report import Check, ok, warn

NAME = "time sync"
CHRONY_CONFIGS = (Path("/etc/chrony/chrony.conf"), Path("/etc/chrony.conf"))
_MAKESTEP = re.compile(r"^\s*makestep\s+(\S+)\s+(-?\d+)", re.MULTILINE)
SYNC_FIX = "install chrony (sudo apt install chrony) on the robot computer and every computer whose stamps you compare"


def _run(command: list[str]) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=5)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return None


def makestep_policy(config_text: str) -> tuple[str, int] | None:
    """chrony's ``makestep THRESHOLD LIMIT`` (the last one wins), or ``None`` when absent."""
    found = _MAKESTEP.findall(config_text)
    return (found[-1][0], int(found[-1][1])) if found else None


def chrony_check(tracking: str, config_text: str) -> Check:
    """A running chronyd: synchronised or not, and when it may step the clock."""
    reference = re.search(r"^Reference ID\s*:\s*(.*)$", tracking, re.MULTILINE)
    status = re.search(r"^Leap status\s*:\s*(.*)$", tracking, re.MULTILINE)
    source = reference.group(1).strip() if reference else "?"
    if status and status.group(1).strip() != "Normal":
        return warn(NAME, f"chrony runs but is not synchronised (leap status {status.group(1).strip()}, "
                    f"reference {source})", "check the NTP servers in chrony.conf are reachable (chronyc sources)")
    step = makestep_policy(config_text)
    if step is None:
        return ok(NAME, f"chrony synchronised to {source}; it never steps the clock (no makestep), it slews")
    threshold, limit = step
    if limit < 0:
        return warn(NAME, f"chrony synchronised to {source}, but makestep {threshold} {limit} lets it step the "
                    "clock at any time: recorded wall-time stamps can jump",
                    f"use makestep {threshold} 3 in chrony.conf (steps only in the first 3 updates, at boot)")
    return ok(NAME, f"chrony synchronised to {source}; steps the clock (offset > {threshold} s) only in its first "
              f"{limit} updates, then slews")


def check_clock() -> list[Check]:
    tracking = _run(["chronyc", "tracking"])
    if tracking is not None and tracking.returncode == 0:
        config = next((p.read_text() for p in CHRONY_CONFIGS if p.is_file()), "")
        return [chrony_check(tracking.stdout, config)]
    timedatectl = _run(["timedatectl", "show", "-p", "NTP", "-p", "NTPSynchronized"])
    if timedatectl is not None and timedatectl.returncode == 0:
        values = dict(line.split("=", 1) for line in timedatectl.stdout.split() if "=" in line)
        if values.get("NTPSynchronized") == "yes":
            return [ok(NAME, "synchronised (systemd-timesyncd); it steps the clock when the offset is large")]
        return [warn(NAME, f"not synchronised (NTP={values.get('NTP', '?')})", SYNC_FIX)]
    return [warn(NAME, "no clock synchronisation found (neither chronyc tracking nor timedatectl answer): "
                 "stamps of recordings from different computers drift apart", SYNC_FIX)]
