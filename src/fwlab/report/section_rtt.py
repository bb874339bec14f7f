"""Report section for kind ``rtt`` (ping through the DUT): round-trip percentiles, IPDV and RFC
3550 jitter per IP version and configuration, and the per-second median RTT; laid out by
templates/section_rtt.html.j2."""

from __future__ import annotations

from fwlab.report import latency, templating
from fwlab.report.markup import esc, raw
from fwlab.report.sections import Section, register
from fwlab.report.timeseries import config_label, fmt, med, plot_div, series_plot
from fwlab.results.trial import TrialRecord, as_records


def render(run: dict, trials: list[TrialRecord]) -> str | None:
    trials = as_records(trials)
    ok = [t for t in trials if t.metrics]
    if not trials:
        return None
    groups: dict[tuple, list[dict]] = {}
    for t in ok:
        groups.setdefault((t.mode, config_label(t), t.ip_version), []).append(t)
    rows = []
    for (mode, conf, ipv), ts in sorted(groups.items(), key=str):
        g = lambda k: med(x.metric(k) for x in ts)  # noqa: E731
        rows.append([esc(conf), esc(mode), f"IPv{ipv}", len(ts), fmt(g("rtt_min_ms"), 1e3, 0), fmt(g("rtt_p50_ms"), 1e3, 0),
                     fmt(g("rtt_p90_ms"), 1e3, 0), fmt(g("rtt_p99_ms"), 1e3, 0), fmt(g("rtt_max_ms"), 1e3, 0),
                     fmt(g("rtt_ipdv_ms"), 1e3, 1), fmt(g("rtt_jitter_ms"), 1e3, 1), fmt(g("loss_ratio"), 100, 2),
                     fmt(g("rtt_samples"), 1, 0)])
    lines = [(f"{config_label(t)} IPv{t.ip_version}", t.series or [])
             for t in sorted(ok, key=lambda t: (config_label(t), t.ip_version)) if t.repetition == 1]
    plot = plot_div(series_plot(lines, "rtt_p50_ms", "median RTT per second [µs]", 1e3,
                                "Round-trip time per second (repetition 1)"))
    return str(templating.render("section_rtt.html.j2", rows=rows, plot=raw(plot), cdfs=raw(_rtt_cdfs(ok))))


def _rtt_cdfs(trials: list[TrialRecord]) -> str:
    """Every reply's RTT (``rtt_hdr_b64``), repetitions merged: one CDF per configuration."""
    trials = as_records(trials)
    groups: dict[tuple, latency.CdfGroup] = {}
    for t in trials:
        if not t.metric("rtt_hdr_b64"):
            continue
        key = (t.mode, t.ip_version)
        g = groups.setdefault(key, latency.CdfGroup(title=f"{key[0]}, IPv{key[1]}", quantity="Round-trip time",
                                                    unit_name="replies", unit=t.metric("rtt_hdr_unit", "ns")))
        label, order = latency.config_label(t)
        g.add(label, order, t.metric("rtt_hdr_b64"))
    return latency.render(list(groups.values()), "<h3>Round-trip time distributions</h3><p class='muted'>Every "
                          "reply's RTT; a configuration's repetitions merged (histogram counts added).</p>")


register(Section(kind="rtt", title="Round-trip delay", render=render, order=30))
