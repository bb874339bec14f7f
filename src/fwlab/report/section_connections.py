"""Report section for ``connections`` trials: connection setup rate against rule count, and
concurrent connection capacity against the DUT's connection-table size.

Owns: grouping the trials (test = rate / capacity from ``extra.test``), their tables with
repetitions and intervals, and two plots; laid out by templates/section_connections.html.j2.
Reads the record only.
"""

from __future__ import annotations

from collections import defaultdict

from fwlab.report import templating
from fwlab.report.markup import esc as _esc
from fwlab.report.markup import raw
from fwlab.report.plots import plt, svg
from fwlab.report.sections import Section, register
from fwlab.stats import summarize
from fwlab.results.trial import TrialRecord, as_records


def _curve(t: TrialRecord) -> str:
    sc = "shortcut" if t.stateful_shortcut else "no shortcut"
    return f"{t.mode} {t.backend} {t.layout} {sc} ip{t.ip_version}"


def _stat(values: list[float]) -> tuple[str, str, str, int]:
    """median, min-max, 95 % CI of the mean, n as text."""
    if not values:
        return "–", "–", "–", 0
    s = summarize(values)
    ci = f"{s.ci_mean[0]:.0f} – {s.ci_mean[1]:.0f}" if s.ci_mean else "–"
    return f"{s.median:.0f}", f"{s.min:.0f} – {s.max:.0f}", ci, s.n


def _metric(t: TrialRecord, key: str):
    return (t.metrics or {}).get(key)


def _rate_part(trials: list[TrialRecord]) -> dict:
    """The rate part's table rows and plot (SVG, or None)."""
    trials = as_records(trials)
    groups: dict[str, dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for t in trials:
        groups[_curve(t)][t.rules].append(t)
    fig, ax = plt.subplots(figsize=(8.0, 4.4), dpi=100)
    rows = []
    all_n: set[int] = set()
    for name in sorted(groups):
        xs, med, lo, hi = [], [], [], []
        for n in sorted(groups[name]):
            ts = groups[name][n]
            vals = [float(v) for t in ts if (v := _metric(t, "conn_rate_cps")) is not None]
            failed = sum(1 for t in ts if t.error or _metric(t, "conn_rate_cps") is None)
            m, rng, ci, k = _stat(vals)
            flags = sorted({c for t in ts for c in t.flag_codes})
            p50 = [float(v) for t in ts if (v := _metric(t, "connect_p50_us")) is not None]
            rows.append([_esc(name), n, m, rng, ci, k, failed,
                         f"{sorted(p50)[len(p50) // 2]:.0f}" if p50 else "–", _esc(", ".join(flags))])
            if vals:
                s = summarize(vals)
                xs.append(n)
                med.append(s.median)
                lo.append(s.median - s.min)
                hi.append(s.max - s.median)
                all_n.add(n)
        if xs:
            ax.errorbar(xs, med, yerr=[lo, hi], marker="o", markersize=4, capsize=3, label=name)
    plot = None
    if all_n:
        ax.set_xscale("symlog", linthresh=1)
        ticks = sorted(all_n)
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(n) for n in ticks], fontsize=8)
        ax.minorticks_off()
        ax.set_xlabel("Rules before the matching rule (log scale above 1)")
        ax.set_ylabel("Connections / s (≤ 0.001 % failed)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title("Connection rate vs rule count (median, min-max bars)")
        plot = raw(svg(fig))
    else:
        plt.close(fig)
    return {"rows": rows, "plot": plot}


def _capacity_part(trials: list[TrialRecord]) -> dict:
    """The capacity part's table rows and plot (SVG, or None)."""
    trials = as_records(trials)
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for t in trials:
        groups[(_curve(t), t.rules, t.label or "",
                _metric(t, "conntrack_max"))].append(t)
    rows = []
    by_mode: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for (name, n, label, ct_max), ts in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][3] or 0)):
        vals = [float(v) for t in ts if (v := _metric(t, "capacity_connections")) is not None]
        m, rng, ci, k = _stat(vals)
        held = [v for t in ts if (v := _metric(t, "conntrack_count_held")) is not None]
        causes = sorted({c for t in ts if (c := _metric(t, "limit_cause"))})
        flags = sorted({c for t in ts for c in t.flag_codes})
        host = [h for t in ts if (h := _metric(t, "host_sysctls"))]
        rows.append([_esc(name), n, _esc(label or "–"), ct_max if ct_max is not None else "–",
                     _metric(ts[0], "conntrack_buckets") or "–", m, rng, ci, k,
                     max(held) if held else "–", _esc("; ".join(causes) or "–"),
                     _esc(", ".join(flags)) + (" (host sysctl changed)" if host else "")])
        for v in vals:
            if ct_max:
                by_mode[name].append((float(ct_max), v))
    plot = None
    if any(len(v) for v in by_mode.values()):
        fig, ax = plt.subplots(figsize=(7.0, 4.4), dpi=100)
        top = 0.0
        for name, pts in sorted(by_mode.items()):
            xs, ys = zip(*sorted(pts))
            ax.plot(xs, ys, marker="o", linestyle="-", label=name)
            top = max(top, max(xs), max(ys))
        ax.plot([0, top], [0, top], color="grey", linestyle=":", label="capacity = nf_conntrack_max")
        ax.set_xlabel("nf_conntrack_max (connection-table limit)")
        ax.set_ylabel("Connections held with no failure")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title("Capacity vs connection-table size")
        plot = raw(svg(fig))
    return {"rows": rows, "plot": plot}


def render(run: dict, trials: list[TrialRecord]) -> str | None:
    trials = as_records(trials)
    rate = [t for t in trials if (t.extra or {}).get("test") == "rate" or t.traffic == "conn_rate"]
    cap = [t for t in trials if (t.extra or {}).get("test") == "capacity"
           or t.traffic == "conn_capacity"]
    if not rate and not cap:
        return None
    return str(templating.render("section_connections.html.j2", rate=_rate_part(rate) if rate else None,
                                 capacity=_capacity_part(cap) if cap else None,
                                 failed=[f"{t.trial_id}: {t.error}" for t in trials if t.error][:10]))


register(Section(kind="connections", title="Connections", render=render, order=30))
