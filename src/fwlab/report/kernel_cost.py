"""The in-kernel cost findings of a record, for the overview's headline and the "Time inside the
firewall" section: the cost trials grouped per bed (mode, backend, IP version), as
``fwlab.stats.kernel_cost`` points, and the sentences that state them.

Owns: grouping and wording. The numbers are fwlab.stats.kernel_cost's. Reads the record only.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from fwlab.results.trial import TrialRecord, as_records
from fwlab.stats.kernel_cost import (UNCONTENDED, CostAgainstZero, CostPoint, PerRuleCost, cost_against_zero, figure,
                                     conversion_ns, per_rule_cost, predicted_rate_pps, reference_conversion, referenced_usable,
                                     rest_of_path_ns)

#: the layout whose cost is stated as a slope per rule; the others against 0 rules at their largest count
SLOPE_LAYOUTS = ("linear",)


def cost_groups(trials: list[TrialRecord], source: str | None = None) -> dict[tuple, list[TrialRecord]]:
    """(mode, backend, ip_version) -> its measured cost trials (one bed shares one reference) whose
    figure comes from ``source``: None, the netfilter brackets (a per-packet median); "bpf_stats",
    an XDP backend's program run time (a mean)."""
    out: dict[tuple, list[TrialRecord]] = {}
    for t in as_records(trials):
        if t.kind == "cost" and t.metrics and t.backend != "none" and t.metric("fw_source") == source:
            out.setdefault((t.mode, t.backend, t.ip_version), []).append(t)
    return out


def points(trials: list[TrialRecord]) -> list[CostPoint]:
    return [CostPoint.from_metrics(t.layout, t.rules, t.repetition, t.metrics or {}) for t in trials]


def findings(trials: list[TrialRecord]) -> list[tuple[tuple, CostAgainstZero | None, PerRuleCost | None, str]]:
    """Per group and layout: (group key, cost against 0 at the layout's largest count (non-slope
    layouts), per-rule slope (slope layouts), layout). Referenced figures are converted with the
    bed's one conversion (every cost trial of the bed pooled: they share the reference chain)."""
    out = []
    for key, ts in sorted(cost_groups(trials).items(), key=str):
        pts = points(ts)
        for lay in sorted({p.layout for p in pts}):
            counts = sorted({p.rules for p in pts if p.layout == lay and p.rules > 0})
            if not counts:
                continue
            zl = lay if any(p.layout == lay and p.rules == 0 for p in pts) else None
            if zl is None:  # layouts load the same 0-rule set: use another layout's 0-rule trials
                zl = next((p.layout for p in pts if p.rules == 0), None)
            if lay in SLOPE_LAYOUTS:
                out.append((key, None, per_rule_cost(pts, lay, conversion_points=pts), lay))
            elif zl is not None:
                out.append((key, cost_against_zero(pts, lay, counts[-1], zero_layout=zl, conversion_points=pts), None, lay))
    return out


#: measured rates beside a prediction, in order of preference: (record kind, metric, how it is named)
MEASURED = (("rfc2544", "throughput_pps", "RFC 2544 throughput"), ("stream", "rx_pps", "UDP received rate"))


def measured_rates(trials: list[TrialRecord], key: tuple, layout: str, rules: int) -> tuple[list[float], str]:
    """The measured packet rates of the bed's (mode, backend, IP version) ``layout`` at ``rules``
    [packets/s], one per repetition, and what they are, from unprobed trials: RFC 2544 throughput,
    else the UDP (iperf3 or engine) received rate of stream trials; ([], '') when the run has neither."""
    mode, backend, ipv = key
    for kind, metric, name in MEASURED:
        v = [float(t.metric(metric)) for t in trials if t.kind == kind and t.mode == mode and t.backend == backend
             and t.ip_version == ipv and t.layout == layout and t.rules == rules and not t.error
             and (kind != "stream" or t.traffic in ("udp", "engine")) and t.metric(metric)]
        if v:
            return v, name
    return [], ""


