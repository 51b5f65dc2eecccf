"""Child processes (``asap_sim`` and the others a run or the e2e harness starts): the command line
that starts ``asap_sim``, children that die with their parent, a clean stop, ``asap_sim``'s statistics."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

STOP_TIMEOUT_S = 10.0
DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG\n"
    "os.getppid() == int(sys.argv[1]) or sys.exit('parent gone')\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def dying_with_this_process(args: list[str]) -> list[str]:
    """``args`` run so that the kernel kills the child when this process dies, however it dies
    (``PR_SET_PDEATHSIG``, kept across ``exec``): a crashed run leaves no simulator or node behind
    on a DDS domain that a later run may reuse. Start the child from the main thread (the signal
    follows the thread that forked it)."""
    return [sys.executable, "-c", DIE_WITH_PARENT, str(os.getpid()), *args]


def sim_command(
    domain: int,
    *,
    interface: str = "lo",
    stats_json: Path | None = None,
    profile: str | None = None,
    lowstate_rate_hz: float | None = None,
    mocap_rate_hz: float | None = None,
    wait_for_readers: int = 0,
    wait_for_mocap_readers: int = 0,
    viewer: bool = False,
    realtime_priority: int = 0,
    lowcmd_priority: int | None = None,
) -> list[str]:
    """The command that runs ``asap_sim`` with these options (None: ``config/sim.yaml``'s);
    ``realtime_priority``: its physics thread and Cyclone DDS receive threads under SCHED_FIFO
    (its start-up, loading the model, at normal priority); ``lowcmd_priority``: its rt/lowcmd
    reader's (None: ``realtime_priority``'s)."""
    command = [sys.executable, "-m", "asap_ros.sim.main", "--domain", str(domain), "--interface", interface]
    for option, value in (("--stats-json", stats_json), ("--profile", profile), ("--lowstate-rate", lowstate_rate_hz),
                          ("--mocap-rate", mocap_rate_hz)):
        if value is not None:
            command += [option, str(value)]
    for option, value in (("--wait-for-readers", wait_for_readers), ("--wait-for-mocap-readers", wait_for_mocap_readers)):
        if value:
            command += [option, str(value)]
    if realtime_priority:
        command += ["--realtime-priority", str(realtime_priority)]
    if lowcmd_priority is not None:
        command += ["--lowcmd-priority", str(lowcmd_priority)]
    if viewer:
        command.append("--viewer")
    return command


def stop_gracefully(process: subprocess.Popen, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGINT (a clean exit: statistics written), then SIGKILL if it does not exit in time."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def read_stats(path: Path) -> dict[str, Any]:
    """The statistics ``asap_sim --stats-json`` wrote at exit, or ``{"error": why there are none}``."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return {"error": f"no simulator statistics ({path}: {exc})"}
