"""Report section for kind ``parallel``: many TCP streams per rule set and the recovery probes
after them (seed 004): total throughput, bytes, completion time and per-stream spread per stream
count, and each probe's single-stream throughput over the seconds after the multi-stream run.
Laid out by templates/section_parallel.html.j2."""

from __future__ import annotations

from fwlab.report import templating
from fwlab.report.markup import esc, raw
from fwlab.report.sections import Section, register
from fwlab.report.timeseries import config_label, fmt, med, plot_div, series_plot, xy_plot
from fwlab.results.trial import TrialRecord, as_records


def _key(t: TrialRecord) -> tuple:
    return (t.mode, t.ip_version, config_label(t))


def render(run: dict, trials: list[TrialRecord]) -> str | None:
    trials = as_records(trials)
    ok = [t for t in trials if t.metrics]
    if not trials:
        return None
    groups: dict[tuple, dict[int, list[dict]]] = {}
    for t in ok:
        groups.setdefault(_key(t), {}).setdefault(int(t.streams or 1), []).append(t)
    lines = []
    for (mode, ipv, conf), by_n in sorted(groups.items(), key=lambda kv: str(kv[0])):
        pts = [(n, med(x.metric("throughput_bps") for x in ts)) for n, ts in by_n.items()]
        lines.append((f"{conf} IPv{ipv} {mode}", [(n, v / 1e9 if v else v) for n, v in pts],
                      "--" if conf == "no firewall" else "-"))
    throughput_plot = plot_div(xy_plot(lines, "parallel TCP streams", "total throughput [Gbit/s]",
                                       "Total throughput vs parallel streams (median of repetitions)", xlog=True))
    rows = []
    for (mode, ipv, conf), by_n in sorted(groups.items(), key=lambda kv: str(kv[0])):
        for n, ts in sorted(by_n.items()):
            g = lambda k: med(x.metric(k) for x in ts)  # noqa: E731
            rows.append([esc(conf), f"IPv{ipv} {esc(mode)}", n, len(ts), fmt(g("throughput_bps"), 1e-9, 3),
                         fmt(g("bytes"), 1e-6, 0), fmt(g("completion_s"), 1, 1), fmt(g("duration_s"), 1, 1),
                         fmt(g("fairness_jain"), 1, 3), fmt(g("stream_min_bps"), 1e-6, 2),
                         fmt(g("stream_max_bps"), 1e-6, 2), fmt(g("stream_idle"), 1, 0),
                         fmt(g("retransmits"), 1, 0), fmt(g("baseline_bps"), 1e-9, 3),
                         fmt(g("first_probe_bps"), 1e-9, 3),
                         "yes" if all(x.metric("recovered") for x in ts) else "no",
                         fmt(g("recovery_s"), 1, 0)])
    # probes as a time series (ratio to baseline), repetition 1 of each configuration
    probe_lines = []
    for t in sorted(ok, key=lambda t: (str(_key(t)), t.streams or 0)):
        if t.repetition != 1 or (t.streams or 1) < 2:
            continue
        probes = (t.extra or {}).get("probes") or []
        samples = [{"t_s": p["t_after_s"], "ratio": p.get("ratio_to_baseline")} for p in probes]
        probe_lines.append((f"{config_label(t)} x{t.streams} IPv{t.ip_version}", samples))
    probe_plot = plot_div(series_plot(probe_lines, "ratio", "probe / baseline [%]", 100.0,
                                      "Single-stream probes after the multi-stream run (repetition 1)",
                                      xlabel="seconds after the multi-stream run ended"))
    # the whole trial over time (baseline, multi-stream run, probes) from the server's link counter
    big = max((int(t.streams or 1) for t in ok), default=1)
    ts_lines = [(f"{config_label(t)} IPv{t.ip_version}", (t.extra or {}).get("link_series") or [])
                for t in ok if t.repetition == 1 and int(t.streams or 1) == big]
    link_plot = plot_div(series_plot(ts_lines, "server_rx_bps", "server link receive rate [Gbit/s]", 1e-9,
                                     f"{big}-stream trials over time: baseline probe, the run, recovery probes "
                                     f"(server link counter, repetition 1)"))
    return str(templating.render("section_parallel.html.j2", rows=rows, throughput_plot=raw(throughput_plot),
                                 probe_plot=raw(probe_plot), link_plot=raw(link_plot),
                                 missing=sum(1 for t in trials if t.error)))


register(Section(kind="parallel", title="Parallel TCP streams", render=render, order=20))
