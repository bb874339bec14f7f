"""The firewall's in-kernel time per packet over a run's cost trials: referenced figures, the cost
of a rule count against 0 rules with its interval and verdict, and the per-rule slope.

Owns: :class:`CostPoint` (one cost trial's figures, from its plain metrics), the *referenced*
time per packet (each trial's median per-packet ratio firewall / reference, converted to ns with
one conversion per group of trials, :func:`reference_conversion`), and two findings:

- The conversion. Whatever slowed a moment slowed both brackets of a packet, so the ratio carries
  the firewall's cost; the conversion turns it back into ns. On a shared host the reference's own
  time moves between runs with what else runs on the machine (on the 2-CPU VM this was built on,
  nft's rule walk ran at ~5.8 µs per 1,000 rules when nothing contended and 7-10 µs when the host
  was busy, switching from second to second whatever fwlab did: docs/measurements.md), so a
  conversion at the reference's *median* moves with it. The conversion used is the reference's
  **uncontended** time: the :data:`UNCONTENDED_PERCENTILE` th percentile of all its timed packets
  over the group's trials (contention only ever adds time, so the fastest packets are the ones
  nothing slowed; the minimum estimator of benchmarking on noisy machines, Chen & Revels 2016).
  Records without the reference's histogram (older ones) fall back to the median of the trials'
  reference medians, and say so (:attr:`Conversion.how`).
- :func:`cost_against_zero`: the time a rule count adds per packet against the same
  configuration's 0-rule trial, per repetition (both trials of one repetition ran close in
  time). Its interval: each trial's distribution-free 95 % interval of its median over the
  trial's packets (the referenced figure: the per-packet ratio's interval times the
  conversion); per repetition the difference's interval ``[low_N - high_0, high_N -
  low_0]`` (covers with >= 90 %: both intervals hold with >= 1 - 2 x 5 %), and over the
  repetitions their envelope, lowest low to highest high. The per-packet intervals alone do not
  carry the drift between repetitions; the envelope carries what the repetitions show of it
  (with 2 repetitions that is little: an order-statistic interval of 2 values covers the median
  of repetitions only 50 %, ``fwlab.stats.median_interval``). The verdict needs the whole
  interval on one side of a margin (``margin_ns``): "cost" (low > margin), "no cost" (inside
  ±margin), else "undecided".
- :func:`per_rule_cost`: the least-squares slope of the referenced time over rule counts
  (``fwlab.stats.fit.fit_per_packet_cost``, scipy's t interval on n - 2 degrees of freedom; each
  repetition is one point), with the same three verdicts on ``margin_ns_per_rule``; with
  ``referenced=False`` the same slope of the raw medians (which carry the host's speed).

Pure: plain numbers in, frozen dataclasses out. Never reads records or files.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from fwlab.errors import FwlabError
from fwlab.stats.fit import fit_per_packet_cost
from fwlab.stats.latency import merge as merge_histograms

COST, NO_COST, UNDECIDED = "cost", "no cost", "undecided"
#: a rule set's added time per packet within this of 0 is "no cost" [ns/packet]: issue 30's
#: precision goal for a class's cost (±20 ns), about a tenth of an empty forward path here
MARGIN_NS = 20.0
#: a per-rule slope within this of 0 is "no cost" [ns/rule]
MARGIN_NS_PER_RULE = 0.1
#: the percentile of the reference chain's pooled per-packet times taken as its uncontended time
UNCONTENDED_PERCENTILE = 1.0
#: how a conversion was made (:attr:`Conversion.how`)
UNCONTENDED, MEDIAN = "uncontended", "median"


@dataclass(frozen=True)
class CostPoint:
    """One cost trial's in-kernel figures [ns] (None: not measured)."""

    layout: str
    rules: int
    repetition: int
    p50_ns: float | None
    p50_low_ns: float | None = None
    p50_high_ns: float | None = None
    ref_ratio_p50: float | None = None
    ref_ratio_low: float | None = None
    ref_ratio_high: float | None = None
    ref_p50_ns: float | None = None
    floor_p50_ns: float | None = None
    ref_hdr_b64: str | None = None  #: the reference chain's gaps in the trial (HdrHistogram V2 text, ns)

    @classmethod
    def from_metrics(cls, layout: str, rules: int, repetition: int, m: Mapping[str, Any]) -> "CostPoint":
        g = m.get
        return cls(layout, int(rules), int(repetition), g("fw_p50_ns"), g("fw_p50_low_ns"), g("fw_p50_high_ns"),
                   g("fw_ref_ratio_p50"), g("fw_ref_ratio_low"), g("fw_ref_ratio_high"), g("fw_ref_p50_ns"),
                   g("fw_floor_p50_ns"), g("fw_ref_hdr_b64"))


