"""Real-time scheduling of the calling thread (Linux applies it per thread)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading

_PR_SET_NAME = 15
GIL_SWITCH_INTERVAL_S = 0.0001
"""``sys.setswitchinterval`` of a process with a real-time thread: a thread holding the GIL that
thread needs releases it within 0.1 ms (CPython's default is 5 ms)."""
_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def on_grid(after_ns: int, period_ns: int, phase_ns: int = 0) -> int:
    """The first instant ``k·period_ns + phase_ns`` (k an integer) strictly after ``after_ns``, ns on
    the monotonic clock. CLOCK_MONOTONIC is one clock for every process of the machine, so threads
    that sleep to such instants keep a fixed phase to each other, whenever each one started."""
    return after_ns + period_ns - (after_ns - phase_ns) % period_ns


def half_a_period_off(after_ns: int, period_ns: int) -> int:
    """The first instant ``(k + 1/2)·period_ns`` strictly after ``after_ns`` (monotonic clock). A
    periodic thread above the control thread sleeps to these instants: with a period that divides
    the loop's (the supervisor's 10 ms, the loop's 20 ms) it wakes at least half its period away
    from every control deadline (multiples of the loop's period), never inside a step's first
    ``period_ns / 2``."""
    return on_grid(after_ns, period_ns, period_ns // 2)


def below(priority: int) -> int:
    """The SCHED_FIFO priority one below ``priority``; 0 (normal scheduling) below 0 or 1: a process
    with a real-time thread (the control loop, the supervisor's watchdog) runs its other Python
    threads here, above the machine's ordinary work (none is preempted while it holds the GIL that
    thread needs) and never above it."""
    return priority - 1 if priority > 1 else 0


def name_os_thread(name: str | None = None) -> None:
    """Give the calling thread its Python name (``threading.current_thread().name``, or ``name``) in
    the kernel too, as ``ps -L``, ``top -H`` and ``perf sched`` show it (Linux keeps 15 bytes)."""
    text = (name or threading.current_thread().name).encode()[:15]
    _libc.prctl(_PR_SET_NAME, ctypes.c_char_p(text), 0, 0, 0)


def run_realtime(priority: int) -> str | None:
    """Put the calling thread under SCHED_FIFO at ``priority`` (0: leave it as it is) and give it its
    Python name in the kernel (:func:`name_os_thread`); the note to log when SCHED_FIFO is not
    permitted, else None."""
    name_os_thread()
    if priority <= 0 or not hasattr(os, "sched_setscheduler"):
        return None
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except PermissionError:
        return f"SCHED_FIFO {priority} not permitted; running at normal priority"
    return None


def fifo_permitted() -> bool:
    """Whether this process may use SCHED_FIFO (tried on this thread, then its scheduling restored:
    a thread already under SCHED_FIFO keeps its priority)."""
    if not hasattr(os, "sched_setscheduler"):
        return False
    policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
    if policy in (os.SCHED_FIFO, os.SCHED_RR):
        return True
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except PermissionError:
        return False
    os.sched_setscheduler(0, policy, param)
    return True
