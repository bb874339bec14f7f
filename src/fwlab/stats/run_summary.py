"""The computed summary of a record's rule-count curves: one value per figure, for every output.

Owns: `PointSummary` (one configuration at one rule count: per metric its median, mean, spread,
the interval of the mean, and its mean as % of the 0-rule reference with that ratio's Fieller
interval), `point_summaries` over the curves of ``fwlab.results.curves``, the flat rows of
summary.csv (`summary_rows`, `SUMMARY_COLUMNS`) and `row_key`, the name of a row the outputs
share. summary.csv, report.html, the terminal summary, ``--json``, ``fwlab.load`` and the JSON
export all read these rows, so a figure has one value wherever it is shown.

One definition each:
- ``<metric>_pct_of_0_rules`` is mean(figure) / mean(0-rule reference) in %, the estimate its
  Fieller interval (``_pct_of_0_rules_ci95_low/high``, fwlab.stats.ratio) is built around; the
  reference pools the 0-rule repetitions of layouts that load the same 0-rule set (linear, set).
- ``<metric>_ci95_low/high`` is `fwlab.stats.summary.mean_interval`: on the log scale for a
  figure that cannot be negative (every rate here), so it never goes below 0.
Never touches: files, plots, the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fwlab.results.curves import CURVE_FIELDS, METRICS, Curve, primary_metric
from fwlab.stats.quality import flag_cv
from fwlab.stats.ratio import ratio_to_zero
from fwlab.stats.summary import mean_interval, summarize

__all__ = ["MetricSummary", "PointSummary", "point_summaries", "summary_rows", "row_key",
           "SUMMARY_STATS", "SUMMARY_COLUMNS"]

#: per-metric statistics in summary.csv, in column order
SUMMARY_STATS = ("median", "mean", "min", "max", "cv", "ci95_low", "ci95_high", "pct_of_0_rules",
                 "pct_of_0_rules_ci95_low", "pct_of_0_rules_ci95_high")
#: summary.csv's columns, always all and in this order whatever the suite (docs/record-format.md)
SUMMARY_COLUMNS = (CURVE_FIELDS + ("rules", "n", "errors")
                   + tuple(f"{m}_{s}" for m in METRICS for s in SUMMARY_STATS) + ("quality_flags",))


@dataclass(frozen=True)
class MetricSummary:
    """One metric of one configuration at one rule count, over its repetitions [the metric's
    stored unit, e.g. packets/s; `cv` a ratio; `pct*` in %]."""

    metric: str
    n: int
    median: float
    mean: float
    min: float
    max: float
    cv: float | None
    ci95_low: float | None
    """Interval of the mean (`mean_interval`); None with one repetition."""
    ci95_high: float | None
    pct_of_0_rules: float | None
    """mean / mean of the 0-rule reference [%]; None without a reference."""
    pct_of_0_rules_ci95_low: float | None
    """Fieller interval of that ratio [%]; None with fewer than 2 repetitions on a side."""
    pct_of_0_rules_ci95_high: float | None
    pct_why: str | None = None
    """Why the ratio has no interval (fwlab.stats.ratio.RatioInterval.why)."""


@dataclass(frozen=True)
class PointSummary:
    """One configuration (a curve) at one rule count."""

    curve: Curve
    rules: int
    n: int
    """Most repetitions with a value of any metric [count]."""
    errors: int
    """Failed repetitions [count]."""
    metrics: dict[str, MetricSummary] = field(default_factory=dict)
    quality_flags: tuple[str, ...] = ()

    @property
    def primary(self) -> MetricSummary | None:
        """The curve's primary metric (fwlab.results.curves.primary_metric), if measured."""
        return self.metrics.get(primary_metric(self.curve))

    def key(self) -> str:
        return row_key({**self.curve.k, "rules": self.rules})

    def row(self) -> dict[str, Any]:
        """The summary.csv row: every one of `SUMMARY_COLUMNS`, in order; None where the point
        has no value (a metric not measured, an interval with one repetition)."""
        row: dict[str, Any] = dict.fromkeys(SUMMARY_COLUMNS)
        row.update({**self.curve.k, "rules": self.rules, "n": self.n, "errors": self.errors})
        for m, s in self.metrics.items():
            for stat in SUMMARY_STATS:
                row[f"{m}_{stat}"] = getattr(s, stat)
        row["quality_flags"] = ";".join(self.quality_flags)
        return row


def row_key(row: dict[str, Any]) -> str:
    """A summary row's name, the same from a `PointSummary`, a summary.csv row (strings) or a
    JSON row: the curve fields and the rule count joined by '|' (empty for a missing value)."""
    def text(v: Any) -> str:
        if v is None or v == "":
            return ""
        if isinstance(v, bool) or v in ("True", "False"):
            return str(v in (True, "True"))
        try:
            f = float(v)
        except (TypeError, ValueError):
            return str(v)
        return str(int(f)) if f.is_integer() else repr(f)
    return "|".join(text(row.get(f)) for f in CURVE_FIELDS + ("rules",))


def _metric_summary(c: Curve, metric: str, rules: int, vals: list[float]) -> MetricSummary:
    s = summarize(vals)
    iv = mean_interval(vals)
    r = ratio_to_zero(c, metric, rules)
    pct, lo, hi = r.pct() if r is not None else (None, None, None)
    return MetricSummary(metric=metric, n=s.n, median=s.median, mean=s.mean, min=s.min, max=s.max, cv=s.cv,
                         ci95_low=iv[0] if iv else None, ci95_high=iv[1] if iv else None,
                         pct_of_0_rules=pct, pct_of_0_rules_ci95_low=lo, pct_of_0_rules_ci95_high=hi,
                         pct_why=r.why if r is not None else None)


def point_summaries(cs: list[Curve]) -> list[PointSummary]:
    """Every point of every curve, in curve and rule-count order."""
    out = []
    for c in cs:
        for n, p in c.points.items():
            ms = {m: _metric_summary(c, m, n, vals) for m in METRICS if (vals := p.values.get(m))}
            prim = p.values.get(primary_metric(c)) or []
            flags = tuple(sorted(set(p.flags) | {f.code for f in flag_cv(prim)}))
            out.append(PointSummary(curve=c, rules=n, n=max((s.n for s in ms.values()), default=0),
                                    errors=len(p.errors), metrics=ms, quality_flags=flags))
    return out


def summary_rows(cs: list[Curve]) -> list[dict[str, Any]]:
    """summary.csv's rows (one per point), as plain values."""
    return [p.row() for p in point_summaries(cs)]
