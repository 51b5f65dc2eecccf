"""A thread's /proc times, read for real: its own CPU time, a sleep, and the schedstat-only reader."""

from __future__ import annotations

import threading
import time

from asap_ros.runtime.thread_times import ProcTimes

MS = 1_000_000


def in_a_thread(measure) -> dict[str, tuple[int, int, int]]:
    results: dict[str, tuple[int, int, int]] = {}
    thread = threading.Thread(target=measure, args=(results,))
    thread.start()
    thread.join(10.0)
    return results


def spin(cpu_ns: int) -> None:
    """``cpu_ns`` of this thread's own CPU time, however long that takes."""
    until = time.thread_time_ns() + cpu_ns
    while time.thread_time_ns() < until:
        pass


def test_the_thread_own_cpu_time_counts_as_running_and_a_sleep_as_off_the_run_queue():
    def measure(results: dict[str, tuple[int, int, int]]) -> None:
        times = ProcTimes()
        results["start"] = times()
        spin(30 * MS)
        results["spun"] = times()
        time.sleep(0.05)
        results["slept"] = times()
        times.close()

    results = in_a_thread(measure)
    (cpu0, rq0, steal0), (cpu1, rq1, steal1), (cpu2, rq2, steal2) = results["start"], results["spun"], results["slept"]
    assert cpu1 - cpu0 >= 29 * MS  # schedstat and thread_time read the same clock of the thread
    assert cpu2 - cpu1 < 5 * MS  # asleep: not on a CPU
    assert rq0 <= rq1 <= rq2 and steal0 <= steal1 <= steal2


def test_without_steal_only_the_thread_is_read_and_another_threads_work_is_not_in_it():
    stop = threading.Event()
    busy = threading.Thread(target=lambda: [spin(MS) for _ in iter(stop.is_set, True)])  # the GIL, turn about

    def measure(results: dict[str, tuple[int, int, int]]) -> None:
        times = ProcTimes(steal=False)
        process0, results["start"] = time.process_time_ns(), times()
        spin(20 * MS)
        results["spun"], process1 = times(), time.process_time_ns()
        results["process"] = (process1 - process0, 0, 0)
        times.close()

    busy.start()
    try:
        results = in_a_thread(measure)
    finally:
        stop.set()
        busy.join(10.0)
    (cpu0, _, steal0), (cpu1, _, steal1) = results["start"], results["spun"]
    assert 19 * MS <= cpu1 - cpu0 < 30 * MS
    assert results["process"][0] >= cpu1 - cpu0 + 2 * MS  # the busy thread ran meanwhile: not counted
    assert steal0 == steal1 == 0
