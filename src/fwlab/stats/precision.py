"""Adaptive repetitions: the stopping rule of a suite's ``precision`` and the interleaved order.

Owns: the interval a figure's precision is judged by (the two-sided 95 % Student t interval of
the mean over the repetitions that gave a value, n - 1 degrees of freedom, scipy's ``t.ppf``),
the rule deciding whether a figure needs another repetition (``PrecisionRule``), which value of a
trial line is its figure (the curve's primary metric), and the order of the extra repetitions:
round r runs repetition r of every figure still short of the precision, one after another
(round robin over the configurations, never all repetitions of one figure in a row). The state
is derived from the trial lines alone, so a resumed run continues exactly where it stopped.
Never touches the test bed or files: the orchestrator hands in a function that reads its record.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats as _sps

from fwlab.errors import FwlabError
from fwlab.results.curves import Curve, primary_metric
from fwlab.results.identity import TrialIdentity, curve_key, trial_id
from fwlab.results.kinds import CURVE_KINDS
from fwlab.results.precision import FigurePrecisionRecord, PrecisionRecord

CONFIDENCE = 0.95
INTERVAL = "two-sided 95 % Student t interval of the mean (n - 1 degrees of freedom)"
#: the figure of a trial whose kind forms no rule-count curve: the first of these its metrics hold
OTHER_KIND_METRICS = ("transactions_per_s", "conn_rate_cps", "capacity_connections", "throughput_pps",
                      "rx_pps", "throughput_bps", "rtt_p50_ms")


def half_width(values: Sequence[float], confidence: float = CONFIDENCE) -> float | None:
    """Half-width of the Student t interval of the mean (None for fewer than 2 values)."""
    arr = np.asarray(list(values), dtype=np.float64)
    if arr.size < 2:
        return None
    if np.all(arr == arr[0]):
        return 0.0
    t = float(_sps.t.ppf(0.5 + confidence / 2.0, df=arr.size - 1))
    return t * float(np.std(arr, ddof=1)) / math.sqrt(arr.size)


def cv_to_stop_at(n: int, precision: float, confidence: float = CONFIDENCE) -> float:
    """The largest coefficient of variation (sample SD / |mean|) at which ``n`` repetitions give
    a half-width within ``precision`` of the mean: precision x sqrt(n) / t(n - 1). With 3 %:
    0.33 % at 2 repetitions (t = 12.7), 1.2 % at 3, 2.4 % at 5, 4.2 % at 10."""
    if n < 2:
        raise ValueError("an interval needs at least 2 repetitions")
    return precision * math.sqrt(n) / float(_sps.t.ppf(0.5 + confidence / 2.0, df=n - 1))


def repetitions_needed(cv: float, precision: float, confidence: float = CONFIDENCE, cap: int = 100) -> int | None:
    """The fewest repetitions (>= 2) whose interval would be within ``precision`` if the values
    kept the coefficient of variation ``cv``; None when more than ``cap`` would be needed."""
    for n in range(2, cap + 1):
        if cv <= cv_to_stop_at(n, precision, confidence):
            return n
    return None


@dataclass(frozen=True)
class Assessment:
    """One figure's precision over the values it has so far."""

    n: int  #: repetitions that gave a value
    mean: float | None
    half_width: float | None  #: [the figure's unit]; None with fewer than 2 values
    rel_half_width: float | None  #: half_width / |mean| [ratio]; None when undefined
    met: bool  #: rel_half_width <= the precision


@dataclass(frozen=True)
class PrecisionRule:
    """Repeat a figure until its interval's half-width is at most ``precision`` x |mean|, at
    least ``min_repetitions`` and at most ``max_repetitions`` times."""

    precision: float  #: goal: half-width / |mean| [ratio, 0.03 = 3 %]
    min_repetitions: int
    max_repetitions: int
    confidence: float = CONFIDENCE

    def __post_init__(self) -> None:
        if not 0 < self.precision < 1:
            raise FwlabError(f"precision must be within (0, 1), got {self.precision}", fix="e.g. precision = 0.03")
        if not 1 <= self.min_repetitions <= self.max_repetitions:
            raise FwlabError(f"repetitions {self.min_repetitions}..{self.max_repetitions} is not a range",
                             fix="give max_repetitions >= repetitions >= 1")

    @classmethod
    def of_suite(cls, suite) -> "PrecisionRule | None":
        """The rule of a suite (``precision``, ``repetitions`` as the minimum, ``max_repetitions``),
        None when the suite repeats a fixed number of times."""
        if getattr(suite, "precision", None) is None:
            return None
        lo, hi = suite.repetition_range
        return cls(float(suite.precision), lo, hi)

    def assess(self, values: Sequence[float]) -> Assessment:
        vals = [float(v) for v in values]
        if not vals:
            return Assessment(0, None, None, None, False)
        mean = sum(vals) / len(vals)
        hw = half_width(vals, self.confidence)
        if hw is None:
            rel = None
        elif mean == 0:
            rel = 0.0 if hw == 0 else None
        else:
            rel = hw / abs(mean)
        return Assessment(len(vals), mean, hw, rel, rel is not None and rel <= self.precision)

    def needs_more(self, values: Sequence[float], attempted: int) -> bool:
        """Does a figure with ``values`` after ``attempted`` repetitions (failed ones included)
        need another? Below the minimum: yes. At the maximum: no. A figure with no value at all
        (every trial failed, or its kind has no figure) stops at the minimum."""
        if attempted < self.min_repetitions:
            return True
        if attempted >= self.max_repetitions or not values:
            return False
        return not self.assess(values).met


