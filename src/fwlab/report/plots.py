"""Plots as inline SVG text (matplotlib, Agg backend), from report.summary curves only.

Owns: how figures look; that they come out the same bytes from the same record is
fwlab.svgplot's (shared with the trend page). Never reads the live run or the record directly.
"""

from __future__ import annotations

from html import escape

from fwlab.results.curves import Curve
from fwlab.svgplot import SVG_HASH_SALT, plt  # noqa: F401  (the report's modules draw with these)
from fwlab.svgplot import figure_svg as svg

UNITS = {"throughput_bps": ("Throughput [Gbit/s]", 1e-9), "rx_pps": ("Received packet rate [kpps]", 1e-3),
         "loss_ratio": ("Loss [%]", 100.0), "transactions_per_s": ("Transactions [1/s]", 1.0),
         "throughput_pps": ("Search throughput [kpps]", 1e-3),
         "throughput_pct_of_max": ("Throughput [% of the bed's maximum load]", 1.0)}


def rate_vs_rules(cs: list[Curve], metric: str, title: str) -> str:
    """One line per backend/layout, median over repetitions, min-max bars; symlog x (0 shown)."""
    label, scale = UNITS[metric]
    fig, ax = plt.subplots(figsize=(8.0, 4.4), dpi=100)
    max_n = 1
    all_ns: set[int] = set()
    for c in cs:
        ns, med, lo, hi = [], [], [], []
        for n, p in c.points.items():
            m = p.median(metric)
            if m is None:
                continue
            mn, mx = p.spread(metric)
            ns.append(n)
            med.append(m * scale)
            lo.append((m - mn) * scale)
            hi.append((mx - m) * scale)
            max_n = max(max_n, n)
            all_ns.add(n)
        if not ns:
            continue
        if c.k["backend"] == "none" and len(ns) == 1:
            ax.axhline(med[0], color="grey", linestyle=":", label=c.label)
            continue
        line = ax.errorbar(ns, med, yerr=[lo, hi], marker="o", markersize=4, capsize=3, label=c.label)
        # every repetition as a small hollow point beside its median, in the curve's colour
        reps = [(n, v * scale) for n, p in c.points.items() for v in p.values.get(metric) or []]
        if reps:
            ax.scatter([n * 1.06 if n else 0.06 for n, _ in reps], [v for _, v in reps], s=9,
                       facecolors="none", edgecolors=line.lines[0].get_color(), linewidths=0.7, alpha=0.8)
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlim(-0.1, max_n * 1.3)
    ticks = sorted(all_ns)
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(n) for n in ticks], rotation=45 if len(ticks) > 6 else 0, fontsize=8)
    ax.minorticks_off()
    ax.set_xlabel("Rules before the matching rule (0 shown at the left; log scale above 1)")
    ax.set_ylabel(label)
    ax.set_ylim(bottom=0)
    reps = max((len(p.values.get(metric) or []) for c in cs for p in c.points.values()), default=0)
    ax.set_title(f"{title}\nmedian of {reps} repetition{'s' if reps != 1 else ''}; bars: min–max; "
                 "hollow points: each repetition", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    if not all_ns:  # no curve has a value of this figure (e.g. every trial failed): no empty axes
        plt.close(fig)
        return f"<p class='note'>{escape(title)}: no value measured (every trial failed or lacks this figure).</p>"
    ax.legend(fontsize=8, loc="best")
    return svg(fig)


def load_time_plot(rows: list[dict]) -> str | None:
    series: dict[str, list[tuple[int, float]]] = {}
    for r in rows:
        if r["rules"] <= 0:
            continue
        name = f"{r['backend']} {r['layout']}" + (" +established" if r["stateful_shortcut"] else "")
        series.setdefault(name, []).append((r["rules"], r["load_s_median"]))
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(8.0, 4.0), dpi=100)
    for name, pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] * 1e3 for p in pts], marker="o", markersize=4, label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("Rules in the rule set")
    ax.set_ylabel("Load time, one atomic command [ms]")
    ax.set_title("Rule-set load time (median of the loads of each rule set)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return svg(fig)


def kernel_memory_plot(rows: list[dict]) -> str | None:
    """Kernel-memory delta of each rule set's load vs its rule count (rows of load_times)."""
    series: dict[str, list[tuple[int, float]]] = {}
    for r in rows:
        mem = r.get("kernel_mem_bytes_median")
        if r["rules"] <= 0 or mem is None or mem <= 0:
            continue
        name = f"{r['backend']} {r['layout']}" + (" +established" if r["stateful_shortcut"] else "")
        series.setdefault(name, []).append((r["rules"], mem / 2**20))
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(8.0, 4.0), dpi=100)
    for name, pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=4, label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("Rules in the rule set")
    ax.set_ylabel("Kernel memory of the load [MiB]")
    ax.set_title("Host kernel memory (Slab + VmallocUsed + Percpu) added by the load")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return svg(fig)


def latency_ccdf(curves: list[tuple[str, list[tuple[float, float]], int]], title: str,
                 quantity: str = "One-way latency", unit_name: str = "packets") -> str:
    """Latency distributions on a log tail: x = latency [µs] (log), y = fraction of packets
    slower than x (log), so p90/p99/p99.9 are the crossings of 10^-1/-2/-3. ``curves``: (label,
    CDF points (latency_ns, fraction <= it) in increasing order, samples)."""
    fig, ax = plt.subplots(figsize=(8.0, 4.4), dpi=100)
    floor = 1.0
    for label, cdf, samples in curves:
        if not cdf:
            continue
        xs = [v / 1e3 for v, _ in cdf]
        ys = [1.0 - f for _, f in cdf]
        if len(ys) > 1:
            ys[-1] = ys[-2]  # the step reaches the maximum (1 - F = 0 there is off a log axis)
        else:
            ys[-1] = 1.0
        ax.step([xs[0]] + xs, [1.0] + ys, where="post", label=f"{label} ({samples} {unit_name})")
        floor = min(floor, 1.0 / max(samples, 1))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(floor / 2, 1.5)
    ticks = [10.0 ** -k for k in range(0, 12) if 10.0 ** -k >= floor / 2]
    names = {1: "p90", 2: "p99", 3: "p99.9", 4: "p99.99", 5: "p99.999"}
    ax.set_yticks(ticks)
    ax.set_yticklabels(["1 (min)" if k == 0 else f"1e-{k} ({names[k]})" if k in names else f"1e-{k}"
                        for k in range(len(ticks))],
                       fontsize=8)
    ax.set_xlabel(f"{quantity} [µs] (log scale)")
    ax.set_ylabel(f"Fraction of {unit_name} slower (log scale)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return svg(fig)
