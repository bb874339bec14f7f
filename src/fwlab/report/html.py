"""The self-contained report page (report.html): plots inline as SVG, tables, conditions.

Owns: page layout and wording. Built from the stored record alone (run.json + trials.jsonl),
so any old run can be re-reported.
"""

from __future__ import annotations

import html
import json
import statistics
from collections.abc import Callable

from fwlab import webpage
from fwlab.report import interactive, nics, plots, templating
from fwlab.report.markup import Html, esc, fmt, raw, table
from fwlab.report.summary import load_times, per_rule_costs
from fwlab.results.curves import METRIC_INFO, Curve, Point, primary_metric
from fwlab.results.identity import size_words
from fwlab.results.store import RecordState, state_without_plan
from fwlab.stats import RATIO_METHOD
from fwlab.stats.run_summary import PointSummary, point_summaries
from fwlab.results.trial import TrialRecord, as_records

def _rate_text(label: str, metric: str, value: float) -> str:
    name, unit, scale = METRIC_INFO.get(metric, (metric, "", 1.0))
    return f"{label}: {value * scale:.4g} {unit}".strip()


def _rules_table(curves: list[Curve], cell: Callable[[Curve, Point], str]) -> str:
    """One row per configuration, one column per rule count; ``cell`` renders one point.
    A point whose every trial failed shows as missing, with the first reason as its tooltip."""
    ns = sorted({n for c in curves for n in c.points})
    rows = []
    for c in curves:
        cells = [esc(c.label)]
        for n in ns:
            p = c.points.get(n)
            if p is None:
                cells.append("")
            elif p.errors and not p.values:
                cells.append(raw(f"<span class='err' title='{esc(p.errors[0])}'>missing</span>"))
            else:
                cells.append(raw(cell(c, p)))
        rows.append(cells)
    return table(["configuration"] + [f"{n} rules" for n in ns], rows)


def _fig(ps: PointSummary, column: str, text: str) -> str:
    """A figure's text marked with its summary.csv row and column (``data-fig``), so that a test
    (tests/unit/test_one_figure.py) can check every figure on the page against the CSV."""
    return f"<span data-fig='{esc(ps.key())}#{esc(column)}'>{text}</span>"


def _pct_table(group: list[Curve]) -> str:
    """Seed 001 Table 1 shape: rate as % of the same curve's 0-rule rate, per rule count."""
    with_rules = [c for c in group if c.k["backend"] != "none"]
    if not with_rules:
        return ""
    what = METRIC_INFO[primary_metric(group[0])][0]
    by_point = {(ps.curve.key, ps.rules): ps for ps in point_summaries(with_rules)}

    def cell(c: Curve, p: Point) -> str:
        ps = by_point[(c.key, p.rules)]
        m = primary_metric(c)
        s = ps.metrics.get(m)
        if s is None or s.pct_of_0_rules is None:
            return "–"
        v, lo, hi = s.pct_of_0_rules, s.pct_of_0_rules_ci95_low, s.pct_of_0_rules_ci95_high
        ci = (_fig(ps, f"{m}_pct_of_0_rules_ci95_low", f"{lo:.1f}") + "–"
              + _fig(ps, f"{m}_pct_of_0_rules_ci95_high", f"{hi:.1f}")
              if lo is not None and hi is not None else "no interval")
        return (_fig(ps, f"{m}_pct_of_0_rules", f"{v:.1f}")
                + f"<br><span class='muted' title='{esc(s.pct_why or RATIO_METHOD)}'>{ci}</span>")

    tbl = _rules_table(with_rules, cell)
    shared = sorted({" and ".join(c.shared_with) for c in with_rules if c.shared_with})
    note = (f"; the 0-rule reference is pooled over {', '.join(shared)} (the same rule set at 0 rules)"
            if shared else "")
    return (f"<p class='muted'>{what} as % of the 0-rule {what}: mean of repetitions over the 0-rule "
            f"reference's mean, below it the 95 % "
            f"interval ({RATIO_METHOD}: Fieller's interval carries the noise of both the figure and "
            f"the 0-rule reference; 'no interval' with fewer than 2 repetitions){note}</p>" + tbl)


