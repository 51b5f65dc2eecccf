"""The floor and step probes the latency benchmarks run beside the control loop (no speed assertions)."""

from __future__ import annotations

import json
import threading
import time

import pytest

from asap_ros.bench.floor_probe import (
    FloorProbe,
    Lateness,
    beside_the_floor,
    lateness_summary,
    main,
    probe,
    with_a_step,
)

MS = 1_000_000


def test_lateness_counts_misses_past_5_ms_and_the_longest_run() -> None:
    late = [1 * MS, 6 * MS, 7 * MS, 2 * MS, 5 * MS, 9 * MS, 1 * MS]  # exactly 5 ms is not late

    summary = lateness_summary(late)

    assert (summary.count, summary.misses, summary.longest_run) == (7, 3, 2)
    assert summary.max_ms == 9.0 and summary.p50_ms == 5.0
    assert summary.share == pytest.approx(3 / 7)


def test_the_loop_is_printed_beside_both_probes_with_the_ratios() -> None:
    floor = Lateness(count=1000, misses=2, longest_run=1, p50_ms=0.1, p99_ms=0.5, max_ms=9.0)
    step = Lateness(count=1000, misses=4, longest_run=1, p50_ms=1.0, p99_ms=2.0, max_ms=12.0)
    flags = [False] * 1000
    flags[10] = flags[11] = flags[500] = flags[900] = flags[901] = flags[902] = True

    text = beside_the_floor(flags, floor, step).splitlines()

    # the intervals: Clopper-Pearson bounds from scipy.stats.beta.ppf, an independent implementation
    assert text[0] == ("control loop: 6 of 1000 steps late > 5 ms (0.60%), longest run 3: 3.00x the probe's share "
                       "(95% interval 0.54-30.39 from 8 misses); 1.50x the step probe's share (95% interval 0.36-7.23 "
                       "from 10 misses)")
    assert text[1].startswith("floor probe (same priority, same run): 2 of 1000 late > 5 ms (0.20%)")
    assert text[2].startswith("step probe (the same step alone in a process, same priority, same run): 4 of 1000")
    assert text[2].endswith(": 2.00x the floor probe's share (95% interval 0.29-22.11 from 6 misses)")
    assert beside_the_floor([False], Lateness(1, 0, 0, 0, 0, 0)).splitlines()[0].endswith("the probe missed none")


def test_a_step_added_to_each_floor_wake_up_counts_what_the_machine_alone_makes_late() -> None:
    late = [0.1 * MS, 4.2 * MS, 3.9 * MS, 5.5 * MS, 0.2 * MS]  # 4.2 + 0.85 > 5; 3.9 + 0.85 is not

    assert with_a_step(late, 0.85 * MS) == ("floor probe with the loop's median step (0.85 ms) after each wake-up: "
                                            "2 of 5 would end late > 5 ms (40.000%)")


def test_with_work_the_probe_counts_lateness_at_the_work_s_end() -> None:
    stop, calls = threading.Event(), []

    def work() -> None:  # 6 ms past each wake-up: every end is more than 5 ms past its deadline
        calls.append(time.monotonic_ns())
        time.sleep(0.006)
        if len(calls) == 5:
            stop.set()

    late = probe(20 * MS, stop, work=work)

    assert len(late) == 5 and min(late) >= 6 * MS
    assert lateness_summary(late).misses == 5


def test_the_probe_sleeps_to_multiples_of_the_period_plus_its_phase() -> None:
    stop, woke = threading.Event(), []

    def work() -> None:
        woke.append(time.monotonic_ns())
        if len(woke) == 5:
            stop.set()

    time.sleep((30 * MS - time.monotonic_ns() % (20 * MS)) / 1e9)  # started at k·20 ms + 10 ms
    probe(20 * MS, stop, work=work, phase_ns=7 * MS)

    phases_ms = sorted(((t - 7 * MS) % (20 * MS)) / MS for t in woke)
    assert phases_ms[2] < 4.0, phases_ms  # the median wake-up: within 4 ms after k·20 ms + 7 ms


def test_the_step_probe_runs_a_real_control_step_per_wake_up(assets, tmp_path) -> None:
    with FloorProbe(priority=0, step_policy="kick_level1") as step:
        time.sleep(1.0)

    assert step.lateness is not None and step.lateness.count >= 20  # ~50 steps in 1 s
    assert step.lateness.p50_ms > 0  # each is measured at the step's end, past its deadline


def test_the_step_probe_names_a_policy_it_cannot_load(tmp_path, capsys) -> None:
    assert main(["--json", str(tmp_path / "p.json"), "--step-policy", str(tmp_path / "nope.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"floor_probe: --step-policy {tmp_path / 'nope.yaml'}: ") and "nope.yaml" in err.split(": ", 2)[2]
    with pytest.raises(RuntimeError, match="floor probe failed to start .*nope.yaml"):
        with FloorProbe(priority=0, step_policy=str(tmp_path / "nope.yaml")):
            pass


def test_the_floor_probe_writes_its_wake_ups_as_json(tmp_path, capsys) -> None:
    assert main(["--json", str(tmp_path / "p.json"), "--duration", "0.2"]) == 0

    record = json.loads((tmp_path / "p.json").read_text())
    assert record["step_policy"] is None and 5 <= len(record["late_ns"]) <= 11
    assert capsys.readouterr().out.splitlines() == ["probing", lateness_summary(record["late_ns"]).line("floor probe")]
