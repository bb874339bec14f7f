"""The noise model: per-figure run-to-run spreads (seed 002: ten runs of a base system give each
figure's spread, its "2 stdev %"), stored as versioned JSON, and the figure keys it and the
comparison (fwlab.stats.compare) name figures by.

A figure key names one configuration plus one metric, either a string
(`"ip4udp-64B-nft1000r-linear-sf-ndr/throughput_pps"`) or a tuple of strings and numbers
(`("nft", 1000, "throughput_pps")`). Values are in the figure's own unit.

Owns: the spreads and their file format. Never decides whether a figure changed (compare does).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from fwlab.errors import FwlabError
from fwlab.stats.summary import as_finite_array

FigureKey = str | tuple[Any, ...]
"""Names one configuration + metric: a string, or a tuple of strings/numbers (nesting allowed)."""

NOISE_FORMAT = "fwlab.stats.noise"
NOISE_VERSION = 1

_SIGMAS = 2.0


def key_to_json(key: FigureKey) -> Any:
    if isinstance(key, tuple):
        return [key_to_json(k) for k in key]
    if key is None or isinstance(key, (str, int, float, bool)):
        return key
    raise FwlabError(f"figure key part {key!r} is not a string, number or tuple",
                     fix="name figures with strings or tuples of strings and numbers")


def key_from_json(data: Any) -> FigureKey:
    if isinstance(data, list):
        return tuple(key_from_json(k) for k in data)
    return data


def figure_label(key: FigureKey) -> str:
    """Human-readable name of a figure key: tuples are joined with ' / '."""
    if isinstance(key, tuple):
        return " / ".join(figure_label(k) for k in key)
    return str(key)


def _float_or_none(v: Any) -> float | None:
    return None if v is None else float(v)


@dataclass(frozen=True)
class FigureNoise:
    """Run-to-run spread of one figure, measured on N repetitions of the unchanged baseline."""

    n: int
    """Number of baseline runs [count], at least 2."""
    mean: float
    """Mean of the baseline runs [figure unit]."""
    std: float
    """Sample standard deviation (ddof=1) of the baseline runs [figure unit]."""
    cv: float | None
    """std/|mean| [ratio]; None when the mean is 0."""

    @property
    def threshold(self) -> float:
        """The 2-sigma threshold, 2 * std [figure unit]."""
        return _SIGMAS * self.std

    @property
    def threshold_pct(self) -> float | None:
        """The 2-sigma threshold relative to the baseline mean, 2 * cv [%] (seed 002 '2 stdev %')."""
        return None if self.cv is None else 100.0 * _SIGMAS * self.cv

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "mean": self.mean, "std": self.std, "cv": self.cv}

    @classmethod
    def from_values(cls, values: Iterable[float]) -> FigureNoise:
        """Spread of baseline repetitions; raises `FwlabError` with fewer than two."""
        arr = as_finite_array(values, what="baseline values")
        if arr.size < 2:
            raise FwlabError(f"a noise model needs at least 2 baseline runs per figure, got {arr.size}",
                             fix="repeat the baseline run (seed 002 used ten)")
        mean = float(np.mean(arr))
        std = 0.0 if np.all(arr == arr[0]) else float(np.std(arr, ddof=1))
        cv = None if mean == 0.0 else std / abs(mean)
        return cls(n=int(arr.size), mean=mean, std=std, cv=cv)


@dataclass(frozen=True)
class NoiseModel:
    """Per-figure run-to-run spread of a baseline (`figures`: figure key -> `FigureNoise`).

    Build it with `NoiseModel.from_runs({key: [run1, run2, ...]})`; store it with `to_dict()`
    (JSON-safe; tuple keys become lists) and load it back with `from_dict()`.
    """

    figures: Mapping[FigureKey, FigureNoise] = field(default_factory=dict)
    """Spread per figure key."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "figures", MappingProxyType(dict(self.figures)))

    @classmethod
    def from_runs(cls, runs: Mapping[FigureKey, Sequence[float]]) -> NoiseModel:
        """Noise model from N baseline runs per figure; every figure needs at least 2 runs."""
        figures: dict[FigureKey, FigureNoise] = {}
        for key, values in runs.items():
            try:
                figures[key] = FigureNoise.from_values(values)
            except FwlabError as exc:
                raise FwlabError(f"figure {figure_label(key)!r}: {exc.message}", fix=exc.fix) from exc
        return cls(figures)

    def __contains__(self, key: object) -> bool:
        return key in self.figures

    def __len__(self) -> int:
        return len(self.figures)

    def get(self, key: FigureKey) -> FigureNoise | None:
        return self.figures.get(key)

    def std_for(self, key: FigureKey) -> float | None:
        """Baseline standard deviation of `key` [figure unit], or None if not modelled."""
        noise = self.figures.get(key)
        return None if noise is None else noise.std

    def pooled_threshold_pct(self) -> float | None:
        """Simple average of every figure's 2-sigma threshold in % (seed 002: 7.76 % for TPM).

        One number to apply to any load when a per-figure threshold is not wanted; figures with
        a zero mean are left out. None when no figure qualifies.
        """
        pcts = [f.threshold_pct for f in self.figures.values() if f.threshold_pct is not None]
        return None if not pcts else float(sum(pcts) / len(pcts))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict, versioned; keys are kept as strings or (nested) lists."""
        return {
            "format": NOISE_FORMAT,
            "version": NOISE_VERSION,
            "figures": [{"key": key_to_json(k), **f.to_dict()} for k, f in self.figures.items()],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NoiseModel:
        """Inverse of `to_dict`; raises `FwlabError` on an unknown format or version."""
        if not isinstance(data, Mapping) or data.get("format") != NOISE_FORMAT:
            raise FwlabError("not a fwlab noise model (missing format tag)",
                             fix="rebuild it with NoiseModel.from_runs")
        if data.get("version") != NOISE_VERSION:
            raise FwlabError(f"noise model version {data.get('version')!r} is not supported "
                             f"(this fwlab reads version {NOISE_VERSION})",
                             fix="rebuild it with NoiseModel.from_runs")
        figures: dict[FigureKey, FigureNoise] = {}
        try:
            for entry in data["figures"]:
                key = key_from_json(entry["key"])
                figures[key] = FigureNoise(n=int(entry["n"]), mean=float(entry["mean"]),
                                           std=float(entry["std"]), cv=_float_or_none(entry["cv"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise FwlabError(f"malformed noise model entry: {exc}",
                             fix="rebuild it with NoiseModel.from_runs") from exc
        return cls(figures)
