"""A thread's time on a CPU and waiting for one, and the machine's steal, read from ``/proc``."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable

__all__ = ["ProcTimes", "Times", "machine_steal_ns"]

Times = Callable[[], tuple[int, int, int]]
"""``(on_cpu_ns, run_queue_ns, steal_ns)``: the calling thread's time on a CPU and runnable but
waiting for one, and the whole machine's steal (vCPU time the hypervisor took), all cumulative."""

_libc = ctypes.PyDLL(ctypes.util.find_library("c") or None, use_errno=True)
"""libc called with the GIL held (``PyDLL``): ``os.pread`` releases the GIL, and a real-time thread
that releases it may wait for another thread to give it back (up to the switch interval)."""
_libc.pread.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long)
_libc.pread.restype = ctypes.c_ssize_t


def _steal_ticks(stat: bytes) -> int:
    """The machine's steal in kernel ticks, from the start of ``/proc/stat``."""
    return int(stat.split(b"\n", 1)[0].split()[8])  # "cpu user nice system idle iowait irq softirq steal"


def _pread(fd: int, buffer: ctypes.Array[ctypes.c_char]) -> bytes:
    """The start of the file ``fd`` (a /proc file: formatted in memory, never blocks), GIL held."""
    count = _libc.pread(fd, buffer, len(buffer), 0)
    if count < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return buffer.raw[:count]


class ProcTimes:
    """:data:`Times` of the thread that first calls it, from ``/proc/thread-self/schedstat`` and,
    with ``steal``, ``/proc/stat`` (one ``pread`` each, the GIL held; schedstat ~4 us, ``/proc/stat``
    ~16 us, as the kernel formats every CPU's line). Without ``steal`` the third value stays 0.
    Where they cannot be read (not Linux, no ``/proc``) every value stays 0 and :attr:`note` says why."""

    def __init__(self, steal: bool = True) -> None:
        self._steal = steal
        self._thread_fd: int | None = None
        self._stat_fd: int | None = None
        self._ns_per_tick = 1e9 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 1e7
        self._buffer = ctypes.create_string_buffer(256)
        self.note: str | None = None

    def __call__(self) -> tuple[int, int, int]:
        if self.note is not None:
            return 0, 0, 0
        try:
            if self._thread_fd is None:  # opened by the thread it describes: thread-self is resolved at open
                self._thread_fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
                if self._steal:
                    self._stat_fd = os.open("/proc/stat", os.O_RDONLY)
            on_cpu, run_queue = _pread(self._thread_fd, self._buffer).split()[:2]
            if self._stat_fd is None:
                return int(on_cpu), int(run_queue), 0
            return int(on_cpu), int(run_queue), int(_steal_ticks(_pread(self._stat_fd, self._buffer)) * self._ns_per_tick)
        except (OSError, ValueError, IndexError) as exc:
            self.note = f"thread time attribution unavailable: {exc}"
            self.close()
            return 0, 0, 0

    def close(self) -> None:
        for fd in (self._thread_fd, self._stat_fd):
            if fd is not None:
                os.close(fd)
        self._thread_fd = self._stat_fd = None


def machine_steal_ns() -> int:
    """The whole machine's steal so far, ns: vCPU time the hypervisor took, all vCPUs, counted in
    the kernel's ticks (``/proc/stat``; 10 ms at 100 Hz). Not for a real-time thread (``open``
    releases the GIL): :class:`ProcTimes` is."""
    with open("/proc/stat", "rb") as stat:
        return _steal_ticks(stat.readline()) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")
