"""Report section for RFC 2544 trials (kind "rfc2544"): the bed's maximum load, search throughput
(named by its goal: "zero-loss" only for loss ratio 0 and exceed ratio 0) against rule count per
frame size and mode (pps, bit/s, % of the maximum), the searches' cost, latency at fractions of
the throughput (flagged where frames were lost), frame loss rate and back-to-back bursts; where
the repetitions' full-length trials passed and failed alike, that range beside the result
(fwlab.stats.zero_loss_range). Reads the record only."""

from __future__ import annotations

import statistics

from fwlab.errors import SearchError
from fwlab.methods.rfc2544 import LOSS_BELOW_CAPACITY
from fwlab.published.compare import LIMITS
from fwlab.report import latency, plots
from fwlab.report.markup import esc, fmt, raw, table
from fwlab.report.sections import Section, register
from fwlab.report.timeseries import plot_div, xy_plot
from fwlab.svgplot import figure_svg, plt
from fwlab.results.curves import curves
from fwlab.results.trial import TrialRecord, as_records
from fwlab.search.measurer import TrialResult
from fwlab.stats.goal_label import goal_name, result_label
from fwlab.stats.zero_loss_range import JudgedTrial, ZeroLossRange, zero_loss_range


def _med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def _max_load_table(run: dict) -> str:
    rows = []
    for bed in run.get("beds", []):
        info = (bed.get("runner_info") or {}).get("rfc2544") or {}
        for key, v in info.items():
            rows.append([esc(bed.get("topology", {}).get("mode")), esc(bed.get("backend")), esc(key),
                         fmt((v.get("mrr_pps") or 0) / 1e3, 1) if v.get("mrr_pps") else esc(v.get("error") or "missing"),
                         fmt((v.get("mrr_bps") or 0) / 1e6, 1) if v.get("mrr_pps") else "",
                         fmt((v.get("offered_pps") or 0) / 1e3, 1) if v.get("offered_pps") else "",
                         esc((bed.get("device") or {}).get("device_model"))])
    if not rows:
        return ""
    return ("<h3>Maximum load of each test bed</h3><p class='muted'>A veth test bed has no line rate: the maximum "
            "is measured once per bed before any rule set is loaded, as the forwarding rate at the generator's "
            "maximum offered load (MRR/FRMOL). Searches run up to it; throughput is shown as % of it.</p>"
            + table(["mode", "backend", "traffic", "maximum [kpps]", "[Mbit/s]", "offered at max [kpps]",
                      "device model"], rows, left=3))


