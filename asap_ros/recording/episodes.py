"""Episodes (motion runs) from the runtime's mode transitions.

An episode starts with PREPARE -> TRACKING and ends with the first transition out of TRACKING
(to HOLD when the motion finished or was stopped, to DAMPING on an e-stop or a safety fault,
which flags it). A recording that stops during an episode ends it as incomplete.
"""

from __future__ import annotations

from dataclasses import dataclass

TRACKING = "TRACKING"
PREPARE = "PREPARE"
DAMPING = "DAMPING"


@dataclass(frozen=True)
class Episode:
    """One motion run; the fields of ``asap_ros/msg/Episode``."""

    index: int
    motion: str
    start_ns: int
    end_ns: int
    end_mode: str
    end_reason: str
    estop: bool
    complete: bool

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


@dataclass
class _OpenEpisode:
    index: int
    motion: str
    start_ns: int


class EpisodeTracker:
    """Feed it every transition in order; it returns each episode as it ends."""

    def __init__(self) -> None:
        self._count = 0
        self._open: _OpenEpisode | None = None

    @property
    def open_episode(self) -> int | None:
        """Index of the episode in progress, if any."""
        return self._open.index if self._open else None

    def on_transition(self, stamp_ns: int, from_mode: str, to_mode: str, reason: str, motion: str) -> Episode | None:
        """The episode this transition ended, if it ended one."""
        ended = None
        if self._open is not None and from_mode == TRACKING and to_mode != TRACKING:
            ended = Episode(
                self._open.index, self._open.motion, self._open.start_ns, stamp_ns,
                to_mode, reason, estop=to_mode == DAMPING, complete=True,
            )
            self._open = None
        if from_mode == PREPARE and to_mode == TRACKING:
            if self._open is not None:  # its end was never recorded
                ended = self.cut(stamp_ns, "no transition out of TRACKING was recorded")
            self._count += 1
            self._open = _OpenEpisode(self._count, motion, stamp_ns)
        return ended

    def cut(self, stamp_ns: int, reason: str) -> Episode | None:
        """End the episode in progress because the recording stops (``complete`` false)."""
        if self._open is None:
            return None
        open_episode, self._open = self._open, None
        return Episode(
            open_episode.index, open_episode.motion, open_episode.start_ns, stamp_ns,
            "", reason, estop=False, complete=False,
        )
