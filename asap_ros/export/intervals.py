"""Confidence intervals over replay windows: percentile bootstrap of a mean and of a paired change.

Windows are resampled with replacement (``RESAMPLES`` times, a fixed seed: the same data give
the same interval). A paired change resamples the same windows for both columns, so what the
windows share (their motion, their start) cancels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RESAMPLES = 2000
LEVEL = 0.95
SEED = 0


@dataclass(frozen=True)
class Interval:
    """A statistic and its 95% percentile-bootstrap interval."""

    value: float
    low: float
    high: float

    def to_dict(self) -> dict[str, float]:
        return {"value": self.value, "ci95": [self.low, self.high]}

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def _draws(count: int) -> np.ndarray:
    return np.random.default_rng(SEED).integers(0, count, size=(RESAMPLES, count))


def _interval(value: float, resampled: np.ndarray) -> Interval:
    tail = 100 * (1 - LEVEL) / 2
    low, high = np.percentile(resampled, [tail, 100 - tail])
    return Interval(float(value), float(low), float(high))


def mean_interval(values: np.ndarray) -> Interval:
    """Mean over windows (axis 0) with its interval; one window gives a zero-width interval."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) < 2:
        value = float(values.mean()) if len(values) else float("nan")
        return Interval(value, value, value)
    return _interval(float(values.mean()), values[_draws(len(values))].mean(axis=1))


def relative_change(before: np.ndarray, after: np.ndarray) -> Interval:
    """``mean(after) / mean(before) - 1`` over the same windows (negative: lower), with its interval."""
    before, after = np.asarray(before, dtype=np.float64), np.asarray(after, dtype=np.float64)
    value = float(after.mean() / before.mean() - 1.0)
    if len(before) < 2:
        return Interval(value, value, value)
    draws = _draws(len(before))
    return _interval(value, after[draws].mean(axis=1) / before[draws].mean(axis=1) - 1.0)
