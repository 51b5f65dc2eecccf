"""The simulator's stall attribution: the meter on injected times, and the real /proc times of a thread."""

from __future__ import annotations

import threading
import time

import pytest

from asap_ros.runtime.thread_times import ProcTimes
from asap_ros.sim.stalls import STALL_AFTER_NS, Stall, StallMeter, stalls_near

MS = 1_000_000


class Times:
    """Injected cumulative (on_cpu, run_queue, steal) in ns, moved by the test."""

    def __init__(self) -> None:
        self.on_cpu = self.run_queue = self.steal = 0

    def __call__(self) -> tuple[int, int, int]:
        return self.on_cpu, self.run_queue, self.steal


def test_a_gap_longer_than_a_control_period_is_a_stall_split_by_what_the_thread_did():
    times = Times()
    meter = StallMeter(times)
    assert meter.mark(0) is None  # the first write ends no gap
    assert meter.mark(2 * MS) is None and meter.mark(2 * MS + STALL_AFTER_NS) is None  # at the bound: no stall
    times.on_cpu, times.run_queue, times.steal = 1 * MS, 2 * MS, 60 * MS
    stall = meter.mark(2 * MS + STALL_AFTER_NS + 69 * MS)
    assert stall == Stall(at_s=0.091, gap_ms=69.0, on_cpu_ms=1.0, run_queue_ms=2.0, steal_ms=60.0)
    assert stall.other_ms == 66.0
    assert stall.line() == ("rt/lowstate stalled 69.0 ms (at 0.09 s): the publishing thread ran 1.0 ms, waited 2.0 ms "
                            "for a CPU and was off any run queue 66.0 ms (asleep, the GIL, a lock or a vCPU taken); "
                            "machine steal 60 ms")
    stats = meter.stats()
    assert stats["count"] == 1 and stats["over_ms"] == 20.0 and stats["note"] is None
    assert Stall.from_dict(stats["longest"]) == stall and stats["first"] == [stall.as_dict()]


def test_the_meter_counts_every_stall_keeps_the_first_and_names_the_longest():
    meter = StallMeter(Times(), keep=2)
    now = 0
    meter.mark(now)
    for gap_ms in (30, 90, 40, 25):
        now += gap_ms * MS
        assert meter.mark(now) is not None
    stats = meter.stats()
    assert stats["count"] == 4
    assert [s["gap_ms"] for s in stats["first"]] == [30.0, 90.0]
    assert stats["longest"]["gap_ms"] == 90.0
    assert StallMeter(Times()).stats()["longest"] is None


def test_a_sleeping_writer_is_a_stall_spent_off_the_run_queue():
    meter = StallMeter()
    found: list[Stall | None] = []

    def writer() -> None:
        meter.mark(time.monotonic_ns())
        time.sleep(0.06)
        found.append(meter.mark(time.monotonic_ns()))
        meter.close()

    thread = threading.Thread(target=writer)
    thread.start()
    thread.join(10.0)
    stall = found[0]
    assert stall is not None and stall.gap_ms >= 60.0
    assert stall.on_cpu_ms < 10.0 and stall.other_ms >= 40.0
    assert meter.stats()["note"] is None


def test_times_that_cannot_be_read_are_zero_with_a_note(monkeypatch):
    times = ProcTimes()

    def refused(path: str, flags: int) -> int:
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr("asap_ros.runtime.thread_times.os.open", refused)
    assert times() == (0, 0, 0)
    assert "thread time attribution unavailable" in (times.note or "") and "schedstat" in (times.note or "")
    meter = StallMeter(times)
    meter.mark(0)
    assert meter.mark(50 * MS) == Stall(at_s=0.05, gap_ms=50.0, on_cpu_ms=0.0, run_queue_ms=0.0, steal_ms=0.0)
    assert meter.stats()["note"] == times.note


@pytest.mark.parametrize("gap_ms", [20.0, 19.9])
def test_gaps_up_to_one_control_period_are_not_stalls(gap_ms):
    meter = StallMeter(Times())
    meter.mark(0)
    assert meter.mark(int(gap_ms * MS)) is None


def test_a_stall_carries_the_tick_of_the_write_that_ended_it():
    meter = StallMeter(Times())
    meter.mark(0, 5000)
    stall = meter.mark(30 * MS, 5002)
    assert stall is not None and stall.tick == 5002 and "(at 0.03 s, tick 5002)" in stall.line()
    assert Stall.from_dict(stall.as_dict()) == stall
    assert Stall.from_dict({**stall.as_dict(), "tick": None}).tick is None  # a summary written without ticks


def _stats(*stalls: tuple[int | None, float], count: int | None = None) -> dict:
    meter = StallMeter(Times())
    kept = [Stall(at_s=0.0, gap_ms=gap, on_cpu_ms=0.0, run_queue_ms=0.0, steal_ms=0.0, tick=tick) for tick, gap in stalls]
    return {**meter.stats(), "count": len(kept) if count is None else count, "first": [s.as_dict() for s in kept]}


def test_stalls_near_a_span_of_ticks_count_within_their_own_length():
    # the motion: ticks 5000..7500; each stall (tick, gap ms) disturbed simulated time within gap of its tick
    assert stalls_near(_stats((4000, 30.0), (7600, 30.0)), 5000, 7500) == 0  # standing up, after the fall
    assert stalls_near(_stats((4975, 30.0)), 5000, 7500) == 1  # its catch-up ran into the motion
    assert stalls_near(_stats((4969, 30.0)), 5000, 7500) == 0
    assert stalls_near(_stats((7525, 30.0)), 5000, 7500) == 1
    assert stalls_near(_stats((6000, 21.0), (6500, 25.0)), 5000, 7500) == 2
    assert stalls_near(_stats((None, 25.0)), 5000, 7500) == 1  # where it fell is unknown
    assert stalls_near(_stats((4000, 30.0), count=40), 5000, 7500) == 39  # past the kept ones: unknown