@dataclass(frozen=True)
class Figure:
    """One trial's time per packet with its per-packet 95 % interval [ns]."""

    value_ns: float
    low_ns: float | None
    high_ns: float | None


def reference_median_ns(points: Iterable[CostPoint]) -> float | None:
    """The reference chain's median over the trials that have one [ns]."""
    refs = [p.ref_p50_ns for p in points if p.ref_p50_ns and p.ref_ratio_p50]
    return statistics.median(refs) if refs else None


@dataclass(frozen=True)
class Conversion:
    """The reference chain's time per packet that referenced ratios are converted to ns with."""

    ns: float  #: the reference's time per packet [ns]
    how: str  #: UNCONTENDED (a low percentile of its pooled packets) or MEDIAN (median of the trials' medians)
    packets: int  #: reference packets it rests on (UNCONTENDED), or trials (MEDIAN)
    percentile: float | None = None  #: the percentile taken (UNCONTENDED)

    @property
    def words(self) -> str:
        """'5,731 ns per reference packet, the 1st percentile of its 412,000 timed packets in these
        trials (its time when nothing contends)' or the median fallback's wording."""
        if self.how == UNCONTENDED:
            return (f"{self.ns:,.0f} ns per reference packet, the {_ordinal(self.percentile)} percentile of its "
                    f"{self.packets:,} timed packets in these trials (its time when nothing else contends)")
        return (f"{self.ns:,.0f} ns per reference packet, the median of {self.packets} trials' reference medians "
                "(the record has no reference histograms: this conversion moves with the host's speed)")

    def to_dict(self) -> dict:
        return asdict(self)


def _ordinal(q: float | None) -> str:
    if q is None:
        return "?"
    n = f"{q:g}"
    last = {"1": "st", "2": "nd", "3": "rd"}.get(n[-1], "th") if not n.endswith(("11", "12", "13")) else "th"
    return n + last


def reference_conversion(points: Iterable[CostPoint], percentile: float = UNCONTENDED_PERCENTILE) -> Conversion | None:
    """The conversion for the trials with a reference: the ``percentile`` th percentile of the
    reference's per-packet times pooled over them when every such trial kept its reference
    histogram, else the median of their reference medians; None without a reference."""
    pts = [p for p in points if p.ref_p50_ns and p.ref_ratio_p50]
    if not pts:
        return None
    if all(p.ref_hdr_b64 for p in pts):
        h = merge_histograms(p.ref_hdr_b64 for p in pts)
        if h is not None and h.get_total_count() > 0:
            return Conversion(float(h.get_value_at_percentile(percentile)), UNCONTENDED, int(h.get_total_count()),
                              percentile)
    return Conversion(statistics.median(p.ref_p50_ns for p in pts), MEDIAN, len(pts))


def conversion_ns(points: Iterable[CostPoint]) -> float | None:
    """:func:`reference_conversion`'s value [ns] (None without a reference)."""
    c = reference_conversion(points)
    return c.ns if c is not None else None


def figure(p: CostPoint, ref_median_ns: float | None, referenced: bool) -> Figure | None:
    """``p``'s referenced figure (ratio x ``ref_median_ns``) or raw median, or None."""
    if referenced:
        if not ref_median_ns or p.ref_ratio_p50 is None:
            return None
        lo = p.ref_ratio_low * ref_median_ns if p.ref_ratio_low is not None else None
        hi = p.ref_ratio_high * ref_median_ns if p.ref_ratio_high is not None else None
        return Figure(p.ref_ratio_p50 * ref_median_ns, lo, hi)
    if p.p50_ns is None:
        return None
    return Figure(p.p50_ns, p.p50_low_ns, p.p50_high_ns)


def referenced_usable(points: list[CostPoint]) -> bool:
    """Every point with a raw figure has a reference ratio too (else the raw figures are used)."""
    have = [p for p in points if p.p50_ns is not None]
    return bool(have) and all(p.ref_ratio_p50 is not None and p.ref_p50_ns for p in have)


def verdict(low: float | None, high: float | None, margin: float) -> str:
    if low is None or high is None:
        return UNDECIDED
    if low > margin:
        return COST
    if -margin <= low and high <= margin:
        return NO_COST
    return UNDECIDED