def measured_rate(trials: list[TrialRecord], key: tuple, layout: str, rules: int) -> tuple[float | None, str]:
    """The median of :func:`measured_rates` (None, '' when the run has no measured rate there)."""
    v, name = measured_rates(trials, key, layout, rules)
    return (statistics.median(v), name) if v else (None, "")


@dataclass(frozen=True)
class Prediction:
    """The predicted one-core rate of one layout and rule count, beside the measured one. Each
    figure carries its range: the time inside the firewall from the lowest to the highest end of
    its repetitions' intervals, the rest of the path from the 0-rule rate's fastest to slowest
    repetition, the predictions from those ends, the measured rate from its repetitions."""

    key: tuple  #: (mode, backend, ip_version)
    layout: str
    rules: int
    fw_ns: float  #: time inside the firewall per packet: median over repetitions (referenced where it can be)
    alone_pps: float | None  #: 1e9 / fw_ns: the firewall alone, an upper bound
    rest_ns: float | None  #: the rest of the path from the 0-rule measured rate (None: not known)
    with_rest_pps: float | None  #: 1e9 / (fw_ns + rest_ns)
    measured_pps: float | None
    measured_what: str
    fw_range_ns: tuple[float, float] | None = None  #: lowest to highest end of the repetitions' intervals [ns]
    rest_range_ns: tuple[float, float] | None = None  #: from the 0-rule rate's fastest to slowest repetition [ns]
    measured_range_pps: tuple[float, float] | None = None  #: lowest to highest repetition [packets/s]
    fw_what: str = "raw medians, no reference"  #: how fw_ns was made (``_what``'s words)

    @property
    def alone_range_pps(self) -> tuple[float, float] | None:
        if self.fw_range_ns is None:
            return None
        return _rate_range(self.fw_range_ns, (0.0, 0.0))

    @property
    def with_rest_range_pps(self) -> tuple[float, float] | None:
        if self.fw_range_ns is None or self.rest_range_ns is None:
            return None
        return _rate_range(self.fw_range_ns, self.rest_range_ns)


def _rate_range(fw: tuple[float, float], rest: tuple[float, float]) -> tuple[float, float] | None:
    """(slowest, fastest) rate from the time ranges: 1e9 / (the highest ends), 1e9 / (the lowest ends)."""
    lo, hi = predicted_rate_pps(fw[1], rest[1]), predicted_rate_pps(fw[0], rest[0])
    return (lo, hi) if lo is not None and hi is not None else None


def _span(values) -> tuple[float, float] | None:
    v = [x for x in values if x is not None]
    return (min(v), max(v)) if v else None


def predictions(trials: list[TrialRecord]) -> list[Prediction]:
    """Per bed, layout and rule count with an in-kernel figure: the predicted one-core rate
    (``fwlab.stats.kernel_cost.predicted_rate_pps``) beside the run's measured rate. The rest of
    the path is the 0-rule measured rate's time per packet minus the firewall's at 0 rules (the
    same layout's, else another layout's: they load the same 0-rule set)."""
    trials = as_records(trials)
    rows_by_bed = cost_rows(trials)  # the figures per rule count: the same the section and summary state
    out = []
    for key, ts in sorted(cost_groups(trials).items(), key=str):
        pts = points([t for t in ts if not t.metric("fw_missing")])
        referenced = referenced_usable(pts)
        fw_what = _what(referenced, reference_conversion(pts) if referenced else None)
        rows = rows_by_bed.get(key, (referenced, []))[1]
        med = {(r.layout, r.rules): r.value_ns for r in rows}
        rng = {(r.layout, r.rules): (r.low_ns, r.high_ns) if r.low_ns is not None and r.high_ns is not None else None
               for r in rows}
        for (lay, n), v in sorted(med.items()):
            zl = lay if (lay, 0) in med else next((l for l, r in med if r == 0), None)
            rest = rest_range = None
            if zl is not None:
                m0s, _ = measured_rates(trials, key, zl, 0)
                if m0s:
                    rest = rest_of_path_ns(statistics.median(m0s), med[(zl, 0)])
                    fast, slow = rest_of_path_ns(max(m0s), med[(zl, 0)]), rest_of_path_ns(min(m0s), med[(zl, 0)])
                    rest_range = (fast, slow) if rest is not None and fast is not None and slow is not None else None
            ms, what = measured_rates(trials, key, lay, n)
            out.append(Prediction(key, lay, n, v, predicted_rate_pps(v), rest,
                                  predicted_rate_pps(v, rest) if rest is not None else None,
                                  statistics.median(ms) if ms else None, what,
                                  fw_range_ns=rng.get((lay, n)), rest_range_ns=rest_range,
                                  measured_range_pps=_span(ms), fw_what=fw_what))
    return out


