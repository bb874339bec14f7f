"""Report section for kind ``cost`` ("Time inside the firewall", id ``kernel-cost``): the
firewall's own time per packet, timed in the DUT's kernel (docs/kernel-cost.md), against rules
with intervals, per hook and chain, the probe floor and the same-packet reference ratio, and the
findings of the overview's headline (cost against 0 rules, per-rule slope) with their verdicts."""

from __future__ import annotations

import statistics

from fwlab.report import kernel_cost
from fwlab.report.markup import esc, table
from fwlab.report.plots import cost_vs_rules
from fwlab.report.sections import Section, register
from fwlab.report.timeseries import plot_div
from fwlab.results.trial import TrialRecord, as_records
from fwlab.stats.kernel_cost import reference_conversion, reference_median_ns, referenced_usable


def _f(v, digits: int = 0) -> str:
    return "–" if v is None else f"{v:,.{digits}f}"


def _med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def render(run: dict, trials: list[TrialRecord]) -> str | None:
    trials = as_records(trials)
    if not trials:
        return None
    parts = ["<h2 id='kernel-cost'>Time inside the firewall</h2>",
             "<p class='muted'>The firewall's own time per packet, timed in the DUT's kernel by BPF netfilter "
             "brackets just before and after its base chains (tool kernel-cost, a light fixed load: not a capacity "
             "figure). p50 is a trial's median over its packets, with the distribution-free 95 % interval of that "
             "median; the floor is the probe's own gap with nothing inside; the reference ratio is the median over "
             "packets of firewall gap / reference-chain gap on the same packet, and the referenced time that ratio "
             "times the reference's uncontended time (the 1st percentile of its packets over the bed's trials): it "
             "divides out what slowed a moment, and converts at a speed that does not move between runs. Medians "
             "over repetitions. See docs/kernel-cost.md.</p>"]
    missing = [t for t in trials if t.kind == "cost" and (not t.metrics or t.metric("fw_missing"))]
    per_bed = kernel_cost.cost_rows(trials)
    for key, ts in sorted(kernel_cost.cost_groups(trials).items(), key=str):
        mode, backend, ipv = key
        ts = [t for t in ts if not t.metric("fw_missing")]
        if not ts:
            continue
        pts = kernel_cost.points(ts)
        referenced = referenced_usable(pts)
        at = {(r.layout, r.rules): r for r in per_bed.get(key, (referenced, []))[1]}
        rows, lines = [], {}
        by: dict[tuple, list[TrialRecord]] = {}
        for t in ts:
            by.setdefault((t.layout, t.rules), []).append(t)
        for (lay, n), group in sorted(by.items()):
            g = lambda k: _med(x.metric(k) for x in group)  # noqa: E731
            r = at.get((lay, n))
            v, lo, hi = (r.value_ns, r.low_ns, r.high_ns) if r is not None else (None, None, None)
            if v is not None:
                lines.setdefault(lay, []).append((n, v, lo, hi))
            chains = "; ".join(group[0].metric("fw_chains") or [])
            rows.append([esc(lay), f"{n:,}", len(group), _f(g("fw_p50_ns")),
                         f"{_f(min(x.metric('fw_p50_low_ns') or 0 for x in group))}–"
                         f"{_f(max(x.metric('fw_p50_high_ns') or 0 for x in group))}",
                         _f(g("fw_net_p50_ns")), _f(g("fw_floor_p50_ns")), _f(g("fw_ref_ratio_p50"), 4),
                         f"{_f(v)} [{_f(lo)}, {_f(hi)}]" if referenced else "–",
                         _f(g("fw_calls_per_packet"), 2), _f(g("rate_pps")), esc(chains)])
        ref_name = next((t.metric("fw_reference") for t in ts if t.metric("fw_reference")), None)
        ref_why = next((t.metric("fw_reference_missing") for t in ts if t.metric("fw_reference_missing")), None)
        parts.append(f"<h3>{esc(backend)}, IPv{ipv}, {esc(mode)}</h3>")
        conv = reference_conversion(pts) if referenced else None
        parts.append("<p class='muted'>" + (f"Reference: {esc(ref_name)}, median {_f(reference_median_ns(pts))} ns over "
                                            f"these trials; referenced figures converted at {esc(conv.words)}."
                                            if referenced and conv is not None else f"No referenced figure: {esc(ref_why or 'no reference ratio in every trial')}; raw medians.")
                     + "</p>")
        parts.append(table(["layout", "rules", "trials", "p50 [ns]", "p50 95 % interval [ns]", "net of floor [ns]",
                            "floor [ns]", "reference ratio", "referenced [ns] [interval]", "calls/packet",
                            "load [pps]", "chains timed"], rows, left=1))
        floor = _med(t.metric("fw_floor_p50_ns") for t in ts)
        parts.append(plot_div(cost_vs_rules(
            sorted(lines.items()), f"{backend}, IPv{ipv}: {'referenced' if referenced else 'raw'} time inside the "
            f"firewall per packet\nmedian over repetitions; bars: lowest to highest per-packet 95 % interval", floor)))
        parts.append(_hooks(ts))
    parts += _xdp_tables(trials)
    found = kernel_cost.sentences(trials, predicted=False)  # the predictions: section 'Predicted one-core rate'
    if found:
        parts.append("<h3>Findings</h3><ul>" + "".join(f"<li>{esc(s)}</li>" for s in found) + "</ul>")
    if missing:
        rows = [[esc(t.trial_id), esc(t.error or t.metric("fw_missing"))] for t in missing]
        parts.append("<h3>Missing</h3>" + table(["trial", "why no in-kernel figure"], rows, left=2))
    return "\n".join(p for p in parts if p)