def _throughput(trials: list[TrialRecord]) -> list[str]:
    trials = as_records(trials)
    tp = [t for t in trials if t.traffic == "throughput"]
    if not tp:
        return []
    parts = []
    cs = curves(tp, kinds=("rfc2544",))
    groups: dict[str, list] = {}
    for c in cs:
        groups.setdefault(c.traffic_label, []).append(c)
    ranges = zero_loss_ranges(tp)
    for tl, group in groups.items():
        parts.append(f"<h3>{esc(tl)}</h3>")
        what = result_label([t for t in tp if curves([t], kinds=("rfc2544",))[0].traffic_label == tl])
        parts.append("<div class='plot'>" + plots.rate_vs_rules(group, "throughput_pps", f"{tl}: {what} "
                                                                 "vs rule count") + "</div>")
        parts.append("<div class='plot'>" + plots.rate_vs_rules(group, "throughput_pct_of_max", f"{tl}: % of the "
                                                                 "bed's maximum load") + "</div>")
        rows = []
        for c in group:
            for n, p in c.points.items():
                pps = p.values.get("throughput_pps") or []
                zr = ranges.get((tl, c.label, n))
                at_least = "max-load-passed" in p.flags  # the search's maximum passed: the value is a floor
                rows.append([esc(c.label), n, len(pps),
                             (("≥ " if at_least else "") + fmt((_med(pps) or 0) / 1e3, 1)) if pps else "missing",
                             (f"{min(pps) / 1e3:.1f}–{max(pps) / 1e3:.1f}" if len(pps) > 1 else ""),
                             fmt(_med(p.values.get("throughput_bps") or []) and _med(p.values.get("throughput_bps")) / 1e6, 1),
                             fmt(_med(p.values.get("throughput_pct_of_max") or []), 0),
                             "" if zr is None else raw(f"<span class='warn'>{zr.low_pps / 1e3:.1f}–{zr.high_pps / 1e3:.1f} "
                                                    f"({zr.duration_s:g} s; {zr.passed} of {zr.trials} passed)</span>"),
                             esc(", ".join(sorted(set(p.flags)))) or ""])
        parts.append(table(["configuration", "rules", "n", "median [kpps]", "range [kpps]", "[Mbit/s]",
                             "% of max", "passed and failed alike [kpps]", "flags"], rows, left=1))
        limiting = sorted({f for c in group for p in c.points.values() for f in p.flags if f in LIMITS})
        if limiting:  # every limiting flag a figure above carries, and what it means for it
            parts.append("<p class='warn'>Figures limited by: " + "; ".join(
                f"<b>{esc(f)}</b> ({esc(LIMITS[f].headline)}): {esc(LIMITS[f].why)}" for f in limiting) + ".</p>")
        if any(k[0] == tl for k in ranges):
            parts.append("<p class='muted'>passed and failed alike: pooled over the repetitions (or within one "
                         "search), trials of the search's full length failed at loads below others that passed (generator-short trials "
                         "left out). There the DUT's result at that trial length is a range, not one number: a "
                         "search's result inside it depends on how many trials it spent there and how it judged "
                         "them (with exceed ratio 0 one failure is an upper bound, so each further trial can only "
                         "lower it). Compare figures inside such a range with care.</p>")
        if any("loss-below-capacity" in p.flags for c in group for p in c.points.values()):
            parts.append("<p class='muted'>loss-below-capacity: the search's result lies below "
                         f"{100 * LOSS_BELOW_CAPACITY:.0f} % of the highest rate the DUT forwarded in a trial of the "
                         "same search that lost frames (<code>forwarded_at_loss_pps</code>). It lost frames far below "
                         "what it forwards, so transients set the result -- on a shared VM its CPU's stalls against "
                         "a 256-frame receive ring (docs/device-model.md) -- not the rule set's per-packet cost. The "
                         "forwarding rate under overload (MRR) or a loss-tolerant goal (PDR) measures that cost.</p>")
    parts.append(ndr_pdr(tp))
    # search cost
    rows = []
    for t in tp:
        if not t.metrics:
            continue
        rows.append([esc(t.trial_id), esc(t.metric("algorithm")), esc(t.metric("goal")),
                     fmt((t.metric("lower_bound_pps") or 0) / 1e3, 1) if t.metric("lower_bound_pps") else "none",
                     fmt((t.metric("upper_bound_pps") or 0) / 1e3, 1) if t.metric("upper_bound_pps") else "none",
                     t.metric("search_trials"), fmt(t.metric("search_trial_s"), 1)])
    parts.append("<details><summary>every search: bounds, trials and trial seconds</summary>"
                 + table(["trial", "algorithm", "goal", "lower [kpps]", "upper [kpps]", "trials", "trial s"],
                          rows, left=3) + "</details>")
    if any("max-load-passed" in p.flags for c in cs for p in c.points.values()):
        parts.append("<p class='muted'>≥: the search's maximum load itself passed, so the DUT's throughput is at "
                     "least that figure (the test bed's maximum limits it, not the DUT).</p>")
    parts.append(search_traces(tp))
    return parts


#: at most this many search traces are drawn in one report (the rest are listed as left out)
MAX_TRACES = 24


def trace_plot(series: list[dict], title: str) -> str | None:
    """One search's trace: each trial's load against its number (passed o, failed x; marker size
    by trial length) and the goal's relevant bounds after it (steps), as TRex's NDR bench and
    CSIT draw a search; None without trials."""
    pts = [s for s in series if s.get("load_pps") is not None]
    if not pts:
        return None
    fig, ax = plt.subplots(figsize=(8.0, 3.2), dpi=100)
    n = list(range(1, len(pts) + 1))
    longest = max((s.get("duration_s") or 0.0) for s in pts) or 1.0
    for passed, marker, color, name in ((True, "o", "tab:green", "passed"), (False, "x", "tab:red", "failed")):
        sel = [(k, s) for k, s in zip(n, pts) if bool(s.get("passed")) == passed]
        if sel:
            ax.scatter([k for k, _ in sel], [s["load_pps"] / 1e3 for _, s in sel], marker=marker, color=color,
                       s=[12 + 40 * (s.get("duration_s") or 0.0) / longest for _, s in sel], label=name, zorder=3)
    for key, color, name in (("lower_bound_pps", "tab:green", "lower bound"), ("upper_bound_pps", "tab:red",
                                                                                 "upper bound")):
        ys = [None if s.get(key) is None else s[key] / 1e3 for s in pts]
        if any(y is not None for y in ys):
            ax.step(n, [float("nan") if y is None else y for y in ys], where="post", color=color, alpha=0.5,
                    linestyle="--", label=name)
    ax.set_xlabel("trial")
    ax.set_ylabel("intended load [kpps]")
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return figure_svg(fig)