def range_text(r: tuple[float, float] | None) -> str:
    """' [a … b]' (packets/s or ns, no decimals), or '' without a range."""
    return "" if r is None else f" [{r[0]:,.0f} … {r[1]:,.0f}]"


def prediction_sentences(trials: list[TrialRecord]) -> list[str]:
    """One per bed and layout, at its largest rule count: 'Predicted, not measured: one core could
    forward ... at x packets/s (...); measured ...'."""
    out = []
    preds = predictions(trials)
    for key, lay in dict.fromkeys((p.key, p.layout) for p in preds):
        p = max((q for q in preds if q.key == key and q.layout == lay), key=lambda q: q.rules)
        mode, backend, ipv = key
        if p.with_rest_pps is not None:
            pred = (f"{p.with_rest_pps:,.0f} packets/s (1e9 / ({p.fw_ns:,.0f} ns inside the firewall ({p.fw_what}) + {p.rest_ns:,.0f} "
                    f"ns rest of the path, from the 0-rule measured rate)){range_text(p.with_rest_range_pps)}")
        else:
            pred = (f"at most {p.alone_pps:,.0f} packets/s (1e9 / {p.fw_ns:,.0f} ns inside the firewall ({p.fw_what}); the rest of "
                    f"the path is not known in this run){range_text(p.alone_range_pps)}") if p.alone_pps else None
        if pred is None:
            continue
        meas = (f"measured: {p.measured_pps:,.0f} packets/s{range_text(p.measured_range_pps)} ({p.measured_what})"
                if p.measured_pps is not None else "no measured rate at this rule count in this run")
        out.append(f"Predicted one-core rate (IPv{ipv}, {mode}; a prediction from the in-kernel time, not a "
                   f"measurement): {backend} {lay} at {p.rules:,} rules, {pred}; {meas}.")
    return out


def _what(referenced: bool, conversion) -> str:
    """How a figure was made, for its sentence: 'referenced, at the reference's uncontended time'."""
    if not referenced:
        return "raw medians, no reference"
    if conversion is not None and conversion.how == UNCONTENDED:
        return "referenced, at the reference's uncontended time"
    return "referenced, at the reference's median time"


def _n(x: float | None, digits: int = 0) -> str:
    return "?" if x is None else f"{x:,.{digits}f}"


def _reps(values: tuple[float, ...], digits: int, unit: str) -> str:
    return " / ".join(f"{v:,.{digits}f}" for v in values) + f" {unit}"


def repetition_note(az: CostAgainstZero | None = None, slope: PerRuleCost | None = None) -> str:
    """' Per repetition (in run order): 7.60 / 8.00 ns/rule (±2.6 % around their mean; the
    interval ±0.4 %).' or '' with fewer than 2 repetitions."""
    if slope is not None and len(slope.per_repetition_ns) >= 2:
        iv = slope.interval_half_pct
        return (f" Per repetition (in run order): {_reps(slope.per_repetition_ns, 2, 'ns/rule')} "
                f"(±{slope.spread_pct:.1f} % around their mean"
                + (f"; the interval ±{iv:.1f} %" if iv is not None else "") + ").")
    if az is not None and len(az.per_repetition_ns) >= 2:
        sp = az.spread_pct
        return (f" Per repetition (in run order): {_reps(az.per_repetition_ns, 0, 'ns/packet')}"
                + (f" (±{sp:.1f} % around their mean)" if sp is not None else "") + ".")
    return ""


