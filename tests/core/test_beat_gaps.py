"""The supervisor's account of a gap in the deploy node's beats: which side it was on."""

from __future__ import annotations

from asap_ros.core.beat_gaps import BeatGaps

MS = 1_000_000
SESSION = 0xD1


def beating(gaps: BeatGaps, beats: int, period_ns: int = 20 * MS, delay_ns: int = MS) -> int:
    """``beats`` beats written every ``period_ns`` and taken ``delay_ns`` later; returns the last
    write time. None of them is a gap."""
    for seq in range(1, beats + 1):
        assert gaps.taken(SESSION, seq, seq * period_ns, seq * period_ns + delay_ns) is None
    return beats * period_ns


def test_a_deploy_node_that_beat_nothing_is_named() -> None:
    gaps = BeatGaps()
    last = beating(gaps, 5)
    line = gaps.taken(SESSION, 6, last + 100 * MS, last + 101 * MS)
    assert line == ("beats: none taken for 100 ms; beat 6 was written 100 ms after beat 5 and waited 1.0 ms to be "
                    "taken (asap_deploy beat nothing meanwhile)")


def test_beats_that_waited_to_be_taken_are_the_supervisors() -> None:
    gaps = BeatGaps()
    last = beating(gaps, 5)
    line = gaps.taken(SESSION, 6, last + 20 * MS, last + 101 * MS)
    assert line == ("beats: none taken for 100 ms; beat 6 was written 20 ms after beat 5 and waited 81.0 ms to be "
                    "taken (this supervisor's beat reader was held up)")


def test_beats_never_taken_are_counted() -> None:
    gaps = BeatGaps()
    last = beating(gaps, 5)
    line = gaps.taken(SESSION, 10, last + 100 * MS, last + 101 * MS)
    assert line == ("beats: none taken for 100 ms; beat 10 was written 100 ms after beat 5 and waited 1.0 ms to be "
                    "taken; 4 beats between them were never taken (lost, or overwritten while they waited)")


def test_gaps_up_to_the_threshold_and_across_sessions_are_not_reported() -> None:
    gaps = BeatGaps()
    last = beating(gaps, 5)
    assert gaps.taken(SESSION, 6, last + 59 * MS, last + 61 * MS) is None  # 60 ms: at the threshold
    assert gaps.taken(SESSION + 1, 1, last + 500 * MS, last + 501 * MS) is None  # a new deploy process
    assert gaps.taken(SESSION + 1, 0, last + 600 * MS, last + 601 * MS) == ("beats: none taken for 100 ms; "
                                                                            "beat 0 came after beat 1")