def search_traces(tp: list[TrialRecord]) -> str:
    """Every throughput search's trace (`trace_plot`), in a closed details element; "" when no
    record holds one."""
    drawn, left = [], 0
    for t in tp:
        if not t.series or not any("load_pps" in s for s in t.series):
            continue
        if len(drawn) >= MAX_TRACES:
            left += 1
            continue
        svg = trace_plot(t.series, f"{t.trial_id}: {t.metric('algorithm') or ''} {t.metric('goal') or ''}")
        if svg:
            drawn.append(f"<div class='plot'>{svg}</div>")
    if not drawn:
        return ""
    more = f"<p class='muted'>{left} more searches not drawn.</p>" if left else ""
    return ("<details><summary>search traces: the load of each trial, passed or failed (marker size: trial "
            "length), and the goal's bounds narrowing</summary>" + "".join(drawn) + more + "</details>")


def zero_loss_ranges(tp: list[TrialRecord]) -> dict[tuple, ZeroLossRange]:
    """Per (traffic label, configuration label, rules): where the repetitions' full-length trials
    passed and failed alike (:mod:`fwlab.stats.zero_loss_range`). Every trial is judged by the
    first goal's loss ratio (the figure the table shows): a search with several goals (CSIT's NDR
    and PDR) shares its trials, each of them marked passed or failed by the goal that asked for it."""
    pooled: dict[tuple, list[JudgedTrial]] = {}
    for t in as_records(tp):
        results = ((t.extra or {}).get("rfc2544") or {}).get("results") or []
        if t.error or not results:
            continue
        loss_ratio = float((results[0].get("goal") or {}).get("loss_ratio") or 0.0)
        c = curves([t], kinds=("rfc2544",))
        if not c:
            continue
        judged = pooled.setdefault((c[0].traffic_label, c[0].label, t.rules), [])
        for x in results[0].get("trials") or []:  # a trace without them (older records): nothing to pool
            try:
                r = TrialResult.from_dict(x["result"])
            except (KeyError, TypeError, SearchError):
                continue
            judged.append(JudgedTrial(r.duration_s, r.intended_load_pps,
                                      not r.generator_short and r.loss_ratio <= loss_ratio,
                                      r.generator_short, t.trial_id))
    out = {}
    for key, judged in pooled.items():
        zr = zero_loss_range(judged)
        if zr is not None:
            out[key] = zr
    return out


def _goal_results(t: TrialRecord) -> list[tuple[str, str, float | None]]:
    """(NDR|PDR, goal name, throughput_pps) of every goal a throughput trial searched: loss ratio 0
    is an NDR goal, above 0 a PDR goal; a goal without a loss ratio is left out."""
    out = []
    for r in ((t.extra or {}).get("rfc2544") or {}).get("results") or []:
        g = r.get("goal") or {}
        loss = g.get("loss_ratio", 0.0 if r.get("algorithm") == "binary" else None)
        if loss is None:
            continue
        out.append(("NDR" if float(loss) == 0.0 else "PDR", goal_name(loss, g.get("exceed_ratio", 0.0)),
                    r.get("throughput_pps")))
    return out


