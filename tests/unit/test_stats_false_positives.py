"""The 2-sigma verdict's false-positive rate on unchanged configurations, with a simulated noise
model: each run's figure = true value + a run offset (between-run noise) + per-repetition noise.

Comparing an unchanged run B with run A must call about 5 % of figures significant (the rule's
nominal level), not the ~16 % of a 2-sigma band around A's mean that ignores A's own noise.
All randomness is seeded, so the rates below are fixed numbers, not machine-dependent ones.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from fwlab.stats.compare import SIGNIFICANT, NoiseModel, compare_figure

TRUE = 1000.0
SIGMA_RUN = 50.0     # between runs (rebuilt beds, other load on the machine)
SIGMA_REP = 20.0     # between repetitions inside one run
REPS = 3


def _run(rng: np.random.Generator) -> list[float]:
    offset = rng.normal(0.0, SIGMA_RUN)
    return list(TRUE + offset + rng.normal(0.0, SIGMA_REP, REPS))


def _fp_rate(n_baseline: int, trials: int, seed: int) -> tuple[float, float]:
    """(rate of the rule as implemented, rate of the old 2 x sigma band) over `trials` figures,
    each with its own noise model from `n_baseline` unchanged runs (per-run medians)."""
    rng = np.random.default_rng(seed)
    hits = old = 0
    for i in range(trials):
        base = [float(np.median(_run(rng))) for _ in range(n_baseline)]
        noise = NoiseModel.from_runs({"f": base})
        a, b = _run(rng), _run(rng)
        c = compare_figure("f", a, b, noise)
        hits += c.verdict == SIGNIFICANT
        old += abs(c.mean_b - c.mean_a) > 2.0 * c.baseline_std
    return hits / trials, old / trials


def test_single_runs_with_a_ten_run_noise_model_are_near_the_nominal_level():
    rate, old_rate = _fp_rate(n_baseline=10, trials=4000, seed=7)
    # sigma estimated from 10 runs: expected P(|t_9| > 2) = 7.7 %; the old rule gave ~16 %
    expected = 2 * sps.t.sf(2.0, 9)
    assert rate == pytest.approx(expected, abs=0.015)
    assert 0.12 < old_rate < 0.20
    assert rate < old_rate / 1.8


def test_a_large_baseline_gives_the_normal_level():
    rate, _ = _fp_rate(n_baseline=60, trials=4000, seed=11)
    assert rate == pytest.approx(2 * sps.norm.sf(2.0), abs=0.012)   # 4.6 %


def test_repetitions_only_use_both_sides_spread():
    """No noise model: the spread of A's and B's repetitions (Welch-like standard error)."""
    rng = np.random.default_rng(3)
    n, hits = 4000, 0
    for _ in range(n):
        a = list(TRUE + rng.normal(0.0, SIGMA_REP, 10))
        b = list(TRUE + rng.normal(0.0, SIGMA_REP, 10))
        hits += compare_figure("f", a, b).verdict == SIGNIFICANT
    # ~ P(|t_18| > 2) = 6.1 %; a band of 2 x s_A around A's mean would give ~16 %
    assert hits / n == pytest.approx(2 * sps.t.sf(2.0, 18), abs=0.015)


def test_a_real_change_is_still_found():
    rng = np.random.default_rng(5)
    base = [float(np.median(_run(rng))) for _ in range(10)]
    noise = NoiseModel.from_runs({"f": base})
    found = sum(compare_figure("f", _run(rng), [v * 0.6 for v in _run(rng)], noise).verdict == SIGNIFICANT
                for _ in range(200))
    assert found == 200     # a 40 % drop is far outside the noise
