"""Summary statistics of one group of repetitions of one figure.

Owns: the `Summary` of a list of numbers (mean, median, sample spread, Student t interval of the
mean, seeded percentile-bootstrap interval of the median) and `percentile_ci` for any percentile.
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

__all__ = ["Summary", "summarize", "percentile_ci", "as_finite_array"]

#: Upper bound on the number of floats one bootstrap chunk materialises (about 64 MiB).
_CHUNK_ELEMENTS = 8_000_000


def as_finite_array(values: Iterable[float], *, what: str = "values") -> np.ndarray:
    """Return `values` as a 1-D float64 array; raise `FwlabError` on NaN, inf or non-numbers."""
    try:
        arr = np.asarray(list(values), dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise FwlabError(f"{what} must be numbers: {exc}", fix="pass a flat list of numbers") from exc
    if arr.ndim != 1:
        raise FwlabError(f"{what} must be a flat list of numbers, got shape {arr.shape}",
                         fix="pass one number per repetition")
    if arr.size and not np.all(np.isfinite(arr)):
        raise FwlabError(f"{what} contain NaN or infinity: {arr.tolist()}",
                         fix="drop failed repetitions before summarizing")
    return arr


def _check_confidence(confidence: float) -> float:
    confidence = float(confidence)
    if not 0.0 < confidence < 1.0:
        raise FwlabError(f"confidence must be between 0 and 1 (exclusive), got {confidence}",
                         fix="use e.g. 0.95 for a 95 % interval")
    return confidence


def _check_resamples(resamples: int) -> int:
    resamples = int(resamples)
    if resamples < 1:
        raise FwlabError(f"bootstrap needs at least one resample, got {resamples}",
                         fix="use e.g. 2000 resamples")
    return resamples


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
    """Percentile-bootstrap interval of the median at `confidence` [figure unit]; None when n == 1."""
    confidence: float
    """Confidence level of both intervals [probability]."""
    bootstrap_seed: int
    """Seed of the bootstrap generator (numpy default_rng), recorded for reproduction."""
    bootstrap_resamples: int
    """Number of bootstrap resamples [count]."""

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
            "confidence": self.confidence,
            "bootstrap_seed": self.bootstrap_seed,
            "bootstrap_resamples": self.bootstrap_resamples,
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
                confidence=float(data["confidence"]),
                bootstrap_seed=int(data["bootstrap_seed"]),
                bootstrap_resamples=int(data["bootstrap_resamples"]),
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


def _bootstrap_stats(arr: np.ndarray, q: float, seed: int, resamples: int) -> np.ndarray:
    """The `q`-th percentile of each of `resamples` resamples with replacement of `arr`."""
    rng = np.random.default_rng(seed)
    n = arr.size
    rows_per_chunk = max(1, _CHUNK_ELEMENTS // n)
    out = np.empty(resamples, dtype=np.float64)
    done = 0
    while done < resamples:
        rows = min(rows_per_chunk, resamples - done)
        idx = rng.integers(0, n, size=(rows, n))
        out[done:done + rows] = np.percentile(arr[idx], q, axis=1)
        done += rows
    return out


def percentile_ci(values: Iterable[float], q: float, *, confidence: float = 0.95,
                  seed: int = 0, resamples: int = 2000) -> tuple[float, float]:
    """Percentile-bootstrap interval of the `q`-th percentile (0..100, numpy's linear rule).

    Deterministic for a given `seed` (numpy `default_rng`). With one value, or with all values
    equal, the interval collapses to that value. Raises `FwlabError` for no values.
    """
    arr = as_finite_array(values)
    if arr.size == 0:
        raise FwlabError("cannot bootstrap a percentile of no values", fix="run at least one repetition")
    q = float(q)
    if not 0.0 <= q <= 100.0:
        raise FwlabError(f"percentile q must be within 0..100, got {q}", fix="use 50 for the median")
    confidence = _check_confidence(confidence)
    resamples = _check_resamples(resamples)
    if arr.size == 1 or np.all(arr == arr[0]):
        v = float(arr[0])
        return (v, v)
    boot = _bootstrap_stats(arr, q, int(seed), resamples)
    alpha = 1.0 - confidence
    lo, hi = np.percentile(boot, [100.0 * alpha / 2.0, 100.0 * (1.0 - alpha / 2.0)])
    return (float(lo), float(hi))


def summarize(values: Iterable[float], *, confidence: float = 0.95, bootstrap_seed: int = 0,
              bootstrap_resamples: int = 2000) -> Summary:
    """Summarize repetitions of one figure; see `Summary` for the fields and their units.

    Raises `FwlabError` for no values or non-finite values. One value gives std, cv and both
    intervals as None. Constant values give std 0, cv 0 (None if the mean is 0) and intervals
    collapsed to the value.
    """
    arr = as_finite_array(values)
    if arr.size == 0:
        raise FwlabError("cannot summarize an empty group of repetitions",
                         fix="run at least one repetition")
    confidence = _check_confidence(confidence)
    bootstrap_resamples = _check_resamples(bootstrap_resamples)
    n = int(arr.size)
    mean = float(np.mean(arr))
    if np.all(arr == arr[0]):
        mean = float(arr[0])  # avoid 0.1+0.1+0.1 style rounding for constant input
    median = float(np.median(arr))
    std: float | None = None
    cv: float | None = None
    ci_mean: tuple[float, float] | None = None
    ci_median: tuple[float, float] | None = None
    if n >= 2:
        std = float(np.std(arr, ddof=1))
        if np.all(arr == arr[0]):
            std = 0.0
        cv = None if mean == 0.0 else std / abs(mean)
        ci_mean = (mean, mean) if std == 0.0 else _t_interval(arr, confidence)
        ci_median = percentile_ci(arr, 50.0, confidence=confidence, seed=bootstrap_seed,
                                  resamples=bootstrap_resamples)
    return Summary(
        n=n, mean=mean, median=median, std=std, min=float(np.min(arr)), max=float(np.max(arr)),
        cv=cv, ci_mean=ci_mean, ci_median=ci_median, confidence=confidence,
        bootstrap_seed=int(bootstrap_seed), bootstrap_resamples=int(bootstrap_resamples),
    )
