"""Fieller interval of a ratio of means (fwlab.stats.ratio): known values, coverage on seeded
noise in both numerator and denominator, and the cases without an interval."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from fwlab.stats.ratio import ratio_interval


def test_fieller_by_hand():
    a, b = [70.0, 72.0, 71.0], [1000.0, 1010.0, 990.0, 1005.0]
    r = ratio_interval(a, b)
    ma, mb = np.mean(a), np.mean(b)
    va, vb = np.var(a, ddof=1) / 3, np.var(b, ddof=1) / 4
    rho = ma / mb
    df = (va + rho**2 * vb) ** 2 / (va**2 / 2 + (rho**2 * vb) ** 2 / 3)
    t = sps.t.ppf(0.975, df)
    # the bounds solve (a - rho b)^2 = t^2 (va + rho^2 vb)
    for bound in (r.low, r.high):
        assert (ma - bound * mb) ** 2 == pytest.approx(t**2 * (va + bound**2 * vb), rel=1e-9)
    assert r.ratio == pytest.approx(rho) and r.low < rho < r.high and r.df == pytest.approx(df)


@pytest.mark.parametrize("n", [2, 3, 5])
def test_coverage_with_noise_on_both_sides(n):
    rng = np.random.default_rng(10 + n)
    hits = 0
    for _ in range(2000):
        r = ratio_interval(rng.normal(70.0, 3.0, n), rng.normal(100.0, 5.0, n))
        hits += r.has_interval and r.low <= 0.7 <= r.high
    assert hits / 2000 >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / 2000)


def test_the_reference_noise_widens_the_interval():
    num = [70.0, 71.0, 69.0]
    quiet = ratio_interval(num, [100.0, 100.1, 99.9])
    noisy = ratio_interval(num, [100.0, 110.0, 90.0])
    assert noisy.high - noisy.low > 2 * (quiet.high - quiet.low)


def test_no_interval_cases():
    one = ratio_interval([70.0], [100.0, 101.0])
    assert one.ratio == pytest.approx(0.70 / 1.005) and not one.has_interval and "2 repetitions" in one.why
    wild = ratio_interval([1.0, 1.1], [0.1, 5.0])        # reference not away from 0
    assert not wild.has_interval and "away from 0" in wild.why
    assert ratio_interval([], [1.0]) is None and ratio_interval([1.0], [0.0]) is None
    flat = ratio_interval([50.0, 50.0], [100.0, 100.0])
    assert (flat.low, flat.high) == (0.5, 0.5)


def test_a_ratio_of_rates_is_never_below_zero():
    r = ratio_interval([10.0, 90.0], [100.0, 101.0])     # very noisy numerator at 2 repetitions
    assert r.low == 0.0 and r.high > r.ratio
    signed = ratio_interval([-10.0, 90.0], [100.0, 101.0])   # signed figures keep the raw bound
    assert signed.low < 0.0


def test_a_numerator_of_zeros_over_a_spread_denominator_is_exactly_zero():
    # e.g. loss_ratio 0 in every repetition at N rules against a lossy 0-rule reference: no
    # division by a zero variance (a report crashed on it)
    from fwlab.stats.ratio import ratio_interval
    iv = ratio_interval([0.0, 0.0], [0.01, 0.02])
    assert iv.ratio == 0.0 and iv.low == 0.0 and iv.high == 0.0
