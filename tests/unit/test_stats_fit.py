"""Tests of fwlab.stats.fit: the linear per-rule cost model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fwlab.errors import FwlabError
from fwlab.stats.fit import CostFit, fit_per_packet_cost, per_packet_cost_ns

RULES = [0, 10, 100, 1000, 10_000, 100_000]


def _rate(n):
    return 1e9 / (4000.0 + 3.5 * n)


def test_fit_recovers_exact_model():
    fit = fit_per_packet_cost([(n, _rate(n)) for n in RULES])
    assert isinstance(fit, CostFit)
    assert fit.per_rule_ns == pytest.approx(3.5, rel=1e-9)
    assert fit.base_ns == pytest.approx(4000.0, rel=1e-9)
    assert fit.r_squared == pytest.approx(1.0, abs=1e-12)
    assert fit.n_points == 6 and fit.n_rule_counts == 6
    assert fit.per_rule_ns_stderr == pytest.approx(0.0, abs=1e-9)
    assert fit.predict_ns(2000) == pytest.approx(11000.0)
    assert fit.predict_pps(2000) == pytest.approx(_rate(2000))


def test_fit_with_repeated_rule_counts_and_noise():
    rng = np.random.default_rng(0)
    points = []
    for n in [0, 500, 1000, 2000, 4000]:
        for _ in range(5):  # five repetitions at each size, +-1 % noise on the rate
            points.append((n, _rate(n) * (1.0 + 0.01 * rng.standard_normal())))
    fit = fit_per_packet_cost(points)
    assert fit.n_points == 25 and fit.n_rule_counts == 5
    assert fit.per_rule_ns == pytest.approx(3.5, rel=0.05)
    assert fit.base_ns == pytest.approx(4000.0, rel=0.05)
    assert 0.99 < fit.r_squared <= 1.0
    lo = fit.per_rule_ns - 3 * fit.per_rule_ns_stderr
    hi = fit.per_rule_ns + 3 * fit.per_rule_ns_stderr
    assert lo < 3.5 < hi
    # agrees with numpy's own least squares on 1e9/rate
    x = np.array([p[0] for p in points], dtype=float)
    y = 1e9 / np.array([p[1] for p in points])
    b, a = np.polyfit(x, y, 1)
    assert fit.per_rule_ns == pytest.approx(b, rel=1e-9) and fit.base_ns == pytest.approx(a, rel=1e-9)


def test_repeated_identical_points_do_not_change_the_fit():
    once = fit_per_packet_cost([(n, _rate(n)) for n in (0, 1000)])
    twice = fit_per_packet_cost([(n, _rate(n)) for n in (0, 0, 0, 1000, 1000, 1000)])
    assert twice.per_rule_ns == pytest.approx(once.per_rule_ns)
    assert twice.base_ns == pytest.approx(once.base_ns)
    assert once.per_rule_ns_stderr is None and once.n_points == 2


def test_flat_rates_give_zero_cost_and_undefined_r_squared():
    fit = fit_per_packet_cost([(0, 1e6), (100, 1e6), (1000, 1e6)])
    assert fit.per_rule_ns == 0.0 and fit.base_ns == pytest.approx(1000.0)
    assert fit.r_squared is None
    json.dumps(fit.to_dict(), allow_nan=False)


@pytest.mark.parametrize("points", [
    [],
    [(100, 1e6)],
    [(100, 1e6), (100, 2e6)],            # one distinct rule count
    [(0, 1e6), (100, 0.0)],              # zero rate
    [(0, 1e6), (100, -5.0)],
    [(-1, 1e6), (100, 1e6)],
    [(0, 1e6), (100, float("nan"))],
    [(0, 1e6, 3), (100, 1e6, 3)],
])
def test_fit_rejects_bad_points(points):
    with pytest.raises(FwlabError):
        fit_per_packet_cost(points)


def test_per_packet_cost_ns():
    assert per_packet_cost_ns(_rate(1000), _rate(0)) == pytest.approx(3500.0)
    assert per_packet_cost_ns(1e6, 2e6) == pytest.approx(500.0)
    assert per_packet_cost_ns(2e6, 1e6) == pytest.approx(-500.0)
    with pytest.raises(FwlabError):
        per_packet_cost_ns(0.0, 1e6)


def test_to_dict():
    d = fit_per_packet_cost([(n, _rate(n)) for n in RULES]).to_dict()
    assert set(d) == {"per_rule_ns", "base_ns", "r_squared", "n_points", "n_rule_counts",
                      "per_rule_ns_stderr", "base_ns_stderr", "per_rule_ns_ci", "confidence"}
    json.dumps(d, allow_nan=False)


def test_slope_interval_matches_scipy_linregress_and_covers():
    from scipy import stats as sps

    rng = np.random.default_rng(4)
    rules = np.repeat([0, 1000, 5000, 10000], 3)
    hits = 0
    for _ in range(500):
        t_ns = 700.0 + 0.5 * rules + rng.normal(0.0, 50.0, rules.size)
        fit = fit_per_packet_cost(zip(rules, 1e9 / t_ns))
        lr = sps.linregress(rules, t_ns)
        half = sps.t.ppf(0.975, rules.size - 2) * lr.stderr
        assert fit.per_rule_ns_ci == pytest.approx((lr.slope - half, lr.slope + half), rel=1e-9)
        hits += fit.per_rule_ns_ci[0] <= 0.5 <= fit.per_rule_ns_ci[1]
    assert 0.92 <= hits / 500 <= 0.98       # a 95 % interval covers the true 0.5 ns/rule
    assert fit_per_packet_cost([(0, 1e6), (100, 9e5)]).per_rule_ns_ci is None   # 2 points: no spread
