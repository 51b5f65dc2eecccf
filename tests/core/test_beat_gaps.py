"""The supervisor's account of a gap in the deploy node's beats: which side it was on."""

from __future__ import annotations

import pytest

from asap_ros.core.beat_gaps import BeatGaps

MS = 1_000_000
SESSION = 0xD1


def beating(gaps: BeatGaps, beats: int, period_ns: int = 20 * MS, delay_ns: int = MS) -> int:
    """``beats`` beats written every ``period_ns`` and taken ``delay_ns`` later; returns the last
    write time. None of them is a gap."""
    for seq in range(1, beats + 1):
        assert gaps.taken(SESSION, seq, seq * period_ns, seq * period_ns + delay_ns) is None
    return beats * period_ns


@pytest.mark.parametrize(
    ("seq", "written_ms", "expected"),
    [
        (6, 100, "beat 6 was written 100 ms after beat 5 and waited 1.0 ms to be taken (asap_deploy beat nothing "
                 "meanwhile)"),
        (6, 20, "beat 6 was written 20 ms after beat 5 and waited 81.0 ms to be taken (this supervisor's beat reader "
                "was held up)"),
        (10, 100, "beat 10 was written 100 ms after beat 5 and waited 1.0 ms to be taken; 4 beats between them were "
                  "never taken (lost, or overwritten while they waited)"),
    ],
    ids=["the deploy node beat nothing", "the beat waited to be taken", "beats were never taken"],
)
def test_a_gap_names_its_side(seq: int, written_ms: int, expected: str) -> None:
    """Beat ``seq`` taken 101 ms after beat 5's write (100 ms after it was taken), written ``written_ms``
    after it."""
    gaps = BeatGaps()
    last = beating(gaps, 5)
    line = gaps.taken(SESSION, seq, last + written_ms * MS, last + 101 * MS)
    assert line == f"beats: none taken for 100 ms; {expected}"


def test_gaps_up_to_the_threshold_and_across_sessions_are_not_reported() -> None:
    gaps = BeatGaps()
    last = beating(gaps, 5)
    assert gaps.taken(SESSION, 6, last + 59 * MS, last + 61 * MS) is None  # 60 ms: at the threshold
    assert gaps.taken(SESSION + 1, 1, last + 500 * MS, last + 501 * MS) is None  # a new deploy process
    assert gaps.taken(SESSION + 1, 0, last + 600 * MS, last + 601 * MS) == ("beats: none taken for 100 ms; "
                                                                            "beat 0 came after beat 1")
