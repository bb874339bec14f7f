"""Trends over many runs of one suite: each figure as a series, grouped with CSIT's `jumpavg`.

Owns: collecting run records (run directories, or a results directory holding them) of one suite
in time order, the per-run figure series, the grouping of each series into stretches of one
level (`jumpavg.classify`, the minimum-description-length grouping FD.io CSIT's trending uses)
and the verdict on each boundary between groups (a *change*: regression or progression, its
size with an interval, and its significance by `fwlab.stats.compare_figure`'s Welch t-test, alpha 0.05).
Rendering the page is `fwlab.analysis.trend_page`. Never touches: the test bed or traffic.

Order: runs are sorted by the record's own start time (``run.json`` ``started_utc``), then by its
identity (run id, host, fwlab revision) - never by directory name, which differs between fwlab
versions and can be anything after a copy.

One sample per run and figure: the median over the run's repetitions. The series of per-run
medians is what jumpavg groups, with the figure's resolution (jumpavg's ``unit``) set to the
pooled standard deviation of its repetitions (`resolution`). Both choices were checked on 60
seeded synthetic 8-run series of `quick` (tests/unit/synthetic_runs.py, run-to-run noise 1.5 %,
repetition noise 0.8 %, a 12-15 % drop halfway on 4 of 16 figures): 1 of 240 drops missed, 0 of
720 flat series split. Handing jumpavg each run's repetitions instead splits flat series (the
repetitions' spread understates run-to-run drift: 3-14 of 720), and its default resolution (12
significant bits) misses drops (15 of 240). A change between group A (before) and B
(after) is judged from the per-run medians of both groups, each run an independent sample:

- ``significant``: Welch's t-test on the two groups' per-run medians gives p < 0.05 (two-sided,
  Welch-Satterthwaite degrees of freedom; `compare_figure`);
- ``not significant``: jumpavg split the series but the t-test does not confirm it;
- ``inconclusive``: a group holds fewer than `MIN_GROUP_RUNS` runs (one run cannot tell a
  level change from one bad run; re-run to confirm) or no spread is known.

Direction: for every metric but ``loss_ratio`` higher is better, so a lower group average is a
regression; for ``loss_ratio`` a higher one is.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import jumpavg

from fwlab.analysis.figures import PRIMARY, trial_figures
from fwlab.errors import FwlabError, RecordError
from fwlab.results.record import RUN_FILE, RunRecord
from fwlab.stats.compare import INSUFFICIENT_DATA, SIGNIFICANT, compare_figure

__all__ = ["MIN_GROUP_RUNS", "RunInfo", "Change", "FigureTrend", "Trend", "find_runs", "trend",
           "trend_of_records", "classify_series", "resolution"]

MIN_GROUP_RUNS = 2
"""Runs a group needs on each side of a change for its significance to be decided [count]."""
LOWER_IS_BETTER = frozenset({"loss_ratio"})

REGRESSION = "regression"
PROGRESSION = "progression"
NOT_SIGNIFICANT = "not significant"
INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class RunInfo:
    """One run of the trend, identified by its record, not its directory name."""

    index: int
    """Position in time order, from 0."""
    path: str
    started_utc: str
    identity: str
    """run id (or the first test bed's id), host name and fwlab revision."""
    fwlab_version: str | None
    kernel: str | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Change:
    """A boundary between two jumpavg groups of one figure's series."""

    figure: str
    run_index: int
    """First run of the new group (index into `Trend.runs`)."""
    direction: str
    """'regression' or 'progression' (by the metric's better direction)."""
    verdict: str
    """'significant', 'not significant' or 'inconclusive'."""
    reason: str
    """Why the verdict is what it is, one line."""
    before_avg: float
    after_avg: float
    before_runs: int
    after_runs: int
    change_pct: float
    """100 * (after - before) / |before| [%]."""
    change_ci95_pct: tuple[float, float] | None
    """95 % interval of change_pct: +- the t quantile (Welch-Satterthwaite df) x the standard error of
    the difference, as % of the before average [%]."""
    threshold_pct: float | None
    """Size a change must exceed to be significant (Welch's t-test, alpha 0.05) [%]."""
    p_value: float | None
    """Welch t-test over the per-run medians of both groups (second opinion)."""
    bits_saved: float
    """jumpavg's evidence for the split: description length of the two groups as one minus as
    two [bits]; larger is stronger."""

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["change_ci95_pct"] = list(self.change_ci95_pct) if self.change_ci95_pct else None
        return d


@dataclass
class FigureTrend:
    """One figure (configuration + metric) over the runs."""

    figure: str
    metric: str
    run_values: list[list[float]]
    """Per run (time order), the repetitions' values [metric's stored unit]; empty when missing."""
    medians: list[float | None]
    """Per run, the median of its repetitions; None where the run has no value."""
    groups: list[dict] = field(default_factory=list)
    """jumpavg groups: first/last run index, runs, avg, stdev."""
    changes: list[Change] = field(default_factory=list)

    @property
    def trend_avg(self) -> float | None:
        """The last jumpavg group's average: the figure's value now [metric's stored unit]."""
        return self.groups[-1]["avg"] if self.groups else None

    @property
    def long_term_change_pct(self) -> float | None:
        """The last group's average against the first group's, 100 * (last - first) / |first| [%];
        None with one group (no change) or a first average of 0."""
        if len(self.groups) < 2 or not self.groups[0]["avg"]:
            return None
        first, last = self.groups[0]["avg"], self.groups[-1]["avg"]
        return 100.0 * (last - first) / abs(first)

    def count(self, direction: str) -> int:
        """Significant changes in ``direction`` (REGRESSION or PROGRESSION)."""
        return sum(c.direction == direction and c.verdict == "significant" for c in self.changes)

    @property
    def status(self) -> str:
        """'regression' or 'progression' when the last change is a significant one, else 'normal'
        (CSIT's trending dashboard: what the figure is doing now)."""
        last = self.changes[-1] if self.changes else None
        return last.direction if last is not None and last.verdict == "significant" else "normal"

    def to_dict(self) -> dict[str, Any]:
        return {"figure": self.figure, "metric": self.metric, "run_values": self.run_values,
                "medians": self.medians, "groups": self.groups,
                "changes": [c.to_dict() for c in self.changes], "trend_avg": self.trend_avg,
                "long_term_change_pct": self.long_term_change_pct, "status": self.status,
                "regressions": self.count(REGRESSION), "progressions": self.count(PROGRESSION)}


@dataclass
class Trend:
    suite: str
    runs: list[RunInfo]
    figures: list[FigureTrend]

    @property
    def changes(self) -> list[Change]:
        return [c for f in self.figures for c in f.changes]

    def to_dict(self) -> dict[str, Any]:
        return {"suite": self.suite, "runs": [r.to_dict() for r in self.runs],
                "figures": [f.to_dict() for f in self.figures],
                "changes": [c.to_dict() for c in self.changes]}


# --- runs ------------------------------------------------------------------------------------------

def find_runs(paths: Iterable[Path | str]) -> list[Path]:
    """Run directories among `paths`: each is a run directory (has run.json) or a directory whose
    immediate subdirectories are run directories."""
    from fwlab.files import kind

    out: list[Path] = []
    for p in map(Path, paths):
        if kind(p / RUN_FILE) in ("file", "denied"):  # RunRecord.open names a permission problem
            out.append(p)
        elif kind(p) == "denied":
            raise RecordError(f"{p} cannot be read by this user: permission denied",
                              fix="read it as the user that wrote it, or give this user read access")
        elif kind(p) == "dir":
            try:
                found = sorted(d for d in p.iterdir() if kind(d / RUN_FILE) == "file")
            except OSError as exc:
                raise RecordError(f"{p} cannot be listed: {exc.strerror or exc}",
                                  fix="check its permissions") from None
            if not found:
                raise RecordError(f"{p} holds no fwlab run record", fix="pass run directories or a results directory")
            out.extend(found)
        else:
            raise RecordError(f"{p} is not a directory", fix="pass run directories or a results directory")
    return list(dict.fromkeys(out))


def _started(run: dict, path: Path) -> datetime:
    text = run.get("started_utc")
    for fmt in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.strptime(str(text), fmt)
        except ValueError:
            continue
    raise RecordError(f"{path / RUN_FILE} has no readable started_utc ({text!r})",
                      fix="restore run.json from the run's backup")


def _identity(run: dict) -> str:
    rid = run.get("run_id")
    if not rid:
        beds = run.get("beds") or []
        rid = ((beds[0] or {}).get("topology") or {}).get("run_id") if beds else None
    host = run.get("host") or {}
    return " ".join(str(x) for x in (rid, host.get("hostname"), host.get("fwlab_git_revision")) if x)


# --- grouping --------------------------------------------------------------------------------------

FALLBACK_SBPS = 7.0
"""Significant bits per sample when no repetition spread is known: resolution = max / (2^8 - 1)."""


def resolution(run_values: Sequence[Sequence[float]]) -> float | None:
    """A figure's resolution: the pooled standard deviation of its runs' repetitions (None when
    no run has two repetitions or they never differ)."""
    variances = [statistics.variance(v) for v in run_values if len(v) > 1]
    sd = math.sqrt(statistics.fmean(variances)) if variances else 0.0
    return sd or None


def classify_series(values: Sequence[float], unit: float | None = None) -> list[tuple[int, int]]:
    """jumpavg groups of a series of per-run figures, as (first, last) positions, inclusive.
    `unit`: the figures' resolution (`resolution`); None: `FALLBACK_SBPS` significant bits."""
    if not values:
        return []
    glist = jumpavg.classify([float(v) for v in values], unit=unit, sbps=None if unit else FALLBACK_SBPS)
    out, start = [], 0
    for g in glist:
        out.append((start, start + len(g) - 1))
        start += len(g)
    return out


def _unit(unit: float | None, max_value: float) -> float:
    return unit or max_value / (2.0 ** (FALLBACK_SBPS + 1.0) - 1.0)


def _bits(groups: list[list[float]], max_value: float, unit: float) -> float:
    gl = jumpavg.BitCountingGroupList(max_value=max_value, unit=unit)
    for g in groups:
        gl = gl.append_group_of_runs(list(g))
    return float(gl.bits)


def _judge(figure: str, metric: str, a: list[float], b: list[float], at: int, max_value: float,
           unit: float) -> Change:
    mean_a, mean_b = statistics.fmean(a), statistics.fmean(b)
    worse = (mean_b > mean_a) if metric in LOWER_IS_BETTER else (mean_b < mean_a)
    direction = REGRESSION if worse else PROGRESSION
    change_pct = 100.0 * (mean_b - mean_a) / abs(mean_a) if mean_a else math.inf
    cmp = compare_figure(figure, a, b, runs_a=1, runs_b=1)
    ci = None
    if cmp.threshold_pct is not None:
        ci = (change_pct - cmp.threshold_pct, change_pct + cmp.threshold_pct)
    if len(a) < MIN_GROUP_RUNS or len(b) < MIN_GROUP_RUNS:
        verdict = INCONCLUSIVE
        side = "before" if len(a) < MIN_GROUP_RUNS else "after"
        reason = (f"only {min(len(a), len(b))} run {side} the change: one run cannot tell a level change "
                  f"from one bad run; re-run to confirm")
    elif cmp.verdict == INSUFFICIENT_DATA:
        verdict, reason = INCONCLUSIVE, "no run-to-run spread known (identical runs)"
    elif cmp.verdict == SIGNIFICANT:
        verdict = SIGNIFICANT
        reason = (f"|change| {abs(change_pct):.1f}% > {_smallest(cmp)} (p = {cmp.p_value:.2g} < 0.05)")
    else:
        verdict = NOT_SIGNIFICANT
        reason = (f"jumpavg splits here but |change| {abs(change_pct):.1f}% <= {_smallest(cmp)} "
                  f"(p = {cmp.p_value:.2g})")
    saved = _bits([a + b], max_value, unit) - _bits([a, b], max_value, unit)
    return Change(figure=figure, run_index=at, direction=direction, verdict=verdict, reason=reason,
                  before_avg=mean_a, after_avg=mean_b, before_runs=len(a), after_runs=len(b),
                  change_pct=change_pct, change_ci95_pct=ci, threshold_pct=cmp.threshold_pct,
                  p_value=cmp.p_value, bits_saved=saved)


def _smallest(cmp) -> str:
    """'the 3.2% Welch's t-test calls significant' (or the test's name when it has no threshold)."""
    if cmp.threshold_pct is None:
        return f"what the {cmp.test or 'test'} calls significant"
    return f"the {cmp.threshold_pct:.1f}% {cmp.test or 'the test'} calls significant"


def figure_trend(figure: str, metric: str, run_values: list[list[float]]) -> FigureTrend:
    """Group one figure's series (per run: its repetitions' values) and judge each boundary."""
    meds = [float(statistics.median(v)) if v else None for v in run_values]
    present = [i for i, m in enumerate(meds) if m is not None]
    series = [meds[i] for i in present]
    ft = FigureTrend(figure=figure, metric=metric, run_values=[list(v) for v in run_values], medians=meds)
    if not series:
        return ft
    max_value = max(series) or 1.0
    unit = resolution(run_values)
    spans = classify_series(series, unit)
    for lo, hi in spans:
        vals = series[lo:hi + 1]
        ft.groups.append({"first_run": present[lo], "last_run": present[hi], "runs": len(vals),
                          "avg": statistics.fmean(vals),
                          "stdev": statistics.stdev(vals) if len(vals) > 1 else 0.0})
    for (alo, ahi), (blo, bhi) in zip(spans, spans[1:]):
        ft.changes.append(_judge(figure, metric, series[alo:ahi + 1], series[blo:bhi + 1], present[blo],
                                 max_value, _unit(unit, max_value)))
    return ft


def trend_of_records(records: Sequence[RunRecord], metric: str | Sequence[str] = PRIMARY,
                     suite: str | None = None) -> Trend:
    """The trend of `records` (any order): those of one suite, sorted by start time and identity."""
    by_suite: dict[str, list[RunRecord]] = {}
    for rec in records:
        name = str((rec.run.get("suite") or {}).get("name"))
        by_suite.setdefault(name, []).append(rec)
    if suite is not None:
        if suite not in by_suite:
            raise FwlabError(f"no run of suite {suite!r} among the runs given ({', '.join(sorted(by_suite))})",
                             fix="pass runs of that suite or pick one of those names")
        chosen = suite
    elif len(by_suite) == 1:
        chosen = next(iter(by_suite))
    else:
        raise FwlabError(f"the runs are of {len(by_suite)} suites ({', '.join(sorted(by_suite))})",
                         fix="pick one with --suite NAME")
    recs = by_suite[chosen]
    if len(recs) < 2:
        raise FwlabError(f"a trend needs at least 2 runs of suite {chosen!r}, got {len(recs)}",
                         fix="pass more run directories or a results directory")
    keyed = sorted(((_started(r.run, r.path), _identity(r.run), str(r.path)), r) for r in recs)
    runs: list[RunInfo] = []
    per_run: list[dict] = []
    for i, ((when, ident, _), rec) in enumerate(keyed):
        host = rec.run.get("host") or {}
        runs.append(RunInfo(index=i, path=str(rec.path), started_utc=str(rec.run.get("started_utc")),
                            identity=ident, fwlab_version=host.get("fwlab_version"), kernel=host.get("kernel")))
        per_run.append(trial_figures(rec.trials(), metric))
    keys = sorted({k for figs in per_run for k in figs})
    figures = []
    for k in keys:
        fig = next(figs[k] for figs in per_run if k in figs)
        figures.append(figure_trend(k, fig.metric, [list(figs[k].values) if k in figs else [] for figs in per_run]))
    return Trend(suite=chosen, runs=runs, figures=figures)


def trend(paths: Iterable[Path | str], metric: str | Sequence[str] = PRIMARY, suite: str | None = None) -> Trend:
    """The trend of the run directories (or results directories) in `paths`."""
    return trend_of_records([RunRecord.open(p) for p in find_runs(paths)], metric, suite)