def _abs_cells(group: list[Curve]) -> Callable[[Curve, Point], str]:
    by_point = {(ps.curve.key, ps.rules): ps for ps in point_summaries(group)}

    def cell(c: Curve, p: Point) -> str:
        ps = by_point[(c.key, p.rules)]
        shown = [_fig(ps, f"{m}_median", f"{s.median * METRIC_INFO[m][2]:.2f}") + f" {METRIC_INFO[m][1]}"
                 for m in ("throughput_bps", "rx_pps", "transactions_per_s") if (s := ps.metrics.get(m)) is not None]
        txt = "<br>".join(shown) or "–"
        flags = sorted(set(p.flags))
        if flags:
            txt += f"<br><span class='warn' title='{esc(', '.join(flags))}'>⚑</span>"
        return txt
    return cell


def _abs_table(group: list[Curve]) -> str:
    return _rules_table(group, _abs_cells(group))


LATENCY_COLS = (("min", "min"), ("p50", "p50"), ("p90", "p90"), ("p99", "p99"), ("p999", "p99.9"), ("max", "max"))


def _latency_table(trials: list[TrialRecord]) -> str:
    """Latency percentiles of trials that measured them (fwlab-engine): per configuration and
    rule count, the median over repetitions of each percentile [µs]."""
    trials = as_records(trials)
    acc: dict[tuple, list[dict]] = {}
    for t in trials:
        lat = t.metric("latency_ns")
        if t.error or not isinstance(lat, dict):
            continue
        key = (t.mode, t.backend, t.layout, bool(t.stateful_shortcut),
               t.ip_version, t.traffic, t.size_bytes, t.rules)
        acc.setdefault(key, []).append(lat)
    if not acc:
        return ""
    rows = []
    for (mode, be, lay, sc, ipv, tr, size, n), lats in sorted(acc.items(), key=lambda kv: tuple(str(x) for x in kv[0][:-1]) + (kv[0][-1],)):
        conf = "none (no firewall)" if be == "none" else f"{be} {lay}" + (" +established" if sc else "")
        cells = [esc(conf), esc(f"IPv{ipv} {str(tr).upper()} {size_words(size, tr, 'stream') if size else ''} ({mode})"),
                 n, len(lats)]
        for k, _ in LATENCY_COLS:
            vals = [v[k] for v in lats if v.get(k) is not None]
            cells.append(fmt(statistics.median(vals) / 1e3 if vals else None, 1))
        rows.append(cells)
    return ("<h2>Latency</h2><p class='muted'>One-way latency of every received test packet "
            "(fwlab-engine: send time in the packet, kernel receive time; HDR histogram), median over "
            "repetitions of each percentile, in µs. At the maximum rate this is mostly queueing.</p>"
            + table(["configuration", "traffic", "rules", "trials"] + [f"{h} [µs]" for _, h in LATENCY_COLS], rows, left=2)
            + _latency_cdfs(trials))


def _latency_cdfs(trials: list[TrialRecord]) -> str:
    """The same trials' HDR histograms merged over repetitions: one CDF per configuration."""
    trials = as_records(trials)
    from fwlab.report import latency

    groups: dict[tuple, latency.CdfGroup] = {}
    for t in trials:
        if t.error or not t.metric("latency_hdr_b64"):
            continue
        key = (t.mode, t.ip_version, t.traffic, t.size_bytes, t.rate_bps)
        rate = f", {t.rate_bps / 1e6:g} Mbit/s" if t.rate_bps else ", maximum rate"
        g = groups.setdefault(key, latency.CdfGroup(
            title=f"IPv{key[1]} {str(key[2]).upper()} {key[3] or ''} B ({key[0]}){rate}",
            unit=t.metric("latency_hdr_unit", "ns")))
        label, order = latency.config_label(t)
        g.add(label, order, t.metric("latency_hdr_b64"))
    return latency.render(list(groups.values()), "<h3>Latency distributions</h3><p class='muted'>Repetitions "
                          "merged (histogram counts added); percentiles of the merged histogram.</p>")


def record_state_html(state: RecordState) -> Html:
    """The record's status line: complete, or what is missing, damaged, interrupted, resumed."""
    text = esc(state.sentence())
    if state.complete:
        return raw(f"<span class='ok'>{text}</span>")
    hint = ""
    if state.status in ("incomplete", "interrupted", "running", "failed") and not state.bad_lines:
        hint = " — resume with <code>fwlab run --resume DIR</code>"
    return raw(f"<span class='warn'>{text}</span>{hint}")


