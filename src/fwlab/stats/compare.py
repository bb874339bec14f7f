"""Significance of a change: run A (baseline) against run B, figure by figure.

Owns: the two-sided test at alpha = 0.05 that decides whether a figure changed (Welch's t-test
with the Welch-Satterthwaite degrees of freedom on the runs' repetitions; a t-test on a noise
model's spread when one is given; an exact permutation test when neither run varies), and
how many repetitions a decision needs. The noise model it reads (per-figure run-to-run spreads)
and the figure keys are fwlab.stats.noise_model's; the Table-2-shaped comparison table
fwlab.stats.compare_table's.
Never touches: run records on disk, plots, the CLI or the test bed. Input is plain dicts of
`figure key -> list of repetition values`; output is frozen dataclasses with JSON-safe dicts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as _sps

from fwlab.errors import FwlabError
from fwlab.stats.noise_model import FigureKey, NoiseModel, figure_label, key_to_json
from fwlab.stats.ratio import log_ratio_terms
from fwlab.stats.summary import as_finite_array

__all__ = [
    "Comparison", "compare_figure", "compare_tables",
    "SIGNIFICANT", "NOT_SIGNIFICANT", "INSUFFICIENT_DATA", "ALPHA", "MIN_REPETITIONS", "reps_to_detect",
    "TEST_NOISE", "TEST_WELCH", "TEST_PREDICTION", "TEST_PERMUTATION", "TEST_RATIO", "RATIO_SOURCE", "compare_ratio",
]

SIGNIFICANT = "significant"
NOT_SIGNIFICANT = "not significant"
INSUFFICIENT_DATA = "insufficient data"


ALPHA = 0.05
"""Significance level of every comparison: an unchanged figure is called significant in at most
5 % of comparisons, at any number of repetitions (2 or more per side)."""

MIN_REPETITIONS = 2
"""Repetitions each run needs for a decision from the runs alone (Welch's t-test); with a noise
model one repetition per run is enough, since the spread comes from the model."""

POWER = 0.8
"""Power the repetition estimate `Comparison.reps_to_detect` aims at."""

_MAX_REPS = 1000

# how the decision was taken (Comparison.test)
TEST_NOISE = "t-test on the noise model's spread"
TEST_WELCH = "Welch t-test"
TEST_PREDICTION = "t-test of B's one value against A's spread"
TEST_PERMUTATION = "exact permutation test"
TEST_RATIO = "Welch t-test on the log of each run's figure-to-own-reference ratio"
RATIO_SOURCE = "each run's own reference"
"""`Comparison.baseline_source` of every `compare_ratio` result (decided or not)."""


@dataclass(frozen=True)
class Comparison:
    """Run B against baseline run A for one figure."""

    key: FigureKey
    """Figure key (configuration + metric)."""
    n_a: int
    """Repetitions in A [count]."""
    n_b: int
    """Repetitions in B [count]."""
    mean_a: float | None
    """Mean of A [figure unit]; None when A has no values."""
    mean_b: float | None
    """Mean of B [figure unit]; None when B has no values."""
    change_pct: float | None
    """100 * (mean_b - mean_a) / |mean_a| [%]; None when a mean is missing or mean_a is 0."""
    baseline_std: float | None
    """Standard deviation of one value of A [figure unit]: the noise model's, else A's (ddof=1)."""
    baseline_source: str | None
    """'noise model', 'run A', or None when no spread is known."""
    se_diff: float | None
    """Standard error of mean_b - mean_a [figure unit]: with a noise model
    baseline_std * sqrt(1/runs_a + 1/runs_b), else sqrt(s_a^2/n_a + s_b^2/n_b) over the
    repetitions (s_b = s_a when B has one value)."""
    df: float | None
    """Degrees of freedom of the t distribution the test uses: the noise model's N - 1, Welch's
    Welch-Satterthwaite value, or n_a - 1 for B's single value; None for the permutation test."""
    threshold: float | None
    """Smallest |mean_b - mean_a| the test calls significant, t_(1-alpha/2, df) * se_diff
    [figure unit]; None when the test has no such bound (permutation test, undecided)."""
    threshold_pct: float | None
    """100 * threshold / |mean_a| [%], so |change_pct| > threshold_pct exactly when significant."""
    diff_ci: tuple[float, float] | None
    """Interval of mean_b - mean_a at 1 - alpha (t, `df`) [figure unit]; None when undecided."""
    p_value: float | None
    """Two-sided p-value of `test`; None when undecided."""
    significant: bool | None
    """p_value < alpha; None when it cannot be decided."""
    test: str | None
    """Which test decided (TEST_* constants); None when undecided."""
    verdict: str
    """'significant', 'not significant' or 'insufficient data'."""
    reason: str | None = None
    """Why the verdict is 'insufficient data' (which repetitions are missing)."""
    std_b: float | None = None
    """Standard deviation of one value of B the test used [figure unit] (A's when B has one)."""
    alpha: float = ALPHA
    """Significance level [probability]."""

    @property
    def reps_to_detect(self) -> int | None:
        """Not significant on the runs' repetitions: repetitions per run at which a change as large
        as the one observed would be found with probability `POWER` at this spread; None when
        significant, undecided, the change or spread is 0, the runs already had that many (the
        change is within the noise), or more than 1000 would be needed."""
        if self.significant is not False or self.baseline_source != "run A" or self.std_b is None:
            return None
        pooled = math.sqrt((self.baseline_std ** 2 + self.std_b ** 2) / 2.0)
        reps = reps_to_detect(pooled, self.mean_b - self.mean_a, alpha=self.alpha)
        return None if reps is None or reps <= min(self.n_a, self.n_b) else reps

    @property
    def significant_2sigma(self) -> bool | None:
        """The decision (the name of the former 2-sigma rule, kept for callers)."""
        return self.significant

    @property
    def label(self) -> str:
        return figure_label(self.key)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (key as string or list, undefined values as None)."""
        return {
            "key": key_to_json(self.key),
            "figure": self.label,
            "n_a": self.n_a,
            "n_b": self.n_b,
            "mean_a": self.mean_a,
            "mean_b": self.mean_b,
            "change_pct": self.change_pct,
            "baseline_std": self.baseline_std,
            "baseline_source": self.baseline_source,
            "se_diff": self.se_diff,
            "df": self.df,
            "threshold": self.threshold,
            "threshold_pct": self.threshold_pct,
            "diff_ci": None if self.diff_ci is None else list(self.diff_ci),
            "alpha": self.alpha,
            "p_value": self.p_value,
            "significant": self.significant,
            "test": self.test,
            "verdict": self.verdict,
            "reason": self.reason,
            "std_b": self.std_b,
            "reps_to_detect": self.reps_to_detect,
        }


def _sd(arr: np.ndarray) -> float:
    return 0.0 if arr.size < 2 or np.all(arr == arr[0]) else float(np.std(arr, ddof=1))


def _permutation_p(a: np.ndarray, b: np.ndarray) -> float:
    """Exact two-sided permutation p-value of |mean_b - mean_a| over every split of the pooled
    values (at most C(14, 7) = 3432 splits here; larger groups use scipy's resampling)."""
    res = _sps.permutation_test((a, b), lambda x, y, axis: np.mean(y, axis=axis) - np.mean(x, axis=axis),
                                permutation_type="independent", alternative="two-sided",
                                n_resamples=20000, vectorized=True, random_state=0)
    return float(min(1.0, res.pvalue))


def reps_to_detect(sd: float, diff: float, *, alpha: float = ALPHA, power: float = POWER,
                   max_reps: int = _MAX_REPS) -> int | None:
    """Repetitions per run (equal on both sides) at which a two-sample t-test at `alpha` finds a
    true difference `diff` with probability `power`, for a per-repetition spread `sd` (noncentral
    t). None when sd or diff is 0 or more than `max_reps` would be needed."""
    if sd <= 0.0 or diff == 0.0 or not math.isfinite(sd / diff):
        return None

    def power_at(n: int) -> float:
        df = 2 * n - 2
        nc = abs(diff) / (sd * math.sqrt(2.0 / n))
        crit = float(_sps.t.ppf(1.0 - alpha / 2.0, df))
        return float(_sps.nct.sf(crit, df, nc) + _sps.nct.cdf(-crit, df, nc))

    # the normal approximation as a start, then step to the exact (noncentral t) answer
    z = float(_sps.norm.ppf(1.0 - alpha / 2.0) + _sps.norm.ppf(power))
    n = max(MIN_REPETITIONS, math.ceil(2.0 * (z * sd / diff) ** 2))
    if n > max_reps:
        return None
    while n > MIN_REPETITIONS and power_at(n - 1) >= power:
        n -= 1
    while power_at(n) < power:
        n += 1
        if n > max_reps:
            return None
    return n


def compare_figure(key: FigureKey, a: Iterable[float], b: Iterable[float],
                   noise: NoiseModel | None = None, *, runs_a: int = 1, runs_b: int = 1,
                   alpha: float = ALPHA) -> Comparison:
    """Compare repetitions `b` against baseline repetitions `a` for one figure, at level `alpha`.

    The difference of the means is significant when a two-sided test gives p < alpha, so an
    unchanged figure comes out significant in at most `alpha` of comparisons at any number of
    repetitions (`tests/unit/test_stats_false_positives.py` checks this on simulated noise):

    - a noise model that has `key` (sigma = spread of one run's figure over N unchanged runs):
      t = d / (sigma * sqrt(1/runs_a + 1/runs_b)) with N - 1 degrees of freedom, where
      `runs_a`/`runs_b` are how many independent runs each side's mean stands for (seed 002
      compared one changed run with the average of its ten base runs: runs_a = 10, runs_b = 1);
    - else, both runs with >= 2 repetitions: Welch's t-test with the Welch-Satterthwaite degrees
      of freedom; when neither run varies at all (t = d/0), the exact permutation test, which
      can only decide from 4 repetitions per run (p = 2/C(2n, n));
    - else, B with one repetition and A with >= 2: B's value against A's spread,
      t = d / (s_A * sqrt(1/n_A + 1)), n_A - 1 degrees of freedom (assumes B varies as A does);
    - else 'insufficient data' with the reason (at least 2 repetitions per run are needed,
      `MIN_REPETITIONS`, or a noise model).

    Two single runs compared with a 2-sigma band around A (ignoring A's own noise) called about
    16 % of unchanged figures significant; the former |t| > 2 rule on two standard errors still
    called 12-18 % at 2-3 repetitions, because t with 1-4 degrees of freedom has heavy tails.
    """
    if runs_a < 1 or runs_b < 1:
        raise FwlabError(f"runs_a and runs_b must be >= 1, got {runs_a} and {runs_b}",
                         fix="count the independent runs each side's mean stands for (1 for one run)")
    if not 0.0 < alpha < 1.0:
        raise FwlabError(f"alpha must be between 0 and 1, got {alpha}", fix="use e.g. 0.05")
    arr_a = as_finite_array(a, what=f"run A values of {figure_label(key)!r}")
    arr_b = as_finite_array(b, what=f"run B values of {figure_label(key)!r}")
    mean_a = float(np.mean(arr_a)) if arr_a.size else None
    mean_b = float(np.mean(arr_b)) if arr_b.size else None

    change_pct = None
    if mean_a is not None and mean_b is not None and mean_a != 0.0:
        change_pct = 100.0 * (mean_b - mean_a) / abs(mean_a)

    baseline_std = se_diff = df = p = None
    source = test = reason = None
    sd_b = None
    if noise is not None and key in noise:
        model = noise.get(key)
        baseline_std, source = model.std, "noise model"
        if arr_a.size and arr_b.size:
            se_diff = model.std * math.sqrt(1.0 / runs_a + 1.0 / runs_b)
            df, test = float(max(1, model.n - 1)), TEST_NOISE
            sd_b = model.std
    elif arr_a.size >= MIN_REPETITIONS:
        baseline_std, source = _sd(arr_a), "run A"
        if arr_b.size >= MIN_REPETITIONS:
            sd_b = _sd(arr_b)
            va, vb = baseline_std ** 2 / arr_a.size, sd_b ** 2 / arr_b.size
            se_diff = math.sqrt(va + vb)
            if se_diff > 0.0:
                df = (va + vb) ** 2 / ((va ** 2 / (arr_a.size - 1) if va else 0.0)
                                       + (vb ** 2 / (arr_b.size - 1) if vb else 0.0))
                test = TEST_WELCH
            else:
                test, se_diff = TEST_PERMUTATION, None
                p = 1.0 if mean_a == mean_b else _permutation_p(arr_a, arr_b)
        elif arr_b.size == 1:
            sd_b = baseline_std
            se_diff = baseline_std * math.sqrt(1.0 / arr_a.size + 1.0)
            df, test = float(arr_a.size - 1), TEST_PREDICTION
    if test is None:
        if not arr_a.size or not arr_b.size:
            reason = f"no values in {'A' if not arr_a.size else 'B'}"
        else:
            reason = (f"needs >= {MIN_REPETITIONS} repetitions in each run, or a noise model "
                      f"('fwlab baseline'); has {arr_a.size} in A and {arr_b.size} in B")

    threshold = diff_ci = None
    if test is not None and test != TEST_PERMUTATION:
        d = mean_b - mean_a
        crit = float(_sps.t.ppf(1.0 - alpha / 2.0, df))
        threshold = crit * se_diff
        diff_ci = (d - threshold, d + threshold)
        if se_diff > 0.0:
            p = float(2.0 * _sps.t.sf(abs(d) / se_diff, df))
        else:
            p = 1.0 if d == 0.0 else 0.0
    threshold_pct = None
    if threshold is not None and mean_a is not None and mean_a != 0.0:
        threshold_pct = 100.0 * threshold / abs(mean_a)

    significant = None if p is None else bool(p < alpha)
    verdict = (INSUFFICIENT_DATA if significant is None
               else SIGNIFICANT if significant else NOT_SIGNIFICANT)

    return Comparison(
        key=key, n_a=int(arr_a.size), n_b=int(arr_b.size), mean_a=mean_a, mean_b=mean_b,
        change_pct=change_pct, baseline_std=baseline_std, baseline_source=source, se_diff=se_diff,
        df=df, threshold=threshold, threshold_pct=threshold_pct, diff_ci=diff_ci, p_value=p,
        significant=significant, test=test, verdict=verdict, reason=reason, std_b=sd_b,
        alpha=alpha,
    )


def compare_ratio(key: FigureKey, a: Sequence[float], a_ref: Sequence[float], b: Sequence[float],
                  b_ref: Sequence[float], *, alpha: float = ALPHA) -> Comparison:
    """Run B against run A on each run's figure divided by its own same-run reference (e.g. the
    0-rule rate measured in the same run): r_A = mean(a) / mean(a_ref), r_B likewise, and the test
    of r_B / r_A = 1. A drift that scales a whole run (this host: ~10 % between batches) cancels.

    On the log scale, log(r_B / r_A) = log mean(b) + log mean(a_ref) - log mean(b_ref) - log mean(a)
    is a sum of four independent log means, each with variance s^2 / (n mean^2) (delta method);
    t = log(r_B / r_A) / se with the Welch-Satterthwaite degrees of freedom of that sum
    (`fwlab.stats.ratio.log_ratio_terms`), two-sided at `alpha`. mean_a and mean_b of the result
    are the ratios r_A and r_B; change_pct = 100 (r_B / r_A - 1); diff_ci is the interval of
    r_B - r_A; se_diff the standard error of log(r_B / r_A); threshold_pct the smallest change of
    the observed sign that is significant.
    Needs >= 2 repetitions in each of the four groups ('insufficient data' otherwise) and
    positive means.
    """
    groups = {"A": a, "A's reference": a_ref, "B": b, "B's reference": b_ref}
    arrs = {k: as_finite_array(v, what=f"{k} values of {figure_label(key)!r}") for k, v in groups.items()}
    n_a = min(arrs["A"].size, arrs["A's reference"].size)
    n_b = min(arrs["B"].size, arrs["B's reference"].size)
    empty = [k for k, v in arrs.items() if not v.size]
    terms = None if empty else log_ratio_terms([arrs["B"], arrs["A's reference"]], [arrs["B's reference"], arrs["A"]])
    if terms is None:
        reason = (f"no values in {', '.join(empty)}" if empty else "a mean is not positive: no ratio")
        return Comparison(key=key, n_a=int(n_a), n_b=int(n_b), mean_a=None, mean_b=None, change_pct=None,
                          baseline_std=None, baseline_source=RATIO_SOURCE, se_diff=None, df=None, threshold=None,
                          threshold_pct=None, diff_ci=None, p_value=None, significant=None, test=None,
                          verdict=INSUFFICIENT_DATA, reason=reason, alpha=alpha)
    log_r, v, df, _, _ = terms
    ra = float(np.mean(arrs["A"]) / np.mean(arrs["A's reference"]))
    rb = float(np.mean(arrs["B"]) / np.mean(arrs["B's reference"]))
    change_pct = 100.0 * (math.exp(log_r) - 1.0)
    base = dict(key=key, n_a=int(n_a), n_b=int(n_b), mean_a=ra, mean_b=rb, change_pct=change_pct,
                baseline_std=None, baseline_source=RATIO_SOURCE, alpha=alpha)
    if min(v.size for v in arrs.values()) < MIN_REPETITIONS:
        sizes = ", ".join(f"{k} {v.size}" for k, v in arrs.items())
        return Comparison(**base, se_diff=None, df=None, threshold=None, threshold_pct=None, diff_ci=None,
                          p_value=None, significant=None, test=None, verdict=INSUFFICIENT_DATA,
                          reason=f"needs >= {MIN_REPETITIONS} repetitions of each figure and its reference "
                                 f"in each run; has {sizes}")
    se = math.sqrt(v)
    if se == 0.0:
        p, half, df_used = (1.0 if log_r == 0.0 else 0.0), 0.0, None
    else:
        df_used = df
        p = float(2.0 * _sps.t.sf(abs(log_r) / se, df))
        half = float(_sps.t.ppf(1.0 - alpha / 2.0, df)) * se
    lo, hi = ra * math.exp(log_r - half), ra * math.exp(log_r + half)
    threshold_pct = 100.0 * (math.exp(half) - 1.0 if log_r >= 0.0 else 1.0 - math.exp(-half))
    significant = bool(p < alpha)
    return Comparison(**base, se_diff=se, df=df_used, threshold=ra * threshold_pct / 100.0,
                      threshold_pct=threshold_pct, diff_ci=(lo - ra, hi - ra), p_value=p,
                      significant=significant, test=TEST_RATIO,
                      verdict=SIGNIFICANT if significant else NOT_SIGNIFICANT)


def compare_tables(a: Mapping[FigureKey, Sequence[float]], b: Mapping[FigureKey, Sequence[float]],
                   noise: NoiseModel | None = None, *, runs_a: int = 1, runs_b: int = 1,
                   alpha: float = ALPHA) -> list[Comparison]:
    """Compare every figure of run B against run A.

    Order: A's keys as given, then keys only B has. A key missing on one side is compared with
    no values there, so it shows up as 'insufficient data' instead of vanishing.
    """
    keys = list(a.keys()) + [k for k in b.keys() if k not in a]
    return [compare_figure(k, a.get(k, ()), b.get(k, ()), noise, runs_a=runs_a, runs_b=runs_b, alpha=alpha)
            for k in keys]
