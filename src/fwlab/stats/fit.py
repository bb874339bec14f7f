"""Per-packet cost of firewall rules, from forwarding rates measured at several rule counts.

Owns: the linear cost model `1/rate = a + b * N` (time per packet grows by b per rule), fitted by
ordinary least squares (scipy.stats.linregress) over every (rules N, rate pps) point, and the two-rate difference
`per_packet_cost_ns`, with the slope's t interval. Never touches: run records, searches or traffic; callers pass in rates they
already measured (e.g. the NDR of each rule-set size).

Units: rates in packets per second [pps]; times in nanoseconds [ns]; rule counts are plain counts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as _sps

from fwlab.errors import FwlabError
from fwlab.stats.summary import as_finite_array

__all__ = ["CostFit", "fit_per_packet_cost", "per_packet_cost_ns"]

_NS_PER_S = 1e9


@dataclass(frozen=True)
class CostFit:
    """Least-squares fit of time per packet against rule count: t(N) = base_ns + per_rule_ns * N."""

    per_rule_ns: float
    """b: added time per rule per packet [ns/rule/packet]."""
    base_ns: float
    """a: time per packet with no rules [ns/packet]."""
    r_squared: float | None
    """Coefficient of determination of the fit in the ns domain [ratio]; None if all times equal."""
    n_points: int
    """Number of (rules, rate) points fitted [count]; repeated rule counts each count."""
    n_rule_counts: int
    """Number of distinct rule counts [count], at least 2."""
    per_rule_ns_stderr: float | None
    """Standard error of per_rule_ns [ns/rule/packet]; None with only 2 points."""
    base_ns_stderr: float | None
    """Standard error of base_ns [ns/packet]; None with only 2 points."""
    per_rule_ns_ci: tuple[float, float] | None = None
    """Student t interval of per_rule_ns at `confidence`, per_rule_ns +- t_(n-2) * stderr
    [ns/rule/packet]; None with only 2 points."""
    confidence: float = 0.95
    """Confidence level of `per_rule_ns_ci` [probability]."""

    def predict_ns(self, rules: float) -> float:
        """Modelled time per packet at `rules` rules [ns/packet]."""
        return self.base_ns + self.per_rule_ns * rules

    def predict_pps(self, rules: float) -> float | None:
        """Modelled rate at `rules` rules [pps]; None where the model gives no positive time."""
        t = self.predict_ns(rules)
        return None if t <= 0.0 else _NS_PER_S / t

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (undefined values as None)."""
        return {
            "per_rule_ns": self.per_rule_ns,
            "base_ns": self.base_ns,
            "r_squared": self.r_squared,
            "n_points": self.n_points,
            "n_rule_counts": self.n_rule_counts,
            "per_rule_ns_stderr": self.per_rule_ns_stderr,
            "base_ns_stderr": self.base_ns_stderr,
            "per_rule_ns_ci": None if self.per_rule_ns_ci is None else list(self.per_rule_ns_ci),
            "confidence": self.confidence,
        }


def _positive_rates(rates: Iterable[float]) -> np.ndarray:
    arr = as_finite_array(rates, what="rates [pps]")
    if arr.size and np.any(arr <= 0.0):
        raise FwlabError(f"rates must be positive packets per second, got {arr.tolist()}",
                         fix="leave out trials that forwarded nothing")
    return arr


def fit_per_packet_cost(points: Iterable[tuple[float, float]], *, confidence: float = 0.95) -> CostFit:
    """Fit 1/rate = a + b * N over (rules N, rate pps) points by ordinary least squares.

    The fit is done on time per packet, 1e9/rate [ns], so b comes out in ns per rule per packet
    and a in ns per packet. Repeated rule counts are fine (each repetition is one point). Needs at
    least two distinct rule counts; raises `FwlabError` otherwise, or for non-positive rates.
    The slope's interval is the ordinary least-squares t interval (n - 2 degrees of freedom).
    """
    pairs = [tuple(p) for p in points]
    if any(len(p) != 2 for p in pairs):
        raise FwlabError("each point must be a (rules, rate_pps) pair",
                         fix="pass e.g. [(0, 1.4e6), (1000, 0.9e6)]")
    x = as_finite_array([p[0] for p in pairs], what="rule counts")
    rate = _positive_rates(p[1] for p in pairs)
    if np.any(x < 0.0):
        raise FwlabError(f"rule counts must not be negative, got {x.tolist()}",
                         fix="pass the number of rules in each rule set")
    distinct = int(np.unique(x).size)
    if distinct < 2:
        raise FwlabError(f"a cost fit needs at least two different rule counts, got {distinct}",
                         fix="measure at two or more rule-set sizes")

    y = _NS_PER_S / rate
    n = int(x.size)
    fit = _sps.linregress(x, y)   # scipy's OLS: slope, intercept, r, and both standard errors
    b, a = float(fit.slope), float(fit.intercept)
    r_squared = None if np.all(y == y[0]) else float(fit.rvalue) ** 2

    se_b = se_a = ci = None
    if n > 2:
        flat = bool(np.all(y == y[0]))   # a perfect fit: linregress's errors are 0 or NaN there
        se_b, se_a = (0.0, 0.0) if flat else (float(fit.stderr), float(fit.intercept_stderr))
        t = float(_sps.t.ppf(0.5 + confidence / 2.0, n - 2))
        ci = (b - t * se_b, b + t * se_b)

    return CostFit(per_rule_ns=b, base_ns=a, r_squared=r_squared, n_points=n,
                   n_rule_counts=distinct, per_rule_ns_stderr=se_b, base_ns_stderr=se_a,
                   per_rule_ns_ci=ci, confidence=confidence)


def per_packet_cost_ns(r1: float, r2: float) -> float:
    """Time each packet costs at rate `r1` beyond rate `r2`: 1e9/r1 - 1e9/r2 [ns/packet].

    With r1 measured with extra work (e.g. N rules) and r2 without, a positive result is the
    extra time per packet that work costs. Rates in pps, both positive.
    """
    arr = _positive_rates([r1, r2])
    return float(_NS_PER_S / arr[0] - _NS_PER_S / arr[1])
