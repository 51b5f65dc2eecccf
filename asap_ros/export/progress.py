"""A one-line progress bar on stderr for long exports and replays (no dependency)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

BAR_WIDTH = 30
MIN_REDRAW_S = 0.1


class Progress:
    """``label [#####.....] 12/40 unit, 3 s, ~5 s left``; drawn only on a terminal unless forced."""

    def __init__(self, total: int, label: str, unit: str = "", stream: TextIO | None = None,
                 enabled: bool | None = None):  # fmt: skip
        self.total = max(int(total), 0)
        self.done = 0
        self.label = label
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self._started = time.monotonic()
        self._drawn = 0.0

    def advance(self, count: int = 1) -> None:
        self.done = min(self.total, self.done + count)
        now = time.monotonic()
        if self.enabled and (now - self._drawn >= MIN_REDRAW_S or self.done == self.total):
            self._drawn = now
            self.stream.write("\r" + self.line(now - self._started))
            self.stream.flush()

    def line(self, elapsed_s: float) -> str:
        """The bar as text after ``elapsed_s`` seconds."""
        fraction = self.done / self.total if self.total else 1.0
        filled = int(round(fraction * BAR_WIDTH))
        left = elapsed_s * (1 - fraction) / fraction if fraction > 0 else float("nan")
        eta = f", ~{left:.0f} s left" if 0 < fraction < 1 else ""
        unit = f" {self.unit}" if self.unit else ""
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        return f"{self.label} [{bar}] {self.done}/{self.total}{unit}, {elapsed_s:.0f} s{eta}"

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
