"""Which side a gap in the deploy node's beats was on, as the supervisor takes them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BEAT_GAP_NS", "BeatGaps"]

BEAT_GAP_NS = 60_000_000
"""Beats of one deploy session taken further apart than this (ns; three 20 ms control periods)
make a line: two more and its lease (150 ms, granted 40 ms ahead of its end) latches DAMPING."""


@dataclass(frozen=True)
class _Taken:
    session: int
    seq: int
    source_ns: int
    taken_ns: int


class BeatGaps:
    """Remembers the newest beat taken and says, for a gap longer than ``gap_ns``, whether the deploy
    node beat nothing meanwhile, its beats waited before they were taken, or some were never taken.

    ``source_ns`` is the writer's wall clock at the write (the DDS source timestamp), ``taken_ns``
    the supervisor's at the take: on one computer one clock; across two, their offset is in the
    waits. Not thread-safe: one reader thread calls :meth:`taken`.
    """

    def __init__(self, gap_ns: int = BEAT_GAP_NS) -> None:
        self.gap_ns = gap_ns
        self._last: _Taken | None = None

    def taken(self, session: int, seq: int, source_ns: int, taken_ns: int) -> str | None:
        """Beat ``seq`` of ``session`` taken now: the gap it ends, described, or None."""
        last, self._last = self._last, _Taken(session, seq, source_ns, taken_ns)
        if last is None or last.session != session or taken_ns - last.taken_ns <= self.gap_ns:
            return None
        gap_ms = (taken_ns - last.taken_ns) / 1e6
        waited_ms = (taken_ns - source_ns) / 1e6
        head = f"beats: none taken for {gap_ms:.0f} ms"
        missed = seq - last.seq - 1
        if missed < 0:  # the session's counter went back: not one process's beats in order
            return f"{head}; beat {seq} came after beat {last.seq}"
        facts = (f"{head}; beat {seq} was written {(source_ns - last.source_ns) / 1e6:.0f} ms after beat {last.seq} "
                 f"and waited {waited_ms:.1f} ms to be taken")
        if missed:
            return f"{facts}; {missed} beats between them were never taken (lost, or overwritten while they waited)"
        if waited_ms * 2 >= gap_ms:
            return f"{facts} (this supervisor's beat reader was held up)"
        return f"{facts} (asap_deploy beat nothing meanwhile)"