def _xdp_tables(trials: list[TrialRecord]) -> list[str]:
    """XDP backends' figures: the kernel's own run time per program (bpf_stats), a mean per packet."""
    parts = []
    for key, ts in sorted(kernel_cost.cost_groups(trials, "bpf_stats").items(), key=str):
        mode, backend, ipv = key
        ts = [t for t in ts if not t.metric("fw_missing")]
        if not ts:
            continue
        by: dict[tuple, list[TrialRecord]] = {}
        for t in ts:
            by.setdefault((t.layout, t.rules), []).append(t)
        rows = []
        for (lay, n), group in sorted(by.items()):
            means = [x.metric("fw_mean_ns") for x in group if x.metric("fw_mean_ns") is not None]
            rows.append([esc(lay), f"{n:,}", len(group), _f(_med(means)),
                         f"{_f(min(means, default=None))}–{_f(max(means, default=None))}",
                         _f(_med(x.metric("fw_calls_per_packet") for x in group), 2),
                         _f(_med(x.metric("rate_pps") for x in group)),
                         esc("; ".join(group[0].metric("fw_chains") or []))])
        parts.append(f"<h3>{esc(backend)}, IPv{ipv}, {esc(mode)}</h3>")
        parts.append("<p class='muted'>The XDP program's own run time per packet from the kernel's program "
                     "statistics (kernel.bpf_stats_enabled, on only while the trial runs): a mean over the trial's "
                     "runs, no per-packet median, no histogram and no same-packet reference.</p>")
        parts.append(table(["layout", "rules", "trials", "mean run time [ns], median over trials",
                            "lowest–highest trial [ns]", "runs/packet", "load [pps]", "program"], rows, left=1))
    return parts