def render(run: dict, trials: list[TrialRecord], cs: list[Curve], summary_csv_name: str,
           state: RecordState | None = None) -> str:
    """The page (templates/report.html.j2). ``state`` (RunRecord.state) says what the record is;
    without it, the stated status and the trial count are all the page knows."""
    trials = as_records(trials)
    suite = run.get("suite", {}).get("parsed", {})
    host = run.get("host", {})
    n_ok = sum(1 for t in trials if not t.error)
    n_err = sum(1 for t in trials if t.error)
    if state is None:
        state = state_without_plan(run, trials)
    from fwlab.report.overview import trial_length

    status_html = table(None, [
        ["status", record_state_html(state)],
        ["trials", f"{n_ok} measured, {n_err} failed, {run.get('plan', {}).get('trials', '?')} planned"],
        ["started / ended (UTC)", f"{run.get('started_utc')} / {run.get('ended_utc')}"],
        ["host", f"{host.get('cpu_model')} — {host.get('cpus')} CPUs, "
                 f"{(host.get('memory_kib') or 0) // 1048576} GiB, kernel {host.get('kernel')}"],
        ["fwlab", f"{host.get('fwlab_version')} ({host.get('fwlab_git_revision')})"],
        ["trial", f"{trial_length(suite)} x {suite.get('repetitions')} repetitions; offloads "
                  f"{nics.offloads_text(suite.get('offloads'))}; pinning {nics.pinning_text(suite.get('pinning'))}"],
        ["machine-readable", raw(f"<code>trials.jsonl</code>, <code>run.json</code>, <code>{esc(summary_csv_name)}</code>")],
    ], left=2)

    from fwlab.report.cpu import render as render_cpu
    from fwlab.report.datapaths import render as render_datapaths
    from fwlab.report.line_rate import render as render_line_rate
    from fwlab.report.overview import render_overview
    from fwlab.report.parallel import render_parts
    from fwlab.report.sections import render_sections

    groups: dict[str, list[Curve]] = {}
    for c in cs:
        if c.kind != "stream":
            continue  # e.g. RFC 2544 curves: their own section (report/section_rfc2544.py)
        groups.setdefault(c.traffic_label, []).append(c)
    lt_all = load_times(cs)
    modes = sorted({str(r["mode"]) for r in lt_all})
    # the parts that draw plots, independent of each other: drawn side by side (report.parallel),
    # the costliest first; the page below places them
    thunks: dict[str, Callable[[], object]] = {
        "cpu": lambda: render_cpu(trials),
        "top": lambda: render_sections(run, trials, run_level=True),
        "sections": lambda: render_sections(run, trials),
    }
    for tl, group in groups.items():
        metric = primary_metric(group[0])
        # one plot per traffic, of its primary figure: a packet rate's bit rate is the same curve
        # scaled by the frame size (drawn again it was a near-zero Gbit/s axis; the table has it)
        thunks[f"rate {tl}"] = (lambda g=group, m=metric, tl=tl: (
            plots.rate_vs_rules(g, m, f"{tl}: {METRIC_INFO[m][0]} vs rule count"),
            interactive.rate_figure(g, m, f"{tl}: {METRIC_INFO[m][0]} vs rule count")))
    for mode in modes:
        lt = [r for r in lt_all if str(r["mode"]) == mode]
        thunks[f"load {mode}"] = lambda lt=lt: ((plots.load_time_plot(lt), interactive.load_time_figure(lt)),
                                                (plots.kernel_memory_plot(lt), None))
    drawn = dict(zip(thunks, render_parts(list(thunks.values()))))

    top = [raw(x) for x in drawn["top"]]
    # the answer first: after the headline findings, what one rule costs
    costs = [[r["curve"], r["traffic"], fmt(r["per_rule_ns"], 2),
              "–" if r["per_rule_ns_ci"] is None else f"{r['per_rule_ns_ci'][0]:.2f}–{r['per_rule_ns_ci'][1]:.2f}",
              fmt(r["base_ns"], 0), fmt(r["r_squared"], 3), r["points"]] for r in per_rule_costs(cs)]
    live = webpage.Plots()  # the page's interactive plots, ids in page order
    stream_groups = [{"title": tl, "plot": live.figure(f"rate {tl}", *drawn[f"rate {tl}"]), "pct_table": raw(_pct_table(group)),
                      "abs_table": raw(_abs_table(group))} for tl, group in groups.items()]
    load_modes = []
    for mode in modes:
        lt = [r for r in lt_all if str(r["mode"]) == mode]
        load_modes.append({"mode": mode, "plots": [live.figure(f"load time {mode}", svg, fig)
                                                    for svg, fig in drawn[f"load {mode}"] if svg], "rows": [
            [r["backend"], r["layout"], "yes" if r["stateful_shortcut"] else "no", r["rules"],
             fmt(r["load_s_median"] * 1e3, 1), r["loads"],
             "—" if r.get("kernel_mem_bytes_median") is None else fmt(r["kernel_mem_bytes_median"] / 2**20, 1),
             "; ".join(_rate_text(lbl, m, v) for lbl, (m, v) in sorted(r.get("rates", {}).items())) or "—"]
            for r in lt]})

    codes: dict[str, tuple[int, str]] = {}
    for t in trials:
        for f in t.flags:
            n, msg = codes.get(f.code, (0, f.message or ""))
            codes[f.code] = (n + 1, msg)
    models = {(b.get("device") or {}).get("device_model") or "veth" for b in run.get("beds", [])} or {"veth"}
    beds = [{"run_id": (bed.get("topology") or {}).get("run_id"), "mode": (bed.get("topology") or {}).get("mode"),
             "backend": bed.get("backend"), "version": bed.get("backend_version"),
             "detail": json.dumps({k: bed[k] for k in ("offloads", "sysctls", "topology") if k in bed}, indent=1)}
            for bed in run.get("beds", [])]
    page = templating.render(
        "report.html.j2", suite=suite, complete=state.complete, status=raw(status_html),
        overview=raw(render_overview(run, trials, cs, drawn["top"], state=state)), costs=costs, top=top,
        stream_groups=stream_groups, sections=[raw(x) for x in drawn["sections"]],
        latency=raw(_latency_table([t for t in trials if t.kind == "stream"])),
        line_rate=raw(render_line_rate(trials)), cpu=raw(drawn["cpu"]), datapaths=raw(render_datapaths(run, trials)),
        load_modes=load_modes, flags=[[k, v[1], v[0]] for k, v in codes.items()],
        errors=[[t.trial_id, t.error] for t in trials if t.error],
        skipped=[[s["mode"], s["backend"], s["layout"], "yes" if s["stateful_shortcut"] else "no", s["reason"]]
                 for s in run.get("plan", {}).get("skipped") or []],
        other_models=bool(models - {"napi"}), napi_model="napi" in models, nics=raw(nics.render(run.get("beds", []))),
        beds=beds, tools=json.dumps(host.get("tools", {}), indent=1), suite_toml=run.get("suite", {}).get("toml", ""))
    page = str(page)
    if webpage.has_plots(page):  # a plot of the page's own or of a section: plotly draws them all, once
        end = page.rfind("</body>")
        page = page[:end] + webpage.page_script(page) + "\n" + page[end:]
    return with_contents(page)


