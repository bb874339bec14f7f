"""Comparing two runs figure by figure: % change, Welch t-test verdict and p-value.

Owns: matching the figures of run A (the baseline) and run B, choosing the spread the verdict
uses (the noise model of a baseline when given and it models the figure, else run A's own
repetitions), and the result in two forms: the seed 002 Table-2-shaped text (rendered by
`fwlab.stats.comparison_table`) and a JSON-safe dict. Never touches: the test bed, traffic,
plots or the CLI; the statistics are `fwlab.stats.compare`'s.

Two modes (`RATIO`, the default, and `ABSOLUTE`). Whole runs drift against each other (this host:
~10 % between batches, far more under load) while repetitions inside one run agree, so two runs of
one suite compared absolutely call unchanged figures significant. In ratio mode each figure is
divided by its own run's same-run reference (`fwlab.analysis.figures`: the 0-rule figure of its
configuration, or no firewall for a 0-rule figure) and run B's ratio is tested against run A's
(`fwlab.stats.compare_ratio`: Welch t-test on the log ratio with the interval of the ratio), so a
drift that scales a whole run cancels. Figures that are references themselves are not tested in
ratio mode: their change is shown as the runs' drift (`RunComparison.drift`). A figure without a
reference in both runs is compared absolutely, and its row says so. `ABSOLUTE` (``fwlab compare
--absolute``) compares every figure's own values.

Every record kind is compared (stream and rfc2544 curves, parallel, attack, connections,
transactions, rtt; see `fwlab.analysis.figures.KIND_METRICS`). Only figures present in both runs
are compared; those present in one run only are counted and
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
    MIN_REPETITIONS,
    SIGNIFICANT,
    Comparison,
    NoiseModel,
    compare_figure,
    comparison_table,
)
from fwlab.stats.compare import RATIO_SOURCE, compare_ratio

__all__ = ["RunComparison", "compare_figures", "compare_runs", "human_value", "RATIO", "ABSOLUTE", "MODES"]

RATIO = "ratio to own reference"
"""Each figure over its own run's same-run reference, run B's ratio against run A's (the default)."""
ABSOLUTE = "absolute"
"""Each figure's own values, run B against run A (``--absolute``)."""
MODES = (RATIO, ABSOLUTE)


#: units of the figures of the kinds that form no curve (metric -> display unit, scale)
_KIND_UNITS = {"conn_rate_cps": ("conn/s", 1.0), "capacity_connections": ("connections", 1.0),
               "completion_s": ("s", 1.0), "recovery_s": ("s", 1.0), "first_probe_bps": ("Gbit/s", 1e-9),
               "stream_min_bps": ("Gbit/s", 1e-9), "tpm": ("TPM", 1.0), "failure_pct": ("%", 1.0),
               "rtt_p50_ms": ("ms", 1.0), "rtt_p99_ms": ("ms", 1.0), "rtt_mean_ms": ("ms", 1.0)}


def human_value(key, value: float) -> str:
    """A figure's value in the report's unit, from the metric that ends its key
    (``... rx_pps`` -> '123.4 kpps', ``... throughput_bps`` -> '1.23 Gbit/s')."""
    from fwlab.results.curves import METRIC_INFO

    metric = str(key).rsplit(" ", 1)[-1]
    info = METRIC_INFO.get(metric)
    if info is not None:
        _, unit, scale = info
    elif metric in _KIND_UNITS:
        unit, scale = _KIND_UNITS[metric]
    else:
        return f"{value:.4g}"
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
    mode: str = ABSOLUTE
    """`RATIO` or `ABSOLUTE`: the mode asked for (in ratio mode, figures without a reference in both
    runs are still compared absolutely; `Comparison.test` says per figure)."""
    drift: tuple[Comparison, ...] = ()
    """Ratio mode: the references (figures other figures were divided by), run B against run A in
    absolute terms: the runs' drift. Not counted as changes (``--absolute`` tests them)."""

    @property
    def significant(self) -> int:
        return sum(1 for c in self.comparisons if c.verdict == SIGNIFICANT)

    @property
    def as_ratio(self) -> int:
        return sum(1 for c in self.comparisons if c.baseline_source == RATIO_SOURCE)

    def mode_line(self) -> str:
        """Which mode was used, in one sentence."""
        if self.mode == ABSOLUTE:
            return ("mode: absolute (each figure's own values; a drift of a whole run shows as a change; "
                    "the default divides by each run's own reference)")
        absolute = len(self.comparisons) - self.as_ratio
        return (f"mode: ratio to own reference ({self.as_ratio} figures divided by their own run's same-run "
                f"reference, B's ratio tested against A's; {len(self.drift)} references not tested, their change "
                f"is the runs' drift" + (f"; {absolute} figures without a reference in both runs compared "
                                         "absolutely" if absolute else "") + "; --absolute for absolute mode)")

    def summary_line(self) -> str:
        """One line: N figures, K significant, and how many were in one run only."""
        s = f"{len(self.comparisons)} figures compared ({'ratio to own reference' if self.mode == RATIO else 'absolute'}), " \
            f"{self.significant} significant"
        undecided = sum(1 for c in self.comparisons if c.significant is None)
        if undecided:
            s += (f", {undecided} insufficient data (a decision needs >= {MIN_REPETITIONS} repetitions "
                  "per run, or --noise)")
        if self.only_a or self.only_b:
            s += f"; {len(self.only_a)} only in A, {len(self.only_b)} only in B"
        return s

    def table(self) -> str:
        """Seed 002 Table 2 shape with each figure's p-value and the test's note."""
        title = f"A (base): {self.run_a}\nB:        {self.run_b}"
        if self.suite_a != self.suite_b:
            title += f"\nsuites differ: {self.suite_a} vs {self.suite_b}; common figures only"
        if self.ignore:
            title += f"\nleft out of the figure keys: {', '.join(self.ignore)}"
        title += "\n" + self.mode_line()
        title += f"\nspread: {'noise model where it has the figure, else ' if self.noise_used else ''}" \
                 "the runs' repetitions"
        if not self.noise_used and self.as_ratio < len(self.comparisons):
            title += ("\n  (repetitions inside one run agree more than whole runs do: a figure compared absolutely "
                      "can show run-to-run drift as significant; measure the noise with 'fwlab baseline')")

        def value(key, v):
            c = by_key.get(key)
            return f"{100.0 * v:.1f} % of ref" if c is not None and c.baseline_source == RATIO_SOURCE else human_value(key, v)

        by_key = {c.key: c for c in self.comparisons}
        _, text = comparison_table(self.comparisons, title=title, value_format=value)
        if self.drift:
            lines = ["references (not tested in ratio mode; B against A, the runs' drift):"]
            for c in self.drift:
                ch = "n/a" if c.change_pct is None else f"{c.change_pct:+.1f} %"
                iv = ("" if c.diff_ci is None or not c.mean_a else
                      f" [{100 * c.diff_ci[0] / abs(c.mean_a):+.1f}, {100 * c.diff_ci[1] / abs(c.mean_a):+.1f}]")
                lines.append(f"  {c.label}: {ch}{iv}")
            text += "\n".join(lines) + "\n"
        return text

    def to_dict(self) -> dict[str, Any]:
        rows, _ = comparison_table(self.comparisons)
        return {
            "run_a": self.run_a, "run_b": self.run_b, "suite_a": self.suite_a, "suite_b": self.suite_b,
            "noise_model": self.noise_used, "ignore": list(self.ignore), "mode": self.mode,
            "mode_line": self.mode_line(), "drift": [c.to_dict() for c in self.drift],
            "figures": len(self.comparisons), "significant": self.significant,
            "rows": rows, "comparisons": [c.to_dict() for c in self.comparisons],
            "only_in_a": list(self.only_a), "only_in_b": list(self.only_b),
            "summary": self.summary_line(),
        }


