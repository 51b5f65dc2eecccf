"""Thread scheduling helpers: the probe for SCHED_FIFO leaves the calling thread as it found it."""

from __future__ import annotations

import os
import threading

import pytest

from asap_ros.runtime.scheduling import below, fifo_permitted, half_a_period_off, on_grid, run_realtime

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="no POSIX thread scheduling")


def _in_thread(body) -> tuple[int, int]:
    """Run ``body`` on a fresh thread; its scheduling policy and priority afterwards."""
    seen: list[tuple[int, int]] = []

    def run() -> None:
        body()
        seen.append((os.sched_getscheduler(0), os.sched_getparam(0).sched_priority))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return seen[0]


def test_probing_for_fifo_keeps_a_realtime_thread_at_its_priority() -> None:
    if not fifo_permitted():
        pytest.skip("SCHED_FIFO is not permitted to this process")

    def raised_then_probed() -> None:
        assert run_realtime(7) is None
        assert fifo_permitted()

    assert _in_thread(raised_then_probed) == (os.SCHED_FIFO, 7)


def test_probing_for_fifo_leaves_a_normal_thread_normal() -> None:
    assert _in_thread(fifo_permitted) == (os.SCHED_OTHER, 0)


@pytest.mark.parametrize(("priority", "others"), [(80, 79), (2, 1), (1, 0), (0, 0)])
def test_the_control_process_s_other_threads_run_one_below_it_or_normal(priority: int, others: int) -> None:
    assert below(priority) == others


def test_grid_instants_are_the_next_multiple_of_the_period_plus_the_phase() -> None:
    assert [on_grid(t, 20) for t in (0, 1, 19, 20, 21)] == [20, 20, 20, 40, 40]  # strictly after
    assert [on_grid(t, 20, 5) for t in (0, 4, 5, 24, 25)] == [5, 5, 25, 25, 45]
    assert on_grid(0, 20, 30) == on_grid(0, 20, 10) == 10 and on_grid(7, 20, -5) == 15
    assert on_grid(1_796_494_993_612_200_001, 20_000_000) == 1_796_494_993_620_000_000


def test_a_thread_half_a_period_off_keeps_half_its_period_from_every_control_deadline() -> None:
    ms = 1_000_000
    assert [half_a_period_off(t, 10 * ms) for t in (0, 5 * ms - 1, 5 * ms, 14 * ms)] == [5 * ms, 5 * ms, 15 * ms, 15 * ms]
    control_period, period = 20 * ms, 10 * ms  # the loop's and the supervisor's
    wakes, t = [], 123_456_789
    for _ in range(100):
        t = half_a_period_off(t, period)
        wakes.append(t)
    distance = [min(w % control_period, control_period - w % control_period) for w in wakes]
    assert min(distance) == max(distance) == period // 2