def with_contents(page: str) -> str:
    """The page with a table of contents after its introduction: one link per section (h2),
    each section given an id (kept where it has one)."""
    import re

    used: set[str] = set()
    entries: list[tuple[str, Html]] = []

    def anchor(m: re.Match) -> str:
        attrs, title = m.group(1) or "", m.group(2)
        have = re.search(r"id=['\"]([^'\"]+)['\"]", attrs)
        ident = have.group(1) if have else (re.sub(r"[^a-z0-9]+", "-", html.unescape(re.sub(r"<[^>]+>", "", title)).lower())
                                            .strip("-") or "section")
        base, k = ident, 2
        while ident in used and not have:
            ident, k = f"{base}-{k}", k + 1
        used.add(ident)
        entries.append((ident, raw(re.sub(r"<[^>]+>", "", title))))  # the heading's own (escaped) text
        return m.group(0) if have else f"<h2 id='{ident}'{attrs}>{title}</h2>"

    page = re.sub(r"<h2([^>]*)>(.*?)</h2>", anchor, page, flags=re.S)
    if len(entries) < 2:
        return page
    toc = str(templating.render("contents.html.j2", entries=entries))
    at = page.find("</p>", page.find("<h1"))  # after the suite's description
    return page[:at + 4] + toc + page[at + 4:] if at >= 0 else page
