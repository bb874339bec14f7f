"""Report section for kind ``attack``: legitimate traffic measured while the attacker namespace
floods the DUT (seed 000): throughput against attack rate, firewall off (backend none) vs on per
rule count, and the flood's packets as counted — offered by the engine, received on the DUT's
attacker-side link, dropped by the DUT's rules, and reaching the server's ingress. Laid out by
templates/section_attack.html.j2."""

from __future__ import annotations

from fwlab.report import templating
from fwlab.report.markup import esc, raw
from fwlab.report.sections import Section, register
from fwlab.report.timeseries import config_label, fmt, med, plot_div, series_plot, xy_plot
from fwlab.results.trial import TrialRecord, as_records


def _flood(t: TrialRecord) -> dict:
    return t.background or {}


def render(run: dict, trials: list[TrialRecord]) -> str | None:
    trials = as_records(trials)
    if not trials:
        return None
    ok = [t for t in trials if t.metrics]
    rate_plots = []
    kinds = sorted({(_flood(t).get("kind"), t.traffic, t.ip_version) for t in ok}, key=str)
    for fk, traffic, ipv in kinds:
        sel = [t for t in ok if _flood(t).get("kind") == fk and t.traffic == traffic
               and t.ip_version == ipv]
        # the rate-0 references of any flood kind belong to every kind's plot
        refs = [t for t in ok if not _flood(t).get("rate_pps") and t.traffic == traffic
                and t.ip_version == ipv]
        by_conf: dict[str, dict[float, list[float]]] = {}
        for t in sel + refs:
            rate = float(_flood(t).get("rate_pps") or 0)
            by_conf.setdefault(config_label(t), {}).setdefault(rate, []).append(t.metric("throughput_bps"))
        lines = [(c, [(r, (med(v) or 0) / 1e9) for r, v in pts.items()], "--" if c == "no firewall" else "-")
                 for c, pts in sorted(by_conf.items())]
        rate_plots.append(raw(plot_div(xy_plot(lines, f"{fk} rate [packets/s]", f"{str(traffic).upper()} throughput [Gbit/s]",
                                               f"IPv{ipv} {str(traffic).upper()} throughput vs {fk} rate (median)"))))
    rows = []
    groups: dict[tuple, list[dict]] = {}
    for t in ok:
        f = _flood(t)
        groups.setdefault((t.ip_version, str(t.traffic), config_label(t), t.rules or 0,
                           f.get("kind") if f.get("rate_pps") else "none", float(f.get("rate_pps") or 0)), []).append(t)
    for (ipv, traffic, conf, n, fk, rate), ts in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] != "no firewall", kv[0][3], kv[0][4], kv[0][5])):
        g = lambda k: med(x.metric(k) for x in ts)  # noqa: E731
        ref = groups.get((ipv, traffic, conf, n, "none", 0.0))
        base = med(x.metric("throughput_bps") for x in ref) if ref else None
        thr = g("throughput_bps")
        rows.append([esc(conf), f"IPv{ipv} {esc(traffic.upper())}", esc(fk), f"{rate:g}", len(ts), fmt(thr, 1e-9, 3),
                     fmt(100 * thr / base if thr is not None and base else None, 1, 0),
                     fmt(g("flood_offered_pps"), 1, 0), fmt(g("flood_offered_packets"), 1, 0),
                     fmt(g("flood_dut_rx_packets"), 1, 0), fmt(g("flood_dut_rule_drops"), 1, 0),
                     fmt(g("flood_server_packets"), 1, 0)])
    # the flood's arrival at the DUT over time next to the legitimate receive rate (one trial)
    show = [t for t in ok if (_flood(t).get("rate_pps") or 0) > 0 and t.repetition == 1][:6]
    lines = []
    for t in show:
        ls = (t.extra or {}).get("link_series") or []
        lines.append((f"{config_label(t)} {_flood(t).get('kind')} {(_flood(t).get('rate_pps') or 0):g} pps: flood at DUT",
                      [{"t_s": r["t_s"], "v": r.get("dut_atk_rx_pps")} for r in ls]))
        lines.append((f"{config_label(t)}: legit at server",
                      [{"t_s": r["t_s"], "v": r.get("server_rx_pps")} for r in ls]))
    per_second = plot_div(series_plot(lines, "v", "packets/s [k]", 1e-3,
                                      "Per second: flood arriving at the DUT and legitimate packets reaching the server"))
    return str(templating.render("section_attack.html.j2", rate_plots=rate_plots, rows=rows,
                                 series_plot=raw(per_second)))


register(Section(kind="attack", title="Under attack", render=render, order=25))