def drift_caveat(found: list) -> str:
    """The line beside the in-kernel sentences: what their intervals cover, and which figure moves
    between runs. Referenced figures converted at the reference's uncontended time divide out the
    host's speed; raw medians (and a median conversion) carry it. With the repetitions' spread
    wider than the slope's interval, that is said with both figures."""
    wide = [(s.spread_pct, s.interval_half_pct) for _, _, s, _ in found
            if s is not None and s.spread_pct is not None and s.interval_half_pct is not None
            and round(s.spread_pct, 1) > round(s.interval_half_pct, 1)]
    here = (f" In this run already the repetitions' slopes spread ±{wide[0][0]:.1f} % around their mean where the "
            f"slope's interval is ±{wide[0][1]:.1f} %." if wide else "")
    convs = [f.conversion for _, az, s, _ in found for f in (az, s) if f is not None]
    steady = bool(convs) and all(c is not None and c.how == UNCONTENDED for c in convs)
    nft = any(key[1] in ("nftables", "iptables-nft") for key, _, _, _ in found)
    why = ("; nft's rule walk has run at two speeds on this machine class, switching from second to second "
           "with the shared host's load" if nft else "")
    moves = ("Raw medians carry the host's speed and move between runs" if steady else
             "These figures carry the host's speed (raw medians or a reference-median conversion) and move between runs")
    return ("Caveat on the in-kernel intervals: they cover the packets of each trial and the repetitions of this "
            f"run, not the drift between runs on this host. {moves} (docs/kernel-cost.md{why}): another run's raw "
            "figure may lie outside them"
            + ("; the referenced figures are converted at the reference's uncontended time, which does not move "
               "with it (unless the host was busy all the run)" if steady else "")
            + ". Compare runs with fwlab compare." + here)


def raw_slope_note(trials_pts: list[CostPoint], slope: PerRuleCost) -> str:
    """' Raw medians (not referenced: they carry the host's speed, which moves between runs):
    8.94 ns/rule [8.86, 9.01].' for a referenced slope, else ''."""
    if not slope.referenced:
        return ""
    raw = per_rule_cost(trials_pts, slope.layout, referenced=False, confidence=slope.confidence)
    if raw is None:
        return ""
    iv = f"[{_n(raw.low_ns, 2)}, {_n(raw.high_ns, 2)}]" if raw.low_ns is not None else "[no interval: 2 points]"
    return (f" Raw medians (not referenced: they carry the host's speed, which moves between runs): "
            f"{raw.per_rule_ns:,.2f} ns/rule {iv}.")