@dataclass(frozen=True)
class CostAgainstZero:
    """The time ``rules`` add per packet against 0 rules in one layout [ns/packet]."""

    layout: str
    rules: int
    added_ns: float  #: median over repetitions of (figure at rules - figure at 0)
    low_ns: float | None  #: envelope of the repetitions' difference intervals (None: a trial had no interval)
    high_ns: float | None
    repetitions: int  #: repetitions with both trials measured
    referenced: bool  #: the figures are referenced (ratio x reference median), else raw medians
    verdict: str  #: cost, no cost or undecided (on margin_ns)
    margin_ns: float
    how: str  #: the interval in words
    base_rules: int = 0  #: the rule count compared against (0 unless given)
    per_repetition_ns: tuple[float, ...] = ()  #: each repetition's difference, in repetition order
    conversion: Conversion | None = None  #: how the referenced ratios became ns (None: raw)

    @property
    def spread_pct(self) -> float | None:
        """Half the range of the repetitions' differences as % of their mean magnitude (None: fewer than 2)."""
        return half_range_pct(self.per_repetition_ns)

    def to_dict(self) -> dict:
        return asdict(self)


def cost_against_zero(points: Iterable[CostPoint], layout: str, rules: int, *, zero_layout: str | None = None,
                      margin_ns: float = MARGIN_NS, base_rules: int = 0,
                      conversion_points: Iterable[CostPoint] | None = None) -> CostAgainstZero | None:
    """``layout`` at ``rules`` against 0 rules (``zero_layout``: the layout whose 0-rule trials are
    the reference, default the same), repetition by repetition; None without a repetition that
    measured both. ``base_rules``: compare against that rule count instead of 0 (e.g. 10,000
    against 1,000 rules); the result's ``base_rules`` says which. ``conversion_points``: the
    trials the conversion pools (default: the two compared groups')."""
    pts = list(points)
    if rules <= base_rules:
        raise FwlabError(f"a cost against {base_rules} rules needs rules > {base_rules}, not {rules}",
                         fix="give the larger rule count")
    zl = zero_layout or layout
    use = [p for p in pts if (p.layout == layout and p.rules == rules) or (p.layout == zl and p.rules == base_rules)]
    referenced = referenced_usable(use)
    conv = reference_conversion(use if conversion_points is None else conversion_points) if referenced else None
    ref_med = conv.ns if conv is not None else None
    if referenced and conv is None:
        return None
    top = {p.repetition: figure(p, ref_med, referenced) for p in use if p.layout == layout and p.rules == rules}
    zero = {p.repetition: figure(p, ref_med, referenced) for p in use if p.layout == zl and p.rules == base_rules}
    reps = sorted(r for r in top if top[r] is not None and zero.get(r) is not None)
    if not reps:
        return None
    diffs = [top[r].value_ns - zero[r].value_ns for r in reps]
    lows, highs = [], []
    for r in reps:
        t, z = top[r], zero[r]
        if None in (t.low_ns, t.high_ns, z.low_ns, z.high_ns):
            lows = highs = []
            break
        lows.append(t.low_ns - z.high_ns)
        highs.append(t.high_ns - z.low_ns)
    low, high = (min(lows), max(highs)) if lows else (None, None)
    n = len(reps)
    how = ("per-packet 95 % intervals of each trial's median (difference >= 90 %), "
           + (f"spanning its {n} repetitions" if n > 1 else "1 repetition: no spread between repetitions in it"))
    return CostAgainstZero(layout, rules, statistics.median(diffs), low, high, n, referenced,
                           verdict(low, high, margin_ns), margin_ns, how, base_rules, tuple(diffs), conv)