def render_capacity(run: dict, trials: list[TrialRecord]) -> str | None:
    """The run-level table of predicted one-core rates beside the measured rates (it needs the
    run's other trials too, so it is its own section)."""
    rows, any_rest = [], False
    for p in kernel_cost.predictions(as_records(trials)):
        mode, backend, ipv = p.key
        any_rest |= p.rest_ns is not None
        rows.append([esc(f"{backend}, IPv{ipv}, {mode}"), esc(p.layout), f"{p.rules:,}",
                     _f(p.fw_ns) + kernel_cost.range_text(p.fw_range_ns),
                     _f(p.alone_pps) + kernel_cost.range_text(p.alone_range_pps),
                     _f(p.rest_ns) + kernel_cost.range_text(p.rest_range_ns) if p.rest_ns is not None else _f(None),
                     _with_rest(p),
                     f"{_f(p.measured_pps)}{kernel_cost.range_text(p.measured_range_pps)} ({esc(p.measured_what)})"
                     if p.measured_pps is not None else "not measured in this run"])
    if not rows:
        return None
    return ("<h2 id='kernel-capacity'>Predicted one-core rate</h2>"
            "<p class='muted'>A prediction from the in-kernel time, not a measurement: packets/s one core could "
            "forward through the firewall, 1e9 / (time inside the firewall per packet + the rest of the forwarding "
            "path). The firewall alone (incl. the probe's floor) is an upper bound. The rest of the path is 1e9 / the "
            "rate measured at 0 rules minus the firewall's time at 0 rules: it takes the 0-rule rate as one core's "
            "work per packet" + ("" if any_rest else " (no 0-rule rate in this run: not known)")
            + "; on a shared host the measured rate also carries the generator's share. Beside it the measured rate "
              "of unprobed trials (RFC 2544 throughput, else UDP received packets/s). In brackets each figure's range: "
              "the time inside the firewall from the lowest to the highest end of its repetitions' 95 % intervals, "
              "the rest of the path from the 0-rule rate's fastest to its slowest repetition, the predictions from "
              "those ends, the measured rate from its slowest to its fastest repetition. See "
              "<a href='#kernel-cost'>Time inside the firewall</a>.</p>"
            + table(["firewall", "layout", "rules", "time inside the firewall [ns]",
                     "predicted, firewall alone [packets/s]", "rest of the path [ns]",
                     "predicted, with the rest [packets/s]", "measured [packets/s]"], rows, left=2))


def _with_rest(p) -> str:
    """The prediction with the rest of the path; at 0 rules it is the measured rate by construction
    (the rest of the path is taken from it), so it is named a calibration there, not a check."""
    if p.with_rest_pps is None:
        return "– (rest of the path not known)"
    if p.rules == 0:
        return f"{_f(p.with_rest_pps)} (calibration: the 0-rule rate by construction)"
    return _f(p.with_rest_pps) + kernel_cost.range_text(p.with_rest_range_pps)


def _hooks(ts: list[TrialRecord]) -> str:
    """Every bracket (hook, priority, role, chains), median over the trials of each rule count."""
    acc: dict[tuple, list[dict]] = {}
    for t in ts:
        for b in t.metric("fw_brackets") or []:
            key = (t.layout, t.rules, b.get("family"), b.get("hook"), f"{b.get('prio_enter')} / {b.get('prio_leave')}",
                   b.get("role"), "; ".join(b.get("chains") or []))
            acc.setdefault(key, []).append(b)
    if not acc:
        return ""
    rows = []
    for (lay, n, fam, hook, prio, role, chains), bs in sorted(acc.items(), key=str):
        miss = next((b.get("missing") for b in bs if b.get("missing")), None)
        rows.append([esc(lay), f"{n:,}", esc(fam), esc(hook), esc(prio), esc(role), esc(chains),
                     esc(miss) if miss else _f(_med(b.get("p50_ns") for b in bs)),
                     _f(_med(b.get("timed") for b in bs))])
    return ("<details><summary>Per hook and chain</summary>"
            + table(["layout", "rules", "family", "hook", "priorities (enter / leave)", "role", "chains", "p50 [ns]", "timed"], rows, left=7)
            + "</details>")


register(Section(kind="cost", title="Time inside the firewall", render=render, order=4))
register(Section(kind="@kernel-capacity", title="Predicted one-core rate", render=render_capacity, order=6,
                 run_level=True))
