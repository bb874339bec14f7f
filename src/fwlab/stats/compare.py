"""Significance of a change: run A (baseline) against run B, figure by figure.

Owns: the 2-sigma rule of seed 002 (ten runs of a base system give each figure's spread; a change
counts only if it moves the figure by more than two standard deviations; here: two standard
errors of the difference of the two means, see `compare_figure`), the `NoiseModel` that
stores those spreads, a Welch t-test p-value as a second opinion, and the Table-2-shaped
comparison table (rows as dicts and a plain-text rendering).
Never touches: run records on disk, plots, the CLI or the test bed. Input is plain dicts of
`figure key -> list of repetition values`; output is frozen dataclasses with JSON-safe dicts.

A figure key names one configuration plus one metric, either a string
(`"ip4udp-64B-nft1000r-linear-sf-ndr/throughput_pps"`) or a tuple of strings and numbers
(`("nft", 1000, "throughput_pps")`). Values are in the figure's own unit.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
from scipy import stats as _sps

from fwlab.errors import FwlabError
from fwlab.stats.summary import as_finite_array

__all__ = [
    "FigureKey", "FigureNoise", "NoiseModel", "Comparison", "compare_figure", "compare_tables",
    "comparison_rows", "render_comparison_table", "comparison_table", "figure_label",
    "SIGNIFICANT", "NOT_SIGNIFICANT", "INSUFFICIENT_DATA",
]

FigureKey = str | tuple[Any, ...]
"""Names one configuration + metric: a string, or a tuple of strings/numbers (nesting allowed)."""

SIGNIFICANT = "significant"
NOT_SIGNIFICANT = "not significant"
INSUFFICIENT_DATA = "insufficient data"

NOISE_FORMAT = "fwlab.stats.noise"
NOISE_VERSION = 1

_SIGMAS = 2.0


# --- keys ----------------------------------------------------------------------------------------

def _key_to_json(key: FigureKey) -> Any:
    if isinstance(key, tuple):
        return [_key_to_json(k) for k in key]
    if key is None or isinstance(key, (str, int, float, bool)):
        return key
    raise FwlabError(f"figure key part {key!r} is not a string, number or tuple",
                     fix="name figures with strings or tuples of strings and numbers")


def _key_from_json(data: Any) -> FigureKey:
    if isinstance(data, list):
        return tuple(_key_from_json(k) for k in data)
    return data


def figure_label(key: FigureKey) -> str:
    """Human-readable name of a figure key: tuples are joined with ' / '."""
    if isinstance(key, tuple):
        return " / ".join(figure_label(k) for k in key)
    return str(key)


def _float_or_none(v: Any) -> float | None:
    return None if v is None else float(v)


# --- noise model ---------------------------------------------------------------------------------

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
            "figures": [{"key": _key_to_json(k), **f.to_dict()} for k, f in self.figures.items()],
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
                key = _key_from_json(entry["key"])
                figures[key] = FigureNoise(n=int(entry["n"]), mean=float(entry["mean"]),
                                           std=float(entry["std"]), cv=_float_or_none(entry["cv"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise FwlabError(f"malformed noise model entry: {exc}",
                             fix="rebuild it with NoiseModel.from_runs") from exc
        return cls(figures)


# --- comparison ----------------------------------------------------------------------------------

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
    """Standard deviation the rule uses [figure unit]: the noise model's, else A's (ddof=1)."""
    baseline_source: str | None
    """'noise model', 'run A', or None when no spread is known."""
    se_diff: float | None
    """Standard error of mean_b - mean_a [figure unit]: with a noise model
    baseline_std * sqrt(1/runs_a + 1/runs_b), else sqrt(s_a^2/n_a + s_b^2/n_b) over the
    repetitions (s_b = s_a when B has fewer than 2)."""
    threshold: float | None
    """2 * se_diff [figure unit]."""
    threshold_pct: float | None
    """100 * threshold / |mean_a| [%], so |change_pct| > threshold_pct exactly when significant."""
    significant_2sigma: bool | None
    """|mean_b - mean_a| > threshold; None when it cannot be decided."""
    p_value: float | None
    """Two-sided Welch t-test p-value; None unless both sides have >= 2 values and some spread."""
    verdict: str
    """'significant', 'not significant' or 'insufficient data' (by the 2-sigma rule)."""

    @property
    def label(self) -> str:
        return figure_label(self.key)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (key as string or list, undefined values as None)."""
        return {
            "key": _key_to_json(self.key),
            "figure": self.label,
            "n_a": self.n_a,
            "n_b": self.n_b,
            "mean_a": self.mean_a,
            "mean_b": self.mean_b,
            "change_pct": self.change_pct,
            "baseline_std": self.baseline_std,
            "baseline_source": self.baseline_source,
            "se_diff": self.se_diff,
            "threshold": self.threshold,
            "threshold_pct": self.threshold_pct,
            "significant_2sigma": self.significant_2sigma,
            "p_value": self.p_value,
            "verdict": self.verdict,
        }