def ndr_pdr(tp: list[dict]) -> str:
    """NDR and PDR side by side for each configuration and rule count where both were searched:
    medians over repetitions, PDR / NDR, and one plot with both against rule count."""
    tp = as_records(tp)
    cells: dict[tuple, dict[str, dict]] = {}
    for t in tp:
        if t.error:
            continue
        c = curves([t], kinds=("rfc2544",))
        if not c:
            continue
        key = (c[0].traffic_label, c[0].label, t.rules)
        for cls, name, pps in _goal_results(t):
            d = cells.setdefault(key, {}).setdefault(cls, {"names": set(), "pps": []})
            d["names"].add(name)
            if pps is not None:
                d["pps"].append(float(pps))
    both = {k: v for k, v in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or 0))
            if "NDR" in v and "PDR" in v}
    if not both:
        return ""
    rows, lines = [], {}
    for (tl, label, rules), v in both.items():
        ndr, pdr = _med(v["NDR"]["pps"]), _med(v["PDR"]["pps"])
        ratio = f"{pdr / ndr:.3f}" if ndr and pdr is not None else "missing (no NDR throughput)"
        rows.append([esc(tl), esc(label), rules,
                     esc(", ".join(sorted(v["NDR"]["names"]))),
                     fmt(ndr / 1e3, 1) if ndr is not None else "missing", len(v["NDR"]["pps"]),
                     esc(", ".join(sorted(v["PDR"]["names"]))),
                     fmt(pdr / 1e3, 1) if pdr is not None else "missing", len(v["PDR"]["pps"]), ratio])
        for cls, style in (("NDR", "-"), ("PDR", "--")):
            med = _med(v[cls]["pps"])
            lines.setdefault((tl, label, cls, style), []).append((rules or 0, med / 1e3 if med is not None else None))
    plot = xy_plot([(f"{label} {cls}" + (f" ({tl})" if len({k[0] for k in lines}) > 1 else ""), pts, style)
                    for (tl, label, cls, style), pts in lines.items()],
                   "rules", "throughput [kpps]", "NDR (solid) and PDR (dashed) vs rule count")
    return ("<h3>NDR and PDR side by side</h3><p class='muted'>Where a configuration searched both a "
            "no-drop goal (NDR, loss ratio 0) and a partial-drop goal (PDR, loss ratio above 0): the medians "
            "over repetitions (n each) and PDR / NDR.</p>"
            + plot_div(plot)
            + table(["traffic", "configuration", "rules", "NDR goal", "NDR [kpps]", "n", "PDR goal", "PDR [kpps]",
                      "n", "PDR / NDR"], rows, left=3))


def _latency(trials: list[TrialRecord]) -> str:
    trials = as_records(trials)
    rows = []
    for t in trials:
        for lt in ((t.extra or {}).get("rfc2544") or {}).get("latency") or []:
            lat = lt.get("latency") or {}
            note = []
            if lt.get("loss_ratio"):
                note.append(f"<span class='warn'>loss {100 * lt['loss_ratio']:.2g} %: latency of the frames that "
                            "survived an overloaded DUT (RFC 2544 measures latency at a load without loss)</span>")
            if lt.get("generator_short"):
                note.append("<span class='warn'>generator-short: the intended load was not offered</span>")
            rows.append([esc(t.trial_id), fmt(100 * lt["fraction"], 0), fmt(lt["load_pps"] / 1e3, 1),
                         fmt(100 * (lt.get("loss_ratio") or 0), 3),
                         *[fmt(lat.get(f"{k}_ns") / 1e3, 1) if lat.get(f"{k}_ns") is not None else ""
                           for k in ("min", "p50", "p99", "max")], raw("; ".join(note))])
    if not rows:
        return ""
    return ("<h3>Latency at fractions of the throughput (RFC 2544 §26.2)</h3><p class='muted'>One-way latency "
            "of every test frame (send timestamp in the frame, kernel receive time), in µs. A load at which "
            "frames were lost is flagged: its latency is not the latency of a DUT that keeps up.</p>"
            + table(["trial", "% of throughput", "load [kpps]", "loss [%]", "min", "p50", "p99", "max", "flag"],
                     rows, left=1))


def _latency_cdfs(trials: list[TrialRecord]) -> str:
    """Per frame size, mode and fraction of the throughput: every configuration's latency trials
    merged over repetitions into one distribution."""
    trials = as_records(trials)
    groups: dict[tuple, latency.CdfGroup] = {}
    for t in trials:
        for lt in ((t.extra or {}).get("rfc2544") or {}).get("latency") or []:
            if not lt.get("latency_hdr_b64"):
                continue
            key = (t.mode, t.ip_version, t.size_bytes, lt["fraction"])
            g = groups.setdefault(key, latency.CdfGroup(
                title=f"{key[0]}, IPv{key[1]}, {key[2]} B frames, {100 * key[3]:g} % of each one's throughput",
                unit=lt.get("latency_hdr_unit") or "ns"))
            label, order = latency.config_label(t)
            g.add(label, order, lt["latency_hdr_b64"])
    return latency.render(list(groups.values()), (
        "<h3>Latency distributions</h3><p class='muted'>Every test frame's one-way latency in each latency "
        "trial, as the engine's HDR histogram; the repetitions of a configuration merged (counts added), "
        "percentiles read from the merged histogram. Each configuration runs at its own throughput.</p>"))