def compare_figures(a: dict[str, Figure], b: dict[str, Figure], noise: NoiseModel | None = None,
                    mode: str = ABSOLUTE) -> list[Comparison]:
    """Compare the figures both dicts hold; the noise model is looked up by run A's full key.

    `mode` `RATIO`: a figure with a same-run reference in both runs is compared as its ratio to it
    (`fwlab.stats.compare_ratio`; a noise model is not used for those); the others absolutely.
    References are compared too (use `split_references` to set them apart)."""
    if mode not in MODES:
        raise FwlabError(f"unknown comparison mode {mode!r}", fix=f"use one of {', '.join(MODES)}")
    out = []
    for key, fa in a.items():
        fb = b.get(key)
        if fb is None:
            continue
        if mode == RATIO and fa.ref_values and fb.ref_values:
            out.append(compare_ratio(key, fa.values, fa.ref_values, fb.values, fb.ref_values))
            continue
        model = None
        if noise is not None and fa.full_key in noise:
            model = NoiseModel({key: noise.get(fa.full_key)})
        out.append(compare_figure(key, fa.values, fb.values, model))
    return out


def split_references(comparisons: list[Comparison], a: dict[str, Figure], b: dict[str, Figure]
                     ) -> tuple[list[Comparison], list[Comparison]]:
    """(changes, references): the comparisons of figures another figure was divided by (in ratio
    mode, in both runs) go to references."""
    refs = {k for c in comparisons if c.baseline_source == RATIO_SOURCE for k in a[c.key].ref_keys + b[c.key].ref_keys}
    return ([c for c in comparisons if c.key not in refs or c.baseline_source == RATIO_SOURCE],
            [c for c in comparisons if c.key in refs and c.baseline_source != RATIO_SOURCE])


def compare_runs(run_a: Path | str, run_b: Path | str, *, noise: NoiseModel | None = None,
                 metric: str | Sequence[str] = PRIMARY, ignore: Iterable[str] = (),
                 mode: str | None = None) -> RunComparison:
    """Compare run B against run A (the baseline) on every figure both hold, in `mode` (default:
    `RATIO`, or `ABSOLUTE` when a noise model is given: its spread is the run-to-run spread of
    the figures themselves, drift included; see the module doc)."""
    mode = mode or (ABSOLUTE if noise is not None else RATIO)
    ignore = tuple(ignore)
    fa = run_figures(run_a, metric, ignore)
    fb = run_figures(run_b, metric, ignore)
    if not fa or not fb:
        empty = run_a if not fa else run_b
        raise FwlabError(f"{empty} holds no figures for metric {metric!r}",
                         fix="pass runs with finished trials, or another --metric")
    comparisons = compare_figures(fa, fb, noise, mode)
    if not comparisons:
        raise FwlabError(f"the runs have no figure in common ({len(fa)} in A, {len(fb)} in B)",
                         fix="compare runs of the same configurations, or leave differing fields "
                             "out with --ignore (e.g. --ignore layout)")
    drift: list[Comparison] = []
    if mode == RATIO:
        comparisons, drift = split_references(comparisons, fa, fb)
    return RunComparison(
        run_a=str(run_a), run_b=str(run_b),
        suite_a=RunRecord.open(run_a).run.get("suite", {}).get("name"),
        suite_b=RunRecord.open(run_b).run.get("suite", {}).get("name"),
        comparisons=tuple(comparisons),
        only_a=tuple(k for k in fa if k not in fb), only_b=tuple(k for k in fb if k not in fa),
        noise_used=noise is not None, ignore=ignore, mode=mode, drift=tuple(drift))