def _welch_p(a: np.ndarray, b: np.ndarray) -> float | None:
    if a.size < 2 or b.size < 2:
        return None
    if np.all(a == a[0]) and np.all(b == b[0]):
        return None  # t = d/0: undefined; the 2-sigma rule still decides
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = float(_sps.ttest_ind(a, b, equal_var=False).pvalue)
    return None if math.isnan(p) else p


def compare_figure(key: FigureKey, a: Iterable[float], b: Iterable[float],
                   noise: NoiseModel | None = None, *, runs_a: int = 1, runs_b: int = 1) -> Comparison:
    """Compare repetitions `b` against baseline repetitions `a` for one figure.

    The decision is seed 002's two-sigma rule applied to the *difference* of the two means:
    significant when |mean_B - mean_A| > 2 * SE, where SE is the standard error of that
    difference, so that an unchanged configuration comes out significant in about 5 % of
    comparisons whatever the number of runs or repetitions on each side:

    - with a noise model that has `key` (sigma = spread of one run's figure over N unchanged runs):
      SE = sigma * sqrt(1/runs_a + 1/runs_b), where `runs_a`/`runs_b` are how many independent
      runs each side's mean stands for (1 for one run directory; seed 002 compared one run of a
      changed configuration against the average of its ten base runs: runs_a = 10, runs_b = 1);
    - else from the repetitions: SE = sqrt(s_A^2/n_A + s_B^2/n_B) (needs n_A >= 2; s_B = s_A when
      B has fewer than two repetitions).

    Comparing two single runs with a threshold of 2 sigma (not 2 sigma * sqrt 2) would call about
    16 % of unchanged figures significant: the difference of two noisy figures is noisier than
    either. With sigma known the false-positive rate is P(|Z| > 2) = 4.6 %; with sigma estimated
    from N baseline runs it is P(|t_(N-1)| > 2), e.g. 7.7 % for N = 10 (seed 002's rule).
    """
    if runs_a < 1 or runs_b < 1:
        raise FwlabError(f"runs_a and runs_b must be >= 1, got {runs_a} and {runs_b}",
                         fix="count the independent runs each side's mean stands for (1 for one run)")
    arr_a = as_finite_array(a, what=f"run A values of {figure_label(key)!r}")
    arr_b = as_finite_array(b, what=f"run B values of {figure_label(key)!r}")
    mean_a = float(np.mean(arr_a)) if arr_a.size else None
    mean_b = float(np.mean(arr_b)) if arr_b.size else None

    change_pct = None
    if mean_a is not None and mean_b is not None and mean_a != 0.0:
        change_pct = 100.0 * (mean_b - mean_a) / abs(mean_a)

    def _sd(arr: np.ndarray) -> float:
        return 0.0 if np.all(arr == arr[0]) else float(np.std(arr, ddof=1))

    baseline_std: float | None = None
    se_diff: float | None = None
    source: str | None = None
    if noise is not None and key in noise:
        baseline_std, source = noise.std_for(key), "noise model"
        se_diff = baseline_std * math.sqrt(1.0 / runs_a + 1.0 / runs_b)
    elif arr_a.size >= 2:
        baseline_std = _sd(arr_a)
        source = "run A"
        if arr_b.size:
            sd_b = _sd(arr_b) if arr_b.size >= 2 else baseline_std
            se_diff = math.sqrt(baseline_std ** 2 / arr_a.size + sd_b ** 2 / arr_b.size)

    threshold = None if se_diff is None else _SIGMAS * se_diff
    threshold_pct = None
    if threshold is not None and mean_a is not None and mean_a != 0.0:
        threshold_pct = 100.0 * threshold / abs(mean_a)

    significant: bool | None = None
    if threshold is not None and mean_a is not None and mean_b is not None:
        significant = bool(abs(mean_b - mean_a) > threshold)
    verdict = (INSUFFICIENT_DATA if significant is None
               else SIGNIFICANT if significant else NOT_SIGNIFICANT)

    return Comparison(
        key=key, n_a=int(arr_a.size), n_b=int(arr_b.size), mean_a=mean_a, mean_b=mean_b,
        change_pct=change_pct, baseline_std=baseline_std, baseline_source=source, se_diff=se_diff,
        threshold=threshold, threshold_pct=threshold_pct, significant_2sigma=significant,
        p_value=_welch_p(arr_a, arr_b), verdict=verdict,
    )


