"""Comparing two runs figure by figure: % change, 2-sigma verdict, Welch p-value.

Owns: matching the figures of run A (the baseline) and run B, choosing the spread the verdict
uses (the noise model of a baseline when given and it models the figure, else run A's own
repetitions), and the result in two forms: the seed 002 Table-2-shaped text (rendered by
`fwlab.stats.comparison_table`) and a JSON-safe dict. Never touches: the test bed, traffic,
plots or the CLI; the statistics are `fwlab.stats.compare`'s.

Only figures present in both runs are compared; those present in one run only are counted and
listed. Runs of different suites compare on their common figures. `ignore` leaves curve fields
out of the figure key, so a run of layout linear can be compared with a run of layout set.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fwlab.analysis.figures import PRIMARY, Figure, run_figures
from fwlab.errors import FwlabError
from fwlab.results.record import RunRecord
from fwlab.stats import (
    SIGNIFICANT,
    Comparison,
    NoiseModel,
    compare_figure,
    comparison_table,
)

__all__ = ["RunComparison", "compare_figures", "compare_runs", "human_value"]


def human_value(key, value: float) -> str:
    """A figure's value in the report's unit, from the metric that ends its key
    (``... rx_pps`` -> '123.4 kpps', ``... throughput_bps`` -> '1.23 Gbit/s')."""
    from fwlab.results.curves import METRIC_INFO

    metric = str(key).rsplit(" ", 1)[-1]
    info = METRIC_INFO.get(metric)
    if info is None:
        return f"{value:.4g}"
    _, unit, scale = info
    v = value * scale
    digits = 3 if abs(v) < 10 else 2 if abs(v) < 100 else 1
    return f"{v:.{digits}f} {unit}"


@dataclass(frozen=True)
class RunComparison:
    """Run B against run A, every common figure."""

    run_a: str
    """Run A (the baseline) directory."""
    run_b: str
    """Run B directory."""
    suite_a: str | None
    suite_b: str | None
    comparisons: tuple[Comparison, ...]
    """One per figure in both runs, in run A's order."""
    only_a: tuple[str, ...]
    """Figures only run A holds."""
    only_b: tuple[str, ...]
    """Figures only run B holds."""
    noise_used: bool
    """Whether a noise model was given."""
    ignore: tuple[str, ...] = ()
    """Curve fields left out of the figure keys."""

    @property
    def significant(self) -> int:
        return sum(1 for c in self.comparisons if c.verdict == SIGNIFICANT)

    def summary_line(self) -> str:
        """One line: N figures, K significant, and how many were in one run only."""
        s = f"{len(self.comparisons)} figures compared, {self.significant} significant"
        undecided = sum(1 for c in self.comparisons if c.significant_2sigma is None)
        if undecided:
            s += f", {undecided} undecided (no spread: give --noise or repeat run A)"
        if self.only_a or self.only_b:
            s += f"; {len(self.only_a)} only in A, {len(self.only_b)} only in B"
        return s

    def table(self) -> str:
        """Seed 002 Table 2 shape, then the Welch p-values where both runs have repetitions."""
        title = f"A (base): {self.run_a}\nB:        {self.run_b}"
        if self.suite_a != self.suite_b:
            title += f"\nsuites differ: {self.suite_a} vs {self.suite_b}; common figures only"
        if self.ignore:
            title += f"\nleft out of the figure keys: {', '.join(self.ignore)}"
        title += f"\nspread: {'noise model where it has the figure, else ' if self.noise_used else ''}" \
                 "the runs' repetitions"
        if not self.noise_used:
            title += ("\n  (repetitions inside one run agree more than whole runs do: without --noise, "
                      "run-to-run noise can show as significant; measure one with 'fwlab baseline')")
        _, text = comparison_table(self.comparisons, title=title, value_format=human_value)
        ps = [(c.label, c.p_value) for c in self.comparisons if c.p_value is not None]
        if ps:
            width = max(len(label) for label, _ in ps)
            text += "Welch t-test, two-sided (both runs with >= 2 repetitions):\n"
            text += "".join(f"  {label.ljust(width)}  p = {p:.3g}\n" for label, p in ps)
        return text

    def to_dict(self) -> dict[str, Any]:
        rows, _ = comparison_table(self.comparisons)
        return {
            "run_a": self.run_a, "run_b": self.run_b, "suite_a": self.suite_a, "suite_b": self.suite_b,
            "noise_model": self.noise_used, "ignore": list(self.ignore),
            "figures": len(self.comparisons), "significant": self.significant,
            "rows": rows, "comparisons": [c.to_dict() for c in self.comparisons],
            "only_in_a": list(self.only_a), "only_in_b": list(self.only_b),
            "summary": self.summary_line(),
        }


def compare_figures(a: dict[str, Figure], b: dict[str, Figure],
                    noise: NoiseModel | None = None) -> list[Comparison]:
    """Compare the figures both dicts hold; the noise model is looked up by run A's full key."""
    out = []
    for key, fa in a.items():
        fb = b.get(key)
        if fb is None:
            continue
        model = None
        if noise is not None and fa.full_key in noise:
            model = NoiseModel({key: noise.get(fa.full_key)})
        out.append(compare_figure(key, fa.values, fb.values, model))
    return out


def compare_runs(run_a: Path | str, run_b: Path | str, *, noise: NoiseModel | None = None,
                 metric: str | Sequence[str] = PRIMARY, ignore: Iterable[str] = ()) -> RunComparison:
    """Compare run B against run A (the baseline) on every figure both hold."""
    ignore = tuple(ignore)
    fa = run_figures(run_a, metric, ignore)
    fb = run_figures(run_b, metric, ignore)
    if not fa or not fb:
        empty = run_a if not fa else run_b
        raise FwlabError(f"{empty} holds no stream figures for metric {metric!r}",
                         fix="pass runs with finished stream trials, or another --metric")
    comparisons = compare_figures(fa, fb, noise)
    if not comparisons:
        raise FwlabError(f"the runs have no figure in common ({len(fa)} in A, {len(fb)} in B)",
                         fix="compare runs of the same configurations, or leave differing fields "
                             "out with --ignore (e.g. --ignore layout)")
    return RunComparison(
        run_a=str(run_a), run_b=str(run_b),
        suite_a=RunRecord.open(run_a).run.get("suite", {}).get("name"),
        suite_b=RunRecord.open(run_b).run.get("suite", {}).get("name"),
        comparisons=tuple(comparisons),
        only_a=tuple(k for k in fa if k not in fb), only_b=tuple(k for k in fb if k not in fa),
        noise_used=noise is not None, ignore=ignore)
