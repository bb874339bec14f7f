"""The distribution-free confidence interval of a median, from order statistics.

Owns: `median_interval` and its `MedianInterval`. For n independent values of a continuous
figure, the number of values below the true median is Binomial(n, 1/2), so the interval from the
k-th smallest to the k-th largest value covers the median with probability exactly
``1 - 2 * P(Binomial(n, 1/2) <= k - 1)`` whatever the distribution. `median_interval` takes the
narrowest such interval whose coverage is at least the asked confidence.

Why not a percentile bootstrap: with the few repetitions a lab run has, the bootstrap interval of
a median is a pair of order statistics too, but it covers less than it says -- about 75 % at
n = 3 and 88 % at n = 7 for a "95 %" interval (tests/unit/test_median_interval.py simulates it).

With too few values no pair reaches the confidence (95 % needs n >= 6): the interval is then the
minimum to the maximum and `level` says what it does cover (75 % at n = 3, 93.75 % at n = 5);
`reached` is False. Never touches records, files or the clock.

Why not scipy's ``quantile_test(x, q=median, p=0.5).confidence_interval()``: it gives the same
order statistics when the confidence is reached, but below 6 values it answers with an unbounded
side instead of min to max with the coverage that has; fwlab keeps this one interval (and uses
no quantile_test anywhere) so that every median interval in a report is the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom

from fwlab.errors import FwlabError
from fwlab.stats.values import as_finite_array, check_confidence

__all__ = ["MedianInterval", "median_interval", "median_interval_level"]


@dataclass(frozen=True)
class MedianInterval:
    """An interval of the median: [low, high] in the figure's unit."""

    low: float
    """The rank-th smallest value [figure unit]."""
    high: float
    """The rank-th largest value [figure unit]."""
    level: float
    """The interval's exact coverage of the median [probability] (continuous figures)."""
    rank: int
    """low is the rank-th smallest value, high the rank-th largest (1 = min and max)."""
    reached: bool
    """level >= the asked confidence; False when too few values for it (then min to max)."""

    @property
    def bounds(self) -> tuple[float, float]:
        return (self.low, self.high)


def median_interval_level(n: int, rank: int) -> float:
    """Coverage of [rank-th smallest, rank-th largest] of n values for their median [probability]."""
    if n < 1 or not 1 <= rank <= (n + 1) // 2:
        raise FwlabError(f"no order-statistic interval of rank {rank} among {n} values",
                         fix="use 1 <= rank <= (n + 1) / 2")
    return float(1.0 - 2.0 * binom.cdf(rank - 1, n, 0.5))


def median_interval(values: Iterable[float], confidence: float = 0.95) -> MedianInterval | None:
    """The narrowest order-statistic interval of the median covering at least ``confidence``;
    min to max with ``reached`` False when n is too small for it. None for one value (no
    interval). Raises `FwlabError` for no values or non-finite ones."""
    arr = np.sort(as_finite_array(values))
    confidence = check_confidence(confidence)
    n = int(arr.size)
    if n == 0:
        raise FwlabError("cannot take an interval of the median of no values", fix="run at least one repetition")
    if n == 1:
        return None
    rank = 1
    for k in range(2, n // 2 + 1):
        if median_interval_level(n, k) < confidence:
            break
        rank = k
    level = median_interval_level(n, rank)
    return MedianInterval(low=float(arr[rank - 1]), high=float(arr[n - rank]), level=level, rank=rank,
                          reached=level >= confidence)