def compare_tables(a: Mapping[FigureKey, Sequence[float]], b: Mapping[FigureKey, Sequence[float]],
                   noise: NoiseModel | None = None, *, runs_a: int = 1, runs_b: int = 1) -> list[Comparison]:
    """Compare every figure of run B against run A.

    Order: A's keys as given, then keys only B has. A key missing on one side is compared with
    no values there, so it shows up as 'insufficient data' instead of vanishing.
    """
    keys = list(a.keys()) + [k for k in b.keys() if k not in a]
    return [compare_figure(k, a.get(k, ()), b.get(k, ()), noise, runs_a=runs_a, runs_b=runs_b) for k in keys]


# --- the table (seed 002, Table 2 shape) ----------------------------------------------------------

_COLUMNS = (
    ("figure", "Figure"),
    ("base_mean", "Base mean"),
    ("changed_mean", "Changed mean"),
    ("change_pct", "% change"),
    ("threshold_pct", "2σ threshold %"),
    ("significant", "Significant?"),
)


def comparison_rows(comparisons: Iterable[Comparison]) -> list[dict[str, Any]]:
    """One JSON-safe dict per figure: figure, base_mean, changed_mean, change_pct [%],
    threshold_pct [%], significant (bool or None), plus verdict and p_value."""
    return [
        {
            "figure": c.label,
            "base_mean": c.mean_a,
            "changed_mean": c.mean_b,
            "change_pct": c.change_pct,
            "threshold_pct": c.threshold_pct,
            "significant": c.significant_2sigma,
            "verdict": c.verdict,
            "p_value": c.p_value,
        }
        for c in comparisons
    ]


def _cell(name: str, value: Any) -> str:
    if value is None:
        return "n/a"
    if name == "significant":
        return "yes" if value else "no"
    if name == "change_pct":
        return f"{value:+.2f}"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


ValueFormat = Callable[[FigureKey, float], str]
"""Renders a mean of a figure in a human unit, e.g. ``(key, 1.2e9) -> '1.20 Gbit/s'``."""


def render_comparison_table(comparisons: Iterable[Comparison], *, title: str | None = None,
                            value_format: ValueFormat | None = None) -> str:
    """Plain-text table: Figure | Base mean | Changed mean | % change | 2σ threshold % | Significant?

    Text in the first column is left-aligned, numbers right-aligned; undefined cells read 'n/a'.
    `value_format` renders the two means (default: the raw number with two decimals).
    """
    comparisons = list(comparisons)
    rows = comparison_rows(comparisons)
    header = [h for _, h in _COLUMNS]
    body = []
    for c, row in zip(comparisons, rows, strict=True):
        cells = [_cell(name, row[name]) for name, _ in _COLUMNS]
        if value_format is not None:
            for i, v in ((1, c.mean_a), (2, c.mean_b)):
                if v is not None:
                    cells[i] = value_format(c.key, v)
        body.append(cells)
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        parts = [cells[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join(parts).rstrip()

    out = []
    if title:
        out.append(title)
    out.append(line(header))
    out.append("  ".join("-" * w for w in widths))
    out.extend(line(r) for r in body)
    out.append("significant: |changed - base| > 2 x the standard error of the difference "
               "(noise model spread x sqrt(1/runs_A + 1/runs_B), else both runs' repetitions)")
    return "\n".join(out) + "\n"


def comparison_table(comparisons: Iterable[Comparison], *, title: str | None = None,
                     value_format: ValueFormat | None = None) -> tuple[list[dict[str, Any]], str]:
    """Both forms of the table at once: (`comparison_rows`, `render_comparison_table`)."""
    comparisons = list(comparisons)
    return comparison_rows(comparisons), render_comparison_table(comparisons, title=title,
                                                                 value_format=value_format)
