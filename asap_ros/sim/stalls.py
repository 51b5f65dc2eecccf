"""Where a long gap in the simulator's LowState stream went: its thread's time and the machine's steal."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from asap_ros.runtime.thread_times import ProcTimes, Times

__all__ = ["STALL_AFTER_NS", "STALL_MARK", "Stall", "StallMeter", "stalls_near"]

STALL_AFTER_NS = 20_000_000
"""A gap between two LowState writes longer than this (ns) is a stall: one 50 Hz control period,
so a control step found no state newer than the one before."""
STALL_MARK = "rt/lowstate stalled"
"""How each stall's :meth:`Stall.line` begins (``asap_sim`` logs it; the test harness finds it by it)."""
KEPT = 32
"""Stalls kept in full (the first ones); later ones are only counted."""


@dataclass(frozen=True)
class Stall:
    """One gap between two writes, split by what the writing thread was doing meanwhile."""

    at_s: float
    """When the gap ended, seconds after the meter's first mark."""
    gap_ms: float
    on_cpu_ms: float
    """The thread ran (a long step, a catch-up)."""
    run_queue_ms: float
    """The thread could run and waited for a CPU (other threads of equal or higher priority)."""
    steal_ms: float
    """The machine's steal in the gap, all vCPUs, in the kernel's 10 ms ticks: the host ran
    something else. Steal while the thread ran is not in ``on_cpu_ms`` (the kernel leaves it out
    of a thread's run time), so it falls in :attr:`other_ms`."""
    tick: int | None = None
    """The LowState tick (ms of simulated time) of the write that ended the gap; ``None`` when the
    writer gave none. Physics stands still in the gap and catches up after it, so the simulated
    time the stall disturbed lies within ``gap_ms`` of this tick."""

    @property
    def other_ms(self) -> float:
        """Neither running nor runnable: asleep, waiting for the GIL or a lock, or its vCPU taken."""
        return max(0.0, self.gap_ms - self.on_cpu_ms - self.run_queue_ms)

    def line(self) -> str:
        tick = f", tick {self.tick}" if self.tick is not None else ""
        return (f"{STALL_MARK} {self.gap_ms:.1f} ms (at {self.at_s:.2f} s{tick}): the publishing thread ran "
                f"{self.on_cpu_ms:.1f} ms, waited {self.run_queue_ms:.1f} ms for a CPU and was off any run queue "
                f"{self.other_ms:.1f} ms (asleep, the GIL, a lock or a vCPU taken); machine steal {self.steal_ms:.0f} ms")

    def as_dict(self) -> dict[str, float]:
        return {**asdict(self), "other_ms": self.other_ms}

    @classmethod
    def from_dict(cls, values: dict[str, float]) -> Stall:
        """The stall :meth:`as_dict` wrote (its derived ``other_ms`` ignored)."""
        return cls(**{name: values[name] for name in ("at_s", "gap_ms", "on_cpu_ms", "run_queue_ms", "steal_ms")},
                   tick=values.get("tick"))


class StallMeter:
    """Marks each write (:meth:`mark`, on the writing thread) and attributes every gap longer than
    ``after_ns`` (:class:`Stall`). Not thread-safe: one writing thread."""

    def __init__(self, times: Times | None = None, after_ns: int = STALL_AFTER_NS, keep: int = KEPT) -> None:
        self._times = times if times is not None else ProcTimes()
        self.after_ns = after_ns
        self._keep = keep
        self._first_ns: int | None = None
        self._last: tuple[int, int, int, int] | None = None
        self.count = 0
        self.kept: list[Stall] = []
        self.longest: Stall | None = None

    def mark(self, now_ns: int, tick: int | None = None) -> Stall | None:
        """A write at ``now_ns`` (monotonic), of LowState ``tick`` if given: the stall it ends, if the
        gap since the last was long."""
        on_cpu, run_queue, steal = self._times()
        last, self._last = self._last, (now_ns, on_cpu, run_queue, steal)
        if self._first_ns is None:
            self._first_ns = now_ns
        if last is None or now_ns - last[0] <= self.after_ns:
            return None
        stall = Stall(at_s=(now_ns - self._first_ns) / 1e9, gap_ms=(now_ns - last[0]) / 1e6,
                      on_cpu_ms=(on_cpu - last[1]) / 1e6, run_queue_ms=(run_queue - last[2]) / 1e6,
                      steal_ms=(steal - last[3]) / 1e6, tick=tick)
        self.count += 1
        if len(self.kept) < self._keep:
            self.kept.append(stall)
        if self.longest is None or stall.gap_ms > self.longest.gap_ms:
            self.longest = stall
        return stall

    def close(self) -> None:
        """Release what the time source holds open (once the writing thread has ended)."""
        close = getattr(self._times, "close", None)
        if close is not None:
            close()

    def stats(self) -> dict[str, Any]:
        """JSON-serialisable: the threshold, the count, the longest and the first :data:`KEPT`."""
        note = getattr(self._times, "note", None)
        return {"over_ms": self.after_ns / 1e6, "count": self.count,
                "longest": self.longest.as_dict() if self.longest else None,
                "first": [stall.as_dict() for stall in self.kept], "note": note}


def stalls_near(stats: dict[str, Any], first_tick: int, last_tick: int) -> int:
    """How many stalls of :meth:`StallMeter.stats` came within their own length of the ticks
    ``first_tick``..``last_tick`` (ms of simulated time). A stall not kept in full, or kept
    without a tick, counts: where it fell is unknown."""
    kept = [Stall.from_dict(values) for values in stats["first"]]
    near = sum(stall.tick is None or (stall.tick + stall.gap_ms >= first_tick and stall.tick - stall.gap_ms <= last_tick)
               for stall in kept)  # fmt: skip
    return near + stats["count"] - len(kept)