def sentences(trials: list[TrialRecord], predicted: bool = True) -> list[str]:
    """The headline's in-kernel sentences, e.g. 'nftables set at 10,000 entries: +21 ns/packet
    [15, 27] inside the firewall against 0 rules (...): cost', each with its repetitions' spread,
    a referenced slope with its ratio, its conversion and the raw medians' slope beside it, then
    (``predicted``) the predicted one-core rates beside the measured ones (which need the run's
    other trials), and last, when there is any, the caveat on what the intervals cover."""
    out = []
    found = findings(trials)
    groups = {key: points(ts) for key, ts in cost_groups(trials).items()}
    for (mode, backend, ipv), az, slope, lay in found:
        where = f"IPv{ipv}, {mode}"
        if az is not None:
            what = _what(az.referenced, az.conversion)
            iv = f"[{_n(az.low_ns)}, {_n(az.high_ns)}]" if az.low_ns is not None else "[no interval]"
            out.append(f"Time inside the firewall ({where}, in-kernel, {what}): {backend} {lay} at {az.rules:,} "
                       f"entries costs {az.added_ns:+,.0f} ns/packet {iv} against 0 rules ({az.how}; "
                       f"margin ±{az.margin_ns:g} ns): {az.verdict}." + repetition_note(az=az))
        if slope is not None:
            what = _what(slope.referenced, slope.conversion)
            iv = (f"[{_n(slope.low_ns, 2)}, {_n(slope.high_ns, 2)}]" if slope.low_ns is not None
                  else "[no interval: 2 points]")
            conv = ""
            if slope.referenced and slope.conversion is not None and slope.ratio_per_rule is not None:
                conv = (f" = the same-packet ratio firewall / reference growing {1000 * slope.ratio_per_rule:,.4f} per "
                        f"1,000 rules, x {slope.conversion.words}")
            out.append(f"Time inside the firewall ({where}, in-kernel, {what}): {backend} {lay} costs "
                       f"{slope.per_rule_ns:,.2f} ns/rule {iv} per packet ({100 * slope.confidence:.0f} % t interval of "
                       f"the least-squares slope over {slope.n_points} trials at {slope.n_rule_counts} rule counts{conv}; "
                       f"margin ±{slope.margin_ns_per_rule:g} ns/rule): {slope.verdict}." + repetition_note(slope=slope)
                       + raw_slope_note(groups[(mode, backend, ipv)], slope))
    if out:
        out += prediction_sentences(trials) if predicted else []
        out.append(drift_caveat(found))
    return out


@dataclass(frozen=True)
class CostRow:
    """One layout and rule count of a bed's in-kernel figures: the median over repetitions and the
    lowest to highest end of their per-packet 95 % intervals [ns] (referenced where the bed's
    trials all have the reference, else raw)."""

    layout: str
    rules: int
    value_ns: float
    low_ns: float | None
    high_ns: float | None


def cost_rows(trials: list[TrialRecord]) -> dict[tuple, tuple[bool, list[CostRow]]]:
    """(mode, backend, ip_version) -> (referenced, its rows in layout and rule order): what the
    section's plot and the terminal summary state per rule count."""
    out = {}
    for key, ts in sorted(cost_groups(as_records(trials)).items(), key=str):
        pts = points([t for t in ts if not t.metric("fw_missing")])
        referenced = referenced_usable(pts)
        ref_med = conversion_ns(pts) if referenced else None
        rows = []
        for lay, n in sorted({(p.layout, p.rules) for p in pts}):
            figs = [f for p in pts if p.layout == lay and p.rules == n
                    and (f := figure(p, ref_med, referenced)) is not None]
            if figs:
                rows.append(CostRow(lay, n, statistics.median(f.value_ns for f in figs),
                                    min((f.low_ns for f in figs if f.low_ns is not None), default=None),
                                    max((f.high_ns for f in figs if f.high_ns is not None), default=None)))
        if rows:
            out[key] = (referenced, rows)
    return out


def summary_lines(trials: list[TrialRecord]) -> list[str]:
    """The terminal summary's in-kernel block: per bed and layout the time per packet at each rule
    count with its interval, then the headline's sentences (slope, cost against 0 rules, predicted
    rate, caveat); [] for a run without in-kernel figures."""
    rows = cost_rows(trials)
    if not rows:
        return []
    out = ["Time inside the firewall per packet (in-kernel clock, a light fixed load; median over repetitions "
           "[lowest, highest end of their 95 % intervals]):"]
    for (mode, backend, ipv), (referenced, rs) in rows.items():
        for lay in dict.fromkeys(r.layout for r in rs):
            cells = [f"{r.rules}r {_n(r.value_ns)} [{_n(r.low_ns)}, {_n(r.high_ns)}]" for r in rs if r.layout == lay]
            out.append(f"  IPv{ipv} {mode:<8} {backend} {lay:<8} [ns/packet, {'referenced' if referenced else 'raw'}] "
                       + "  ".join(cells))
    out += [f"  {s}" for s in sentences(trials)]
    return out
