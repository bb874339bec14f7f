"""Interval of a ratio of two means, e.g. a rate at N rules as % of the 0-rule rate.

Owns: `ratio_interval` — the ratio of the means of two independent groups of repetitions and its
Fieller interval, which carries the noise of the numerator and of the denominator (the 0-rule
reference is measured too, not known) — and `product_ratio_interval`, the interval of a product of
means over a product of means (a ratio of ratios: a share of direct at 900 streams over the share
at 1 stream; run B's figure-to-reference ratio over run A's). Never touches: records, plots or the
CLI.

Fieller (1954) for independent means a (n_a values) and b (n_b values), with
v_a = s_a^2/n_a and v_b = s_b^2/n_b: the interval is every rho with
(a - rho b)^2 <= t^2 (v_a + rho^2 v_b), t the two-sided t quantile at `confidence` with the
Welch-Satterthwaite degrees of freedom of a - r b (r = a/b). When b is not clearly away from 0
(g = t^2 v_b / b^2 >= 1) the set is unbounded and no interval is given. For non-negative
figures (rates) a negative lower bound is clipped to 0. fwlab keeps its own Fieller interval
because scipy and statsmodels have none for a ratio of two independent means with unequal
variances (Welch-Satterthwaite degrees of freedom).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as _sps

from fwlab.stats.summary import as_finite_array

__all__ = ["RatioInterval", "ratio_interval", "RATIO_METHOD", "product_ratio_interval", "LOG_RATIO_METHOD",
           "log_ratio_terms"]

RATIO_METHOD = "Fieller, t with Welch-Satterthwaite df"
LOG_RATIO_METHOD = "t on the log ratio (delta method), Welch-Satterthwaite df"


@dataclass(frozen=True)
class RatioInterval:
    """mean(num) / mean(den) and its interval at `confidence` [ratio, 1.0 = equal]."""

    ratio: float
    """mean(num) / mean(den) [ratio]."""
    low: float | None
    """Lower bound [ratio]; None when there is no bounded interval (see `why`)."""
    high: float | None
    """Upper bound [ratio]; None when there is no bounded interval."""
    confidence: float
    """Confidence level [probability]."""
    df: float | None
    """Degrees of freedom of the t quantile; None without an interval."""
    n_num: int
    """Repetitions of the numerator [count]."""
    n_den: int
    """Repetitions of the denominator [count]."""
    why: str | None = None
    """Why there is no interval (fewer than 2 repetitions, reference not away from 0)."""
    method: str = RATIO_METHOD

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    def pct(self) -> tuple[float, float | None, float | None]:
        """(ratio, low, high) in % [%]."""
        return (100.0 * self.ratio, None if self.low is None else 100.0 * self.low,
                None if self.high is None else 100.0 * self.high)

    def to_dict(self) -> dict[str, Any]:
        return {"ratio": self.ratio, "low": self.low, "high": self.high, "confidence": self.confidence,
                "df": self.df, "n_num": self.n_num, "n_den": self.n_den, "why": self.why,
                "method": self.method}


def _var(arr: np.ndarray) -> float:
    return 0.0 if np.all(arr == arr[0]) else float(np.var(arr, ddof=1))


def ratio_interval(num: Iterable[float], den: Iterable[float], *, confidence: float = 0.95) -> RatioInterval | None:
    """Fieller interval of mean(num)/mean(den) for independent repetitions; None when either side
    is empty or mean(den) is 0. With fewer than 2 repetitions on a side the ratio comes without an
    interval (`why` says so)."""
    a_arr = as_finite_array(num, what="numerator values")
    b_arr = as_finite_array(den, what="denominator values")
    if not a_arr.size or not b_arr.size:
        return None
    a, b = float(np.mean(a_arr)), float(np.mean(b_arr))
    if b == 0.0:
        return None
    r = a / b
    na, nb = int(a_arr.size), int(b_arr.size)
    base = dict(ratio=r, confidence=confidence, n_num=na, n_den=nb)
    if na < 2 or nb < 2:
        return RatioInterval(low=None, high=None, df=None,
                             why=f"an interval needs >= 2 repetitions on both sides (has {na} and {nb})", **base)
    va, vb = _var(a_arr) / na, _var(b_arr) / nb
    if va == 0.0 and vb == 0.0:
        return RatioInterval(low=r, high=r, df=None, **base)
    v = va + r * r * vb
    if v == 0.0:  # the numerator is exactly 0 in every repetition: the ratio is 0 whatever the denominator
        return RatioInterval(low=r, high=r, df=None, **base)
    df = v * v / ((va * va / (na - 1) if va else 0.0) + ((r * r * vb) ** 2 / (nb - 1) if vb else 0.0))
    t = float(_sps.t.ppf(0.5 + confidence / 2.0, df))
    den_q = b * b - t * t * vb
    if den_q <= 0.0:
        return RatioInterval(low=None, high=None, df=df,
                             why="no bounded interval at this noise (the reference is not clearly "
                                 "away from 0 at these degrees of freedom)", **base)
    disc = a * a * vb + b * b * va - t * t * va * vb
    half = t * math.sqrt(max(disc, 0.0))
    lo, hi = (a * b - half) / den_q, (a * b + half) / den_q
    lo, hi = min(lo, hi), max(lo, hi)
    if np.all(a_arr >= 0.0) and np.all(b_arr > 0.0):
        lo = max(lo, 0.0)   # a ratio of rates is not negative: clipping keeps the coverage
    return RatioInterval(low=lo, high=hi, df=df, **base)


def ratio_to_zero(curve, metric: str, rules: int) -> RatioInterval | None:
    """A curve's (``fwlab.results.curves.Curve``) mean at ``rules`` over its 0-rule reference's
    mean (pooled over layouts that share it), with the Fieller interval carrying the noise of
    both; None where either has no values."""
    base = curve.reference()
    p = curve.points.get(rules)
    if base is None or p is None or not p.values.get(metric) or not base.values.get(metric):
        return None
    return ratio_interval(p.values[metric], base.values[metric])


def product_ratio_interval(nums: Iterable[Iterable[float]], dens: Iterable[Iterable[float]], *,
                           confidence: float = 0.95) -> RatioInterval | None:
    """prod(mean(g) for g in nums) / prod(mean(g) for g in dens) and its interval at `confidence`,
    every group an independent set of repetitions of a positive figure.

    On the log scale the estimate is a sum of independent log means, each with variance
    s^2 / (n mean^2) (delta method); the interval is exp(log r +- t se) with t at the
    Welch-Satterthwaite degrees of freedom of that sum (`LOG_RATIO_METHOD`). None when a group is
    empty or a mean is not positive; without an interval (`why`) when a group has one repetition.
    """
    terms = log_ratio_terms(nums, dens)
    if terms is None:
        return None
    log_r, v, df, n_num, n_den = terms
    r = math.exp(log_r)
    base = dict(ratio=r, confidence=confidence, n_num=n_num, n_den=n_den, method=LOG_RATIO_METHOD)
    if min(n_num, n_den) < 2:
        return RatioInterval(low=None, high=None, df=None,
                             why=f"an interval needs >= 2 repetitions in every group (the smallest has "
                                 f"{min(n_num, n_den)})", **base)
    if v == 0.0:
        return RatioInterval(low=r, high=r, df=None, **base)
    half = float(_sps.t.ppf(0.5 + confidence / 2.0, df)) * math.sqrt(v)
    return RatioInterval(low=math.exp(log_r - half), high=math.exp(log_r + half), df=df, **base)


def log_ratio_terms(nums: Iterable[Iterable[float]], dens: Iterable[Iterable[float]]
                    ) -> tuple[float, float, float | None, int, int] | None:
    """(log r, variance of log r, Welch-Satterthwaite df, fewest repetitions among the numerator
    groups, among the denominator groups) for r = prod(mean(nums)) / prod(mean(dens)), each group
    independent; a group's log mean has variance s^2 / (n mean^2) (delta method). df is None when
    a group has one repetition or nothing varies. None when a group is empty or a mean is not
    positive."""
    groups = [(as_finite_array(g, what="numerator values"), 1.0) for g in nums]
    groups += [(as_finite_array(g, what="denominator values"), -1.0) for g in dens]
    if not groups or any(not arr.size for arr, _ in groups):
        return None
    means = [float(np.mean(arr)) for arr, _ in groups]
    if any(m <= 0.0 for m in means):
        return None
    log_r = sum(sign * math.log(m) for (_, sign), m in zip(groups, means, strict=True))
    n_num = min((int(a.size) for a, sign in groups if sign > 0), default=0)
    n_den = min((int(a.size) for a, sign in groups if sign < 0), default=0)
    if min(int(a.size) for a, _ in groups) < 2:
        return log_r, 0.0, None, n_num, n_den
    parts = [(_var(arr) / (arr.size * m * m), int(arr.size)) for (arr, _), m in zip(groups, means, strict=True)]
    v = sum(p for p, _ in parts)
    df = None if v == 0.0 else v * v / sum(p * p / (n - 1) for p, n in parts if p)
    return log_r, v, df, n_num, n_den
