"""Real-time scheduling of the calling thread (Linux applies it per thread)."""

from __future__ import annotations

import os


def run_realtime(priority: int) -> str | None:
    """Put the calling thread under SCHED_FIFO at ``priority`` (0: leave it as it is); the note
    to log when that is not permitted, else None."""
    if priority <= 0 or not hasattr(os, "sched_setscheduler"):
        return None
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except PermissionError:
        return f"SCHED_FIFO {priority} not permitted; running at normal priority"
    return None


def fifo_permitted() -> bool:
    """Whether this process may use SCHED_FIFO (tried on this thread, then undone)."""
    if not hasattr(os, "sched_setscheduler"):
        return False
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except PermissionError:
        return False
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    return True