def _frame_loss(trials: list[TrialRecord]) -> str:
    trials = as_records(trials)
    fl = [t for t in trials if t.traffic == "frame_loss" and t.metrics]
    if not fl:
        return ""
    rows = []
    for t in fl:
        steps = ((t.extra or {}).get("rfc2544") or {}).get("steps") or []
        rows.append([esc(t.trial_id)] + [f"{s['load_pct']:.0f} %: {100 * (s['loss_ratio'] or 0):.2f} %"
                                             + (" (short)" if s.get("generator_short") else "") for s in steps])
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    return ("<h3>Frame loss rate (RFC 2544 §26.3)</h3><p class='muted'>Loss at each offered load (% of the bed's "
            "maximum), from the top down until two loads in a row lose nothing.</p>"
            + table(["trial"] + [f"step {k}" for k in range(1, width)], rows, left=width))


def _back_to_back(trials: list[TrialRecord]) -> str:
    trials = as_records(trials)
    bb = [t for t in trials if t.traffic == "back_to_back" and t.metrics]
    if not bb:
        return ""
    rows = [[esc(t.trial_id), t.metric("back_to_back_frames") or "none",
             fmt((t.metric("burst_rate_pps") or 0) / 1e3, 1), t.metric("bursts"),
             "yes" if t.metric("burst_max_passed") else ""] for t in bb]
    return ("<h3>Back-to-back frames (RFC 2544 §26.4)</h3><p class='muted'>The longest burst at the generator's "
            "maximum rate that the DUT passes with no loss.</p>"
            + table(["trial", "longest burst [frames]", "burst rate [kpps]", "bursts sent", "longest tried passed"],
                     rows, left=1))


def _rt_limit_note(run: dict) -> str:
    """What the kernel's real-time limit (recorded per bed, ``device.rt_limit``) does to a DUT whose
    NAPI threads run at real-time priority: near its capacity the DUT is stopped for the rest of
    each period and loses frames a real device would not."""
    limits = {(lim.get("runtime_us"), lim.get("period_us"), lim.get("share"))
              for b in run.get("beds", []) if (lim := (b.get("device") or {}).get("rt_limit"))}
    if not limits:
        return ""
    if len(limits) > 1:
        return "<p class='warn'>The kernel's real-time limit changed between test beds of this run: " + \
            ", ".join(esc(f"{r} of {p} µs") for r, p, _ in sorted(limits, key=str)) + ".</p>"
    runtime, period, share = limits.pop()
    if runtime == -1:
        return ("<p class='muted'>The kernel's real-time limit was off on this host (sched_rt_runtime_us -1): "
                "the DUT's NAPI threads could use their whole CPU.</p>")
    if share is None:
        return "<p class='muted'>The kernel's real-time limit could not be read.</p>"
    return (f"<p class='warn'>The kernel's real-time limit: the DUT's NAPI threads may run {esc(runtime)} of every "
            f"{esc(period)} µs ({100 * share:.0f} %). A DUT busy the whole time is stopped for the rest of each "
            "period and its ring overflows, so near its capacity it loses frames a real device would not, and "
            "longer trials meet more such stops (docs/device-model.md). fwlab never changes this setting.</p>")


def render(run: dict, trials: list[TrialRecord]) -> str | None:
    trials = as_records(trials)
    parts = ["<h2>RFC 2544: throughput, latency, frame loss, back-to-back</h2>"]
    models = {(b.get("device") or {}).get("device_model") for b in run.get("beds", [])}
    if "veth" in models:
        parts.append("<p class='warn'>Some beds used device model 'veth': there, DUT overload slows the sender "
                     "instead of losing frames, and a loss-ratio search describes the sender.</p>")
    else:
        parts.append("<p class='muted'>Device model 'napi': the DUT's veths receive through threaded NAPI on their "
                     "own CPU (real-time priority), so an overloaded DUT drops frames at its 256-frame ingress ring, "
                     "as a real device drops at its RX ring (docs/device-model.md).</p>")
        parts.append(_rt_limit_note(run))
    parts.append(_max_load_table(run))
    parts.extend(_throughput(trials))
    parts.append(_latency(trials))
    parts.append(_latency_cdfs(trials))
    parts.append(_frame_loss(trials))
    parts.append(_back_to_back(trials))
    return "\n".join(p for p in parts if p)


register(Section(kind="rfc2544", title="RFC 2544", render=render, order=10))
