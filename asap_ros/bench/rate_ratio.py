"""The ratio of two miss rates with its exact confidence interval (benchmarks' loop against probe)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["RateRatio", "compared_text", "main", "rate_ratio"]

CONFIDENCE = 0.95
_BISECTIONS = 100
"""Halvings of (0, 1) for each bound of the binomial proportion: 2**-100 is below float resolution."""


@dataclass(frozen=True)
class RateRatio:
    """``misses / count`` against ``other_misses / other_count``: the point ratio and its interval.

    The misses of each series are taken as Poisson counts over its ``count`` trials; given their
    total, the first series' misses are binomial, and the interval is the exact (Clopper-Pearson)
    one for that proportion, mapped to the ratio of rates. It holds at least ``confidence`` of the
    time, whatever the counts; with few misses it is wide, which is the point of printing it.
    """

    misses: int
    count: int
    other_misses: int
    other_count: int
    low: float
    high: float
    """``math.inf`` when the other series missed nothing."""
    confidence: float = CONFIDENCE

    @property
    def ratio(self) -> float:
        """The point ratio of the two shares; ``math.inf`` when only the first series missed."""
        if self.other_misses == 0:
            return math.inf
        return (self.misses / self.count) / (self.other_misses / self.other_count)

    def interval_text(self) -> str:
        """E.g. ``95% interval 0.64-3.25 from 29 misses``."""
        high = "inf" if math.isinf(self.high) else f"{self.high:.2f}"
        total = self.misses + self.other_misses
        return f"{100 * self.confidence:g}% interval {self.low:.2f}-{high} from {total} miss{'' if total == 1 else 'es'}"


def rate_ratio(misses: int, count: int, other_misses: int, other_count: int,
               confidence: float = CONFIDENCE) -> RateRatio | None:  # fmt: skip
    """The ratio of the miss rates ``misses / count`` and ``other_misses / other_count`` with its exact
    interval; None when neither series missed (nothing to compare). Counts must be positive,
    misses within them, ``confidence`` in (0, 1); anything else raises ``ValueError``."""
    for name, value, total in (("misses", misses, count), ("other_misses", other_misses, other_count)):
        if total <= 0 or not 0 <= value <= total:
            raise ValueError(f"{name} must lie in 0..count with count > 0, got {value} of {total}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    trials = misses + other_misses
    if trials == 0:
        return None
    alpha = 1.0 - confidence
    # proportion p of the first series among all misses; rate ratio = p / (1 - p) · other_count / count
    p_low = 0.0 if misses == 0 else _solve(lambda p: _mass(range(misses, trials + 1), trials, p) - alpha / 2)
    p_high = 1.0 if misses == trials else _solve(lambda p: alpha / 2 - _mass(range(misses + 1), trials, p))
    scale = other_count / count
    high = math.inf if p_high >= 1.0 else p_high / (1.0 - p_high) * scale
    return RateRatio(misses, count, other_misses, other_count, p_low / (1.0 - p_low) * scale, high, confidence)


def compared_text(misses: int, count: int, other_misses: int, other_count: int, name: str) -> str:
    """A share of ``misses`` in ``count`` against ``name``'s share, ``other_misses`` in ``other_count``,
    for a benchmark's line: ``1.42x the probe's share (95% interval 0.64-3.25 from 29 misses)``. A
    handful of misses on either side measures no ratio to within a factor of a few; the interval
    says so."""
    if count <= 0 or other_count <= 0:
        return f"nothing to compare with the {name}"
    compared = rate_ratio(misses, count, other_misses, other_count)
    if compared is None:
        return f"the {name} missed none"
    if other_misses == 0:
        return f"the {name} missed none (the ratio's {compared.interval_text()})"
    return f"{compared.ratio:.2f}x the {name}'s share ({compared.interval_text()})"


def _log_pmf(k: int, n: int, p: float) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * math.log(p) + (n - k) * math.log1p(-p)


def _mass(ks: range, n: int, p: float) -> float:
    """P(X in ks) for X ~ Binomial(n, p), 0 < p < 1 (summed term by term: no 1 - tail cancellation)."""
    return min(1.0, sum(math.exp(_log_pmf(i, n, p)) for i in ks))


def _solve(f: Callable[[float], float]) -> float:
    """The root in (0, 1) of ``f``, rising in p, by bisection."""
    low, high = 0.0, 1.0
    for _ in range(_BISECTIONS):
        mid = (low + high) / 2
        if mid in (low, high):
            break
        if f(mid) < 0:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def main(argv: list[str] | None = None) -> int:
    """``python -m asap_ros.bench.rate_ratio MISSES COUNT OTHER_MISSES OTHER_COUNT``: one line."""
    parser = argparse.ArgumentParser(prog="python -m asap_ros.bench.rate_ratio", description=__doc__)
    for name in ("misses", "count", "other_misses", "other_count"):
        parser.add_argument(name, type=int)
    parser.add_argument("--confidence", type=float, default=CONFIDENCE)
    args = parser.parse_args(argv)
    try:
        result = rate_ratio(args.misses, args.count, args.other_misses, args.other_count, args.confidence)
    except ValueError as exc:
        parser.error(str(exc))
    if result is None:
        print("neither series missed: no ratio")
    elif result.other_misses == 0:
        print(f"the second series missed none; {result.interval_text()}")
    else:
        print(f"{result.ratio:.2f}x, {result.interval_text()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
