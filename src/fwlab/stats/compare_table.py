"""The comparison table in seed 002's Table 2 shape: one row per figure (A's and B's means and
spreads, the change, the test, the verdict), as dicts and as plain text.

Owns: the table's columns and rendering. Never decides a verdict (fwlab.stats.compare does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from fwlab.stats.compare import ALPHA, MIN_REPETITIONS, POWER, RATIO_SOURCE, Comparison
from fwlab.stats.noise_model import FigureKey


_COLUMNS = (
    ("figure", "Figure"),
    ("base_mean", "Base mean"),
    ("changed_mean", "Changed mean"),
    ("change_pct", "% change"),
    ("threshold_pct", "threshold %"),
    ("p_value", "p"),
    ("significant", "Significant?"),
)


def comparison_rows(comparisons: Iterable[Comparison]) -> list[dict[str, Any]]:
    """One JSON-safe dict per figure: figure, base_mean, changed_mean, change_pct [%],
    threshold_pct [%], p_value, significant (bool or None), plus verdict, test, reason and
    reps_to_detect."""
    return [
        {
            "figure": c.label,
            "base_mean": c.mean_a,
            "changed_mean": c.mean_b,
            "change_pct": c.change_pct,
            "threshold_pct": c.threshold_pct,
            "p_value": c.p_value,
            "significant": c.significant,
            "verdict": c.verdict,
            "test": c.test,
            "reason": c.reason,
            "reps_to_detect": c.reps_to_detect,
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
    if name == "p_value":
        return f"{value:.3g}"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


ValueFormat = Callable[[FigureKey, float], str]
"""Renders a mean of a figure in a human unit, e.g. ``(key, 1.2e9) -> '1.20 Gbit/s'``."""


def render_comparison_table(comparisons: Iterable[Comparison], *, title: str | None = None,
                            value_format: ValueFormat | None = None) -> str:
    """Plain-text table: Figure | Base mean | Changed mean | % change | threshold % | p | Significant?

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
    alpha = comparisons[0].alpha if comparisons else ALPHA
    out.append(f"significant: two-sided p < {alpha:g} (Welch t-test with Welch-Satterthwaite degrees of "
               f"freedom on both runs' repetitions; t-test on the noise model's spread where one is given); "
               f"threshold %: the smallest change that would be significant. A decision needs >= "
               f"{MIN_REPETITIONS} repetitions per run, or a noise model.")
    if any(c.baseline_source == RATIO_SOURCE for c in comparisons):
        out.append("  '% of ref' rows: each run's figure over its own run's same-run reference; significant: "
                   f"Welch t-test on the log of B's ratio over A's (delta method), p < {alpha:g}; threshold %: "
                   "the smallest change of that sign that would be significant.")
    notes = [c for c in comparisons if c.reason or c.reps_to_detect]
    for c in notes:
        if c.reason:
            out.append(f"  {c.label}: insufficient data, {c.reason}")
        else:
            out.append(f"  {c.label}: a change this large needs ~{c.reps_to_detect} repetitions per run "
                       f"to be found ({POWER:.0%} power)")
    return "\n".join(out) + "\n"


def comparison_table(comparisons: Iterable[Comparison], *, title: str | None = None,
                     value_format: ValueFormat | None = None) -> tuple[list[dict[str, Any]], str]:
    """Both forms of the table at once: (`comparison_rows`, `render_comparison_table`)."""
    comparisons = list(comparisons)
    return comparison_rows(comparisons), render_comparison_table(comparisons, title=title,
                                                                 value_format=value_format)
