"""Report section for plain stream trials: per-second time series (throughput, and delay under
load when a ping probe ran beside the stream) and, when a suite ran both IP versions, the IPv4 vs
IPv6 table per protocol and direction (seed 003): throughput, UDP jitter, RTT percentiles under
load. The rule-count curves of the same trials stay in the main part of the page. Laid out by
templates/section_stream.html.j2."""

from __future__ import annotations

from fwlab.report import templating
from fwlab.report.markup import esc, raw
from fwlab.report.sections import Section, register
from fwlab.report.timeseries import config_label, fmt, med, plot_div, series_plot, traffic_name
from fwlab.results.trial import TrialRecord, as_records

MAX_PLOTS = 12


def _v4v6(ok: list[TrialRecord]) -> list[list]:
    """The IPv4 vs IPv6 table's rows: configurations that ran both IP versions."""
    ok = as_records(ok)
    groups: dict[tuple, dict[int, list[dict]]] = {}
    for t in ok:
        groups.setdefault((t.mode, config_label(t), traffic_name(t)), {}).setdefault(
            t.ip_version, []).append(t)
    rows = []
    for (mode, conf, tn), by_v in sorted(groups.items(), key=str):
        if 4 not in by_v or 6 not in by_v:
            continue

        def g(v: int, k: str):
            return med(x.metric(k) for x in by_v[v])

        t4, t6 = g(4, "throughput_bps"), g(6, "throughput_bps")
        rows.append([esc(conf), esc(tn), esc(mode), f"{len(by_v[4])}/{len(by_v[6])}",
                     fmt(t4, 1e-9, 3), fmt(t6, 1e-9, 3), fmt(100 * t6 / t4 if t4 and t6 is not None else None, 1, 0),
                     fmt(g(4, "throughput_up_bps"), 1e-9, 3) + " / " + fmt(g(4, "throughput_down_bps"), 1e-9, 3),
                     fmt(g(6, "throughput_up_bps"), 1e-9, 3) + " / " + fmt(g(6, "throughput_down_bps"), 1e-9, 3),
                     fmt(g(4, "jitter_ms"), 1e3, 1), fmt(g(6, "jitter_ms"), 1e3, 1),
                     fmt(g(4, "loss_ratio"), 100, 2), fmt(g(6, "loss_ratio"), 100, 2),
                     fmt(g(4, "rtt_p50_ms"), 1e3, 0) + " / " + fmt(g(4, "rtt_p99_ms"), 1e3, 0),
                     fmt(g(6, "rtt_p50_ms"), 1e3, 0) + " / " + fmt(g(6, "rtt_p99_ms"), 1e3, 0),
                     fmt(g(4, "rtt_ipdv_ms"), 1e3, 1), fmt(g(6, "rtt_ipdv_ms"), 1e3, 1)])
    return rows


def render(run: dict, trials: list[TrialRecord]) -> str | None:
    trials = as_records(trials)
    ok = [t for t in trials if t.metrics]
    with_series = [t for t in ok if t.series]
    if not with_series:
        return None
    plots: list = []
    not_plotted = 0
    by_tn: dict[str, list[dict]] = {}
    for t in with_series:
        if t.repetition == 1:
            by_tn.setdefault(f"{traffic_name(t)} ({t.mode})", []).append(t)
    shown = 0
    for tn, ts in sorted(by_tn.items()):
        if shown >= MAX_PLOTS:
            not_plotted = len(by_tn) - shown
            break
        ts.sort(key=lambda t: (t.ip_version, t.backend != "none", t.rules or 0))
        lines = [(f"{config_label(t)} IPv{t.ip_version}", t.series) for t in ts]
        plots.append(plot_div(series_plot(lines, "throughput_bps", "throughput [Gbit/s]", 1e-9, f"{tn}: throughput per second")))
        if any(s.get("rtt_p50_ms") is not None for t in ts for s in t.series):
            plots.append(plot_div(series_plot(lines, "rtt_p50_ms", "median RTT [µs]", 1e3, f"{tn}: RTT under load per second")))
        shown += 1
    return str(templating.render("section_stream.html.j2", v4v6=_v4v6(ok), plots=[raw(p) for p in plots if p],
                                 not_plotted=not_plotted))


register(Section(kind="stream", title="Stream time series", render=render, order=10))
