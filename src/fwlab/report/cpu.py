"""The report's "CPU use per role over time" part: client, DUT and server CPU % per second.

Owns: one figure per traffic (one panel per role, one line per configuration: the repetition
whose mean CPU use is the median of its repetitions) and a table of per-trial means (median over
repetitions, with the range), from each trial's ``extra.cpu_series`` (``testbed.cpuseries``).
Roles without a series are named with the recorded reason. Laid out by templates/cpu.html.j2
(with the note under a veth bed's plots). Reads the stored record only.
"""

from __future__ import annotations

import statistics

from markupsafe import Markup

from fwlab.report import templating
from fwlab.report.plots import plt, svg
from fwlab.report.timeseries import config_label, traffic_name
from fwlab.results.trial import TrialRecord, as_records

ROLES = ("client", "dut", "server")


def _mean(samples: list[dict], key: str) -> float | None:
    v = [s[key] for s in samples if s.get(key) is not None]
    return sum(v) / len(v) if v else None


def role_name(cs: dict, role: str) -> str:
    cpu = cs.get(f"{role}_cpu")
    if cpu is None:
        return role if role != "dut" else "DUT"
    if role == "dut":
        return (f"DUT (CPU {cpu} softirq: veth forwarding runs in the sender's softirq)"
                if cs.get("dut_measure") == "softirq" else f"DUT (NAPI, CPU {cpu})")
    return f"{role} (CPU {cpu})"


def _median_rep(trials: list[TrialRecord]) -> dict:
    trials = as_records(trials)
    def load(t):
        s = t.extra["cpu_series"]["samples"]
        return sum(_mean(s, f"{r}_busy_pct") or 0.0 for r in ROLES)
    ordered = sorted(trials, key=load)
    return ordered[(len(ordered) - 1) // 2]


def _figure(title: str, lines: list[tuple[str, dict]]) -> str | None:
    fig, axes = plt.subplots(1, 3, figsize=(11.0, 3.4), dpi=100, sharey=True)
    n = 0
    for ax, role in zip(axes, ROLES):
        names = set()
        for label, cs in lines:
            pts = [(s["t_s"], s[f"{role}_busy_pct"]) for s in cs.get("samples") or []
                   if s.get(f"{role}_busy_pct") is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", markersize=3, linewidth=1, label=label)
                names.add(role_name(cs, role))
                n += 1
        ax.set_title(" / ".join(sorted(names)) or f"{role}: no series", fontsize=8)
        ax.set_xlabel("time in the trial [s]")
        ax.set_ylim(0, 105)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("CPU busy [%]")
    if not n:
        plt.close(fig)
        return None
    axes[-1].legend(fontsize=7, loc="best")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return svg(fig)


def _traffic_key(t: TrialRecord) -> str:
    """What a CPU plot groups by: the traffic and the bed's mode (a routed and a bridge DUT do
    different work; their trials are never pooled), an RFC 2544 search named as one."""
    if t.kind == "rfc2544":
        frame = t.size_bytes or t.metric("frame_size")
        return f"IPv{t.ip_version} RFC 2544 search" + (f", {frame} B frames" if frame else "") + f" ({t.mode})"
    return f"{traffic_name(t)} ({t.mode})"


def render(trials: list[TrialRecord]) -> str:
    trials = as_records(trials)
    groups: dict[str, dict[str, list[dict]]] = {}
    missing: dict[str, set[str]] = {}
    for t in trials:
        cs = (t.extra or {}).get("cpu_series")
        if t.error or not cs:
            continue
        for role, why in (cs.get("missing") or {}).items():
            missing.setdefault(role, set()).add(why)
        if cs.get("error"):
            missing.setdefault("all roles", set()).add(cs["error"])
        if cs.get("samples"):
            groups.setdefault(_traffic_key(t), {}).setdefault(config_label(t), []).append(t)
    if not groups and not missing:
        return ""
    plots, rows = [], []
    for tn, by_cfg in groups.items():
        picture = _figure(f"{tn}: CPU busy per role", [(cfg, _median_rep(ts).extra["cpu_series"])
                                                    for cfg, ts in by_cfg.items()])
        if picture:
            plots.append(Markup(picture))  # SVG text from the plotting code
        for cfg, ts in by_cfg.items():
            cells = []
            for role in ROLES:
                means = [m for m in (_mean(t.extra["cpu_series"]["samples"], f"{role}_busy_pct") for t in ts)
                         if m is not None]
                cells.append(f"{statistics.median(means):.0f} ({min(means):.0f}–{max(means):.0f})" if means else "–")
            rows.append([tn, cfg, len(ts), *cells])
    veth = any(ts[0].extra["cpu_series"].get("dut_measure") == "softirq" for by_cfg in groups.values()
               for ts in by_cfg.values())
    return str(templating.render("cpu.html.j2", plots=plots, rows=rows, veth=veth,
                                 missing=[(role, "; ".join(sorted(whys))) for role, whys in sorted(missing.items())]))
