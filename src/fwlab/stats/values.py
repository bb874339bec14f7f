"""Checked input of the statistics: a flat array of finite numbers, a confidence level.

Owns: `as_finite_array` and `check_confidence`, shared by every module of fwlab.stats so that bad
input gets the same one-line error (`FwlabError` with its fix) everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from fwlab.errors import FwlabError

__all__ = ["as_finite_array", "check_confidence"]


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


def check_confidence(confidence: float) -> float:
    confidence = float(confidence)
    if not 0.0 < confidence < 1.0:
        raise FwlabError(f"confidence must be between 0 and 1 (exclusive), got {confidence}",
                         fix="use e.g. 0.95 for a 95 % interval")
    return confidence
