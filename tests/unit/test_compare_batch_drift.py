"""`fwlab compare A A` on two runs of one suite despite batch drift: each figure over its own run's
same-run reference (`fwlab.stats.compare_ratio`, the default of `fwlab compare`).

Simulated noise (seeded numpy, so the rates are fixed numbers, not machine-dependent ones): a run
is one batch whose offset scales every figure of it, N(0, 10 %) (this host: ~10 % between
batches), times 3 % noise per repetition. Unchanged runs: the ratio test calls at most alpha = 5 %
significant at 3 repetitions (plus a sampling tolerance of three binomial standard errors), where
the absolute test on the same draws calls most of them; a real 15 % change of the figure (its
reference unchanged) is still found.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fwlab.stats.compare import ALPHA, INSUFFICIENT_DATA, SIGNIFICANT, compare_figure, compare_ratio

DRIFT = 0.10       # between batches (runs)
CV = 0.03          # between repetitions inside one run
TRIALS = 3000
TOLERANCE = 3.0 * math.sqrt(ALPHA * (1 - ALPHA) / TRIALS)


def one_run(rng: np.random.Generator, figure: float, reps: int) -> tuple[np.ndarray, np.ndarray]:
    """(the figure's repetitions, its 0-rule reference's repetitions) of one run (one batch)."""
    batch = 1.0 + DRIFT * rng.standard_normal()
    return (figure * batch * (1.0 + CV * rng.standard_normal(reps)),
            100.0 * batch * (1.0 + CV * rng.standard_normal(reps)))


def rates(reps: int, change: float, seed: int, trials: int = TRIALS) -> tuple[float, float]:
    """(share called significant by the ratio test, by the absolute test) over `trials` pairs of
    runs whose figure differs by the factor `change`."""
    rng = np.random.default_rng(seed)
    ratio = absolute = 0
    for _ in range(trials):
        a, a_ref = one_run(rng, 40.0, reps)
        b, b_ref = one_run(rng, 40.0 * change, reps)
        ratio += compare_ratio("f", a, a_ref, b, b_ref).verdict == SIGNIFICANT
        absolute += compare_figure("f", a, b).verdict == SIGNIFICANT
    return ratio / trials, absolute / trials


@pytest.mark.parametrize("reps", [2, 3, 5])
def test_unchanged_runs_with_a_batch_offset_hold_alpha(reps):
    ratio, absolute = rates(reps, 1.0, seed=40 + reps)
    assert ratio <= ALPHA + TOLERANCE
    if reps == 3:
        assert ratio <= ALPHA          # the bar: at most 5 % at 3 repetitions
    assert ratio > 0.005               # not vacuous: it does fire on unchanged figures
    # the absolute test on the same draws mistakes the batch offset for changes
    assert absolute > 0.25 and absolute > 5 * ratio


def test_a_real_fifteen_percent_change_is_still_found_at_three_repetitions():
    found, _ = rates(3, 0.85, seed=7, trials=1000)
    assert found >= 0.85
    up, _ = rates(3, 1.15, seed=8, trials=1000)
    assert up >= 0.85


def test_the_ratio_comparison_carries_its_interval():
    a, a_ref = [40.0, 40.4, 39.6], [100.0, 101.0, 99.0]
    b, b_ref = [30.6, 30.9, 30.3], [90.0, 90.9, 89.1]         # B's batch 10 % slower, its figure 15 % lower
    c = compare_ratio("f", a, a_ref, b, b_ref)
    assert c.mean_a == pytest.approx(0.40) and c.mean_b == pytest.approx(0.34)
    assert c.change_pct == pytest.approx(-15.0, abs=0.01) and c.significant
    lo, hi = c.diff_ci
    assert lo < c.mean_b - c.mean_a < hi < 0                   # the interval of r_B - r_A excludes 0
    assert compare_figure("f", a_ref, b_ref).change_pct == pytest.approx(-10.0)   # the drift itself
    one = compare_ratio("f", [40.0], [100.0], [34.0], [100.0])
    assert one.verdict == INSUFFICIENT_DATA and "needs >= 2 repetitions" in one.reason
    assert compare_ratio("f", [], [100.0, 99.0], [34.0, 35.0], [100.0, 99.0]).reason == "no values in A"
