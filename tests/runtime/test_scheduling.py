"""Thread scheduling helpers: the probe for SCHED_FIFO leaves the calling thread as it found it."""

from __future__ import annotations

import os
import threading

import pytest

from asap_ros.runtime.scheduling import below, fifo_permitted, run_realtime

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