@dataclass(frozen=True)
class PerRuleCost:
    """The least-squares slope of time per packet over rule counts in one layout [ns/rule]."""

    layout: str
    per_rule_ns: float
    low_ns: float | None  #: the slope's t interval (None with 2 points)
    high_ns: float | None
    base_ns: float
    r_squared: float | None
    n_points: int
    n_rule_counts: int
    referenced: bool
    verdict: str
    margin_ns_per_rule: float
    confidence: float
    #: each repetition's own slope over its rule counts (repetitions with at least 2 counts), in order
    per_repetition_ns: tuple[float, ...] = ()
    conversion: Conversion | None = None  #: how the referenced ratios became ns (None: raw medians)

    @property
    def ratio_per_rule(self) -> float | None:
        """The slope of the same-packet ratio firewall / reference per rule (referenced only): the
        figure the conversion turns into ns, and the one that does not carry the host's speed."""
        if not self.referenced or self.conversion is None or not self.conversion.ns:
            return None
        return self.per_rule_ns / self.conversion.ns

    @property
    def spread_pct(self) -> float | None:
        """Half the range of the repetitions' slopes as % of their mean (None: fewer than 2)."""
        return half_range_pct(self.per_repetition_ns)

    @property
    def interval_half_pct(self) -> float | None:
        """Half the slope's interval as % of the slope (None: no interval)."""
        if self.low_ns is None or self.high_ns is None or not self.per_rule_ns:
            return None
        return 100.0 * (self.high_ns - self.low_ns) / 2 / abs(self.per_rule_ns)

    def to_dict(self) -> dict:
        return asdict(self)


def per_rule_cost(points: Iterable[CostPoint], layout: str, *, margin_ns_per_rule: float = MARGIN_NS_PER_RULE,
                  confidence: float = 0.95, referenced: bool | None = None,
                  conversion_points: Iterable[CostPoint] | None = None) -> PerRuleCost | None:
    """The slope over ``layout``'s trials (every repetition one point); None with fewer than two
    rule counts measured. ``referenced``: None takes the referenced figures where every trial
    has them, False the raw medians, True the referenced figures (None when some trial has
    none). ``conversion_points``: the trials the conversion pools (default: the layout's; the
    report gives the bed's, which share the reference)."""
    pts = [p for p in points if p.layout == layout]
    usable = referenced_usable(pts)
    if referenced and not usable:
        return None
    referenced = usable if referenced is None else bool(referenced)
    conv = reference_conversion(pts if conversion_points is None else conversion_points) if referenced else None
    if referenced and conv is None:
        return None
    ref_med = conv.ns if conv is not None else None
    xy = [(p.rules, f.value_ns) for p in pts if (f := figure(p, ref_med, referenced)) is not None and f.value_ns > 0]
    if len({x for x, _ in xy}) < 2:
        return None
    fit = fit_per_packet_cost([(x, 1e9 / y) for x, y in xy], confidence=confidence)  # the fit is in ns
    lo, hi = fit.per_rule_ns_ci if fit.per_rule_ns_ci else (None, None)
    per_rep = []
    for rep in sorted({p.repetition for p in pts}):
        rxy = [(p.rules, f.value_ns) for p in pts if p.repetition == rep
               and (f := figure(p, ref_med, referenced)) is not None and f.value_ns > 0]
        if len({x for x, _ in rxy}) >= 2:
            per_rep.append(fit_per_packet_cost([(x, 1e9 / y) for x, y in rxy], confidence=confidence).per_rule_ns)
    return PerRuleCost(layout, fit.per_rule_ns, lo, hi, fit.base_ns, fit.r_squared, fit.n_points, fit.n_rule_counts,
                       referenced, verdict(lo, hi, margin_ns_per_rule), margin_ns_per_rule, confidence, tuple(per_rep),
                       conv)


def half_range_pct(values: Iterable[float]) -> float | None:
    """(max - min) / 2 as % of the mean magnitude: '±x % around their mean' (None: fewer than 2
    values or a zero mean)."""
    v = list(values)
    if len(v) < 2:
        return None
    m = abs(statistics.fmean(v))
    return None if m == 0 else 100.0 * (max(v) - min(v)) / 2 / m


NS_PER_S = 1e9


def rest_of_path_ns(measured_zero_pps: float | None, fw_zero_ns: float | None) -> float | None:
    """The per-packet time of everything but the firewall [ns], from the rate measured at 0 rules
    taken as one core's (1e9 / rate) minus the firewall's own time at 0 rules; None when either is
    missing or the difference is not positive."""
    if not measured_zero_pps or measured_zero_pps <= 0 or fw_zero_ns is None:
        return None
    rest = NS_PER_S / measured_zero_pps - fw_zero_ns
    return rest if rest > 0 else None


def predicted_rate_pps(fw_ns: float | None, rest_ns: float | None = None) -> float | None:
    """The packet rate one core could forward [packets/s]: 1e9 / (time inside the firewall + the
    rest of the path, when known); None without a positive time. A prediction, not a measurement."""
    if fw_ns is None:
        return None
    t = fw_ns + (rest_ns or 0.0)
    return NS_PER_S / t if t > 0 else None
