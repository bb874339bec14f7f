"""Summary statistics of one group of repetitions of one figure.

Owns: the `Summary` of a list of numbers (mean, median, sample spread, Student t interval of the
mean, the distribution-free order-statistic interval of the median with the coverage it has:
fwlab.stats.median_interval).
Never touches: run records, files, the network or the clock. Input is a plain sequence of numbers,
output a frozen dataclass whose `to_dict()` is JSON-safe (undefined values are `None`, never NaN).

Units: every value is in the unit of the input figure (pps, TPM, ns, ...), except `cv`, which is
a ratio (0.05 means 5 %), and `confidence`, a probability in (0, 1).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as _sps

from fwlab.errors import FwlabError
from fwlab.stats.median_interval import median_interval
from fwlab.stats.values import as_finite_array, check_confidence

__all__ = ["Summary", "summarize", "as_finite_array", "mean_interval", "LOG_MEAN_METHOD"]

LOG_MEAN_METHOD = "t on the log of the mean (delta method)"


@dataclass(frozen=True)
class Summary:
    """Summary of n repetitions of one figure. Values are in the figure's own unit."""

    n: int
    """Number of repetitions [count]."""
    mean: float
    """Arithmetic mean [figure unit]."""
    median: float
    """Median [figure unit]."""
    std: float | None
    """Sample standard deviation, ddof=1 [figure unit]; None when n == 1."""
    min: float
    """Smallest value [figure unit]."""
    max: float
    """Largest value [figure unit]."""
    cv: float | None
    """Coefficient of variation std/|mean| [ratio, 0.05 = 5 %]; None when n == 1 or mean == 0."""
    ci_mean: tuple[float, float] | None
    """Student t interval of the mean at `confidence` [figure unit]; None when n == 1."""
    ci_median: tuple[float, float] | None
    """Order-statistic interval of the median [figure unit]: the narrowest covering at least
    `confidence`, else (fewer than 6 values at 95 %) min to max; None when n == 1."""
    ci_median_level: float | None
    """The coverage `ci_median` has [probability]: >= `confidence`, or less when too few values
    (0.75 at n = 3); None when n == 1."""
    confidence: float
    """Confidence level asked of both intervals [probability]."""

    @property
    def ci_median_short(self) -> bool:
        """`ci_median` covers less than `confidence` (too few values for it)."""
        return self.ci_median_level is not None and self.ci_median_level < self.confidence

    @property
    def cv_pct(self) -> float | None:
        """Coefficient of variation [%]."""
        return None if self.cv is None else 100.0 * self.cv

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict: plain floats, intervals as 2-lists, undefined values as None."""
        return {
            "n": self.n,
            "mean": self.mean,
            "median": self.median,
            "std": self.std,
            "min": self.min,
            "max": self.max,
            "cv": self.cv,
            "ci_mean": None if self.ci_mean is None else list(self.ci_mean),
            "ci_median": None if self.ci_median is None else list(self.ci_median),
            "ci_median_level": self.ci_median_level,
            "confidence": self.confidence,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Summary:
        """Inverse of `to_dict`."""
        def interval(v: Any) -> tuple[float, float] | None:
            return None if v is None else (float(v[0]), float(v[1]))

        try:
            return cls(
                n=int(data["n"]), mean=float(data["mean"]), median=float(data["median"]),
                std=None if data["std"] is None else float(data["std"]),
                min=float(data["min"]), max=float(data["max"]),
                cv=None if data["cv"] is None else float(data["cv"]),
                ci_mean=interval(data["ci_mean"]), ci_median=interval(data["ci_median"]),
                ci_median_level=None if data["ci_median_level"] is None else float(data["ci_median_level"]),
                confidence=float(data["confidence"]),
            )
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise FwlabError(f"malformed summary {data!r}: {exc}",
                             fix="rebuild it with fwlab.stats.summarize") from exc


def _t_interval(arr: np.ndarray, confidence: float) -> tuple[float, float]:
    n = arr.size
    mean = float(np.mean(arr))
    std = float(np.std(arr, ddof=1))
    t = float(_sps.t.ppf(0.5 + confidence / 2.0, df=n - 1))
    half = t * std / math.sqrt(n)
    return (mean - half, mean + half)


def summarize(values: Iterable[float], *, confidence: float = 0.95) -> Summary:
    """Summarize repetitions of one figure; see `Summary` for the fields and their units.

    Raises `FwlabError` for no values or non-finite values. One value gives std, cv and both
    intervals as None. Constant values give std 0, cv 0 (None if the mean is 0) and intervals
    collapsed to the value.
    """
    arr = as_finite_array(values)
    if arr.size == 0:
        raise FwlabError("cannot summarize an empty group of repetitions",
                         fix="run at least one repetition")
    confidence = check_confidence(confidence)
    n = int(arr.size)
    mean = float(np.mean(arr))
    if np.all(arr == arr[0]):
        mean = float(arr[0])  # avoid 0.1+0.1+0.1 style rounding for constant input
    median = float(np.median(arr))
    std: float | None = None
    cv: float | None = None
    ci_mean: tuple[float, float] | None = None
    ci_median: tuple[float, float] | None = None
    ci_median_level: float | None = None
    if n >= 2:
        std = float(np.std(arr, ddof=1))
        if np.all(arr == arr[0]):
            std = 0.0
        cv = None if mean == 0.0 else std / abs(mean)
        ci_mean = (mean, mean) if std == 0.0 else _t_interval(arr, confidence)
        if (iv := median_interval(arr, confidence)) is not None:
            ci_median, ci_median_level = iv.bounds, iv.level
    return Summary(
        n=n, mean=mean, median=median, std=std, min=float(np.min(arr)), max=float(np.max(arr)),
        cv=cv, ci_mean=ci_mean, ci_median=ci_median, ci_median_level=ci_median_level, confidence=confidence,
    )


def mean_interval(values: Iterable[float], *, confidence: float = 0.95) -> tuple[float, float] | None:
    """Interval of the mean at `confidence` in the figure's own scale [figure unit]; None with
    fewer than 2 values.

    A figure that cannot be negative (a rate, a ratio: every value >= 0, mean > 0) gets the t
    interval of log(mean) (delta method: standard error s / (sqrt(n) mean)), mapped back:
    mean / exp(t se) .. mean exp(t se). It never goes below 0, which the symmetric t interval
    does at 2 or 3 noisy repetitions (t = 12.7 at 1 degree of freedom). Any other figure gets the
    Student t interval. Constant values give the value twice.
    """
    arr = as_finite_array(values)
    if arr.size < 2:
        return None
    confidence = check_confidence(confidence)
    mean = float(np.mean(arr))
    if np.all(arr == arr[0]):
        return (float(arr[0]), float(arr[0]))
    if not (np.all(arr >= 0.0) and mean > 0.0):
        return _t_interval(arr, confidence)
    t = float(_sps.t.ppf(0.5 + confidence / 2.0, df=arr.size - 1))
    se_log = float(np.std(arr, ddof=1)) / (math.sqrt(arr.size) * mean)
    return (mean * math.exp(-t * se_log), mean * math.exp(t * se_log))