# -- figures of trial lines ----------------------------------------------------------------------
def figure_id(t: Mapping) -> str:
    """A figure: one trial id without its repetition (``ip4udp-64B-nftables-0r-linear-routed``)."""
    tid = t.get("trial_id") or trial_id(t)
    return str(tid).rsplit("-r", 1)[0]


def figure_metric(t: Mapping) -> str | None:
    """The metric a trial line's figure is judged by: its curve's primary metric (packet rate for
    UDP, throughput for TCP, ...); for other kinds the first of ``OTHER_KIND_METRICS`` it holds."""
    m = t.get("metrics") or {}
    if t.get("kind") in CURVE_KINDS:
        name = primary_metric(Curve(curve_key(t)))
        return name if m.get(name) is not None else None
    return next((k for k in OTHER_KIND_METRICS if m.get(k) is not None), None)


def figure_value(t: Mapping) -> float | None:
    """The figure's value in a finished trial line (None: the trial failed or holds no figure)."""
    if t.get("error") or not t.get("metrics"):
        return None
    name = figure_metric(t)
    v = t["metrics"].get(name) if name else None
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None


@dataclass
class FigureTrials:
    """What the record holds of one figure: repetition -> value (None: failed / no figure)."""

    by_rep: dict[int, float | None]
    metric: str | None = None

    def values_below(self, rep: int) -> list[float]:
        return [v for r, v in sorted(self.by_rep.items()) if r < rep and v is not None]

    def ok(self, rep: int) -> bool:
        return self.by_rep.get(rep) is not None


def figures_of(trials: Iterable[Mapping]) -> dict[str, FigureTrials]:
    """The record's trial lines grouped by figure."""
    out: dict[str, FigureTrials] = {}
    for t in trials:
        rep = t.get("repetition")
        if not isinstance(rep, int):
            continue
        f = out.setdefault(figure_id(t), FigureTrials({}))
        v = figure_value(t)
        if v is not None or rep not in f.by_rep:
            f.by_rep[rep] = v
        f.metric = f.metric or figure_metric(t)
    return out


# -- the interleaved order -----------------------------------------------------------------------
def adaptive_order(base: Sequence[TrialIdentity], rule: PrecisionRule, done: set[str],
                   read_trials: Callable[[], list[Mapping]],
                   on_round: Callable[[int, int, int], None] | None = None) -> Iterator[TrialIdentity]:
    """The trials of one test bed in run order: first ``base`` (the planned repetitions 1..min,
    less those in ``done``), then round r = min+1 .. max: repetition r of each figure still short
    of the precision, in the planned order of the figures. Before each round the record is read
    again (``read_trials``): the state comes from what is on disk, so a resume continues the same
    way. A trial of a round already on disk without error is skipped. ``on_round(r, short,
    figures)`` is told each round that runs."""
    for t in base:
        if t.trial_id not in done:
            yield t
    firsts: dict[str, TrialIdentity] = {}
    for t in base:
        firsts.setdefault(figure_id(t.to_dict()), t)
    for r in range(rule.min_repetitions + 1, rule.max_repetitions + 1):
        have = figures_of(read_trials())
        short = [(fid, t) for fid, t in firsts.items()
                 if rule.needs_more(have.get(fid, FigureTrials({})).values_below(r), attempted=r - 1)]
        if not short:
            return
        if on_round is not None:
            on_round(r, len(short), len(firsts))
        for fid, t in short:
            if not have.get(fid, FigureTrials({})).ok(r):
                yield replace(t, repetition=r)


def outcome(trials: Iterable[Mapping], rule: PrecisionRule, figures: Iterable[str] | None = None) -> PrecisionRecord:
    """What the record says per figure: repetitions run, values, mean, achieved half-width and
    whether the precision was met, the maximum was reached without it ("max-reached"), the figure
    has no value ("no-figure") or the run stopped before either ("short": interrupted).
    ``figures``: the planned figures (default: those in ``trials``)."""
    have = figures_of(trials)
    ids = list(dict.fromkeys(figures)) if figures is not None else list(have)
    rows = []
    for fid in ids:
        f = have.get(fid, FigureTrials({}))
        attempted = max(f.by_rep, default=0)
        vals = f.values_below(attempted + 1)
        a = rule.assess(vals)
        if a.met and attempted >= rule.min_repetitions:
            status = "met"
        elif attempted >= rule.min_repetitions and not vals:
            status = "no-figure"
        elif attempted >= rule.max_repetitions:
            status = "max-reached"
        else:
            status = "short"
        rows.append(FigurePrecisionRecord(figure=fid, metric=f.metric, repetitions=attempted, n=a.n, mean=a.mean,
                                          half_width=a.half_width, rel_half_width=a.rel_half_width, status=status))
    return PrecisionRecord(precision=rule.precision, confidence=rule.confidence, interval=INTERVAL,
                           min_repetitions=rule.min_repetitions, max_repetitions=rule.max_repetitions,
                           figures=rows, met=sum(1 for r in rows if r.status == "met"), total=len(rows))
