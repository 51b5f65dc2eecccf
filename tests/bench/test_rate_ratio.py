"""The ratio of two miss rates and its exact interval, the figure the latency benchmarks print."""

from __future__ import annotations

import math

import pytest

from asap_ros.bench.rate_ratio import compared_text, main, rate_ratio

# Clopper-Pearson bounds from scipy.stats.beta.ppf (scipy 1.17.1, Debian's python3), an
# independent implementation: (misses, count, other_misses, other_count) -> (low, high)
REFERENCE = {
    (17, 30126, 12, 30099): (0.637062, 3.248060),
    (34, 150626, 18, 150485): (1.036286, 3.549208),
    (3, 1000, 0, 1000): (0.413231, math.inf),
    (0, 1000, 4, 1000): (0.0, 1.514867),
    (1, 10, 1, 20): (0.025479, 156.993671),
    (900, 10**6, 700, 10**6): (1.163491, 1.421227),
}


@pytest.mark.parametrize(("counts", "bounds"), REFERENCE.items())
def test_the_interval_is_the_exact_one(counts, bounds) -> None:
    result = rate_ratio(*counts)

    assert result is not None
    assert result.low == pytest.approx(bounds[0], abs=1e-6)
    assert result.high == pytest.approx(bounds[1], abs=1e-6) if math.isfinite(bounds[1]) else math.isinf(result.high)


def test_the_point_ratio_lies_in_its_interval_and_more_misses_narrow_it() -> None:
    few, many = rate_ratio(17, 30000, 12, 30000), rate_ratio(170, 300000, 120, 300000)

    assert few is not None and many is not None
    assert few.ratio == pytest.approx(17 / 12) == many.ratio
    assert few.low < few.ratio < few.high and many.low < many.ratio < many.high
    assert few.low < many.low and many.high < few.high


def test_no_misses_on_either_side_is_no_ratio_and_bad_counts_are_refused() -> None:
    assert rate_ratio(0, 1000, 0, 1000) is None
    with pytest.raises(ValueError, match="misses must lie in 0..count with count > 0, got 5 of 4"):
        rate_ratio(5, 4, 0, 1)
    with pytest.raises(ValueError, match="other_misses must lie in 0..count with count > 0, got 1 of 0"):
        rate_ratio(0, 4, 1, 0)
    with pytest.raises(ValueError, match="confidence must lie in"):
        rate_ratio(1, 4, 1, 4, confidence=1.0)


def test_the_benchmarks_line_carries_the_interval() -> None:
    assert compared_text(17, 30126, 12, 30099, "probe") == (
        "1.42x the probe's share (95% interval 0.64-3.25 from 29 misses)")
    assert compared_text(3, 1000, 0, 1000, "probe") == "the probe missed none (the ratio's 95% interval 0.41-inf from 3 misses)"
    assert compared_text(0, 1000, 0, 1000, "step probe") == "the step probe missed none"
    assert compared_text(0, 1000, 1, 1000, "probe") == "0.00x the probe's share (95% interval 0.00-39.00 from 1 miss)"
    assert compared_text(0, 0, 0, 1000, "probe") == "nothing to compare with the probe"


def test_the_command_pools_sessions_by_hand(capsys) -> None:
    assert main(["34", "150626", "18", "150485"]) == 0
    assert capsys.readouterr().out == "1.89x, 95% interval 1.04-3.55 from 52 misses\n"
    assert main(["2", "1000", "0", "1000"]) == 0
    assert capsys.readouterr().out.startswith("the second series missed none; 95% interval ")
    with pytest.raises(SystemExit) as exc:
        main(["5", "4", "0", "1"])
    assert exc.value.code == 2 and "got 5 of 4" in capsys.readouterr().err
