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


AT_LEAST = "max-load-passed"
"""A point's flag when a repetition's search only reached the bed's maximum: its figure is a lower
bound ("≥ x"), drawn as an open upward triangle (fwlab.report.overview states it "≥")."""
AT_LEAST_LEGEND = "≥ (open ▲): only reached the bed's maximum, a lower bound"


def lower_bound_points(c: Curve, metric: str) -> list[int]:
    """The rule counts of `c` whose `metric` is a lower bound: a repetition's search passed the
    bed's maximum load (flag ``max-load-passed``), so the median only says "≥"."""
    return [n for n, p in c.points.items() if p.median(metric) is not None and AT_LEAST in p.flags]


def rate_vs_rules(cs: list[Curve], metric: str, title: str) -> str:
    """One line per backend/layout, median over repetitions, min-max bars; symlog x (0 shown).
    A median that is only a lower bound (`lower_bound_points`) is an open upward triangle, and the
    legend says so."""
    label, scale = UNITS[metric]
    fig, ax = plt.subplots(figsize=(8.0, 4.4), dpi=100)
    max_n = 1
    all_ns: set[int] = set()
    floors = False
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
        up = set(lower_bound_points(c, metric))
        if up:
            floors = True
            ax.scatter([n for n in ns if n in up], [v for n, v in zip(ns, med) if n in up], marker="^", s=70,
                       facecolors="white", edgecolors=line.lines[0].get_color(), linewidths=1.4, zorder=3)
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
    if floors:
        ax.scatter([], [], marker="^", s=70, facecolors="white", edgecolors="black", linewidths=1.4,
                   label=AT_LEAST_LEGEND)
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


def cost_vs_rules(lines: list[tuple[str, list[tuple[int, float, float | None, float | None]]]], title: str,
                  floor_ns: float | None = None) -> str | None:
    """Time per packet inside the firewall against rules: one line per configuration of
    (rules, median [ns], interval low, high); log y (a linear walk spans 3 decades), symlog x
    (0 shown); the probe floor as a dotted line."""
    lines = [(lab, pts) for lab, pts in lines if pts]
    if not lines:
        return None
    fig, ax = plt.subplots(figsize=(8.0, 4.4), dpi=100)
    all_ns: set[int] = set()
    for lab, pts in lines:
        pts = sorted(pts)
        ns = [p[0] for p in pts]
        v = [p[1] for p in pts]
        lo = [max(0.0, p[1] - p[2]) if p[2] is not None else 0.0 for p in pts]
        hi = [max(0.0, p[3] - p[1]) if p[3] is not None else 0.0 for p in pts]
        ax.errorbar(ns, v, yerr=[lo, hi], marker="o", markersize=4, capsize=3, label=lab)
        all_ns.update(ns)
    if floor_ns:
        ax.axhline(floor_ns, color="grey", linestyle=":", label=f"probe floor ({floor_ns:,.0f} ns)")
    ax.set_xscale("symlog", linthresh=1)
    ax.set_yscale("log")
    ticks = sorted(all_ns)
    ax.set_xlim(-0.1, max(max(ticks), 1) * 1.3)
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(n) for n in ticks], fontsize=8)
    ax.minorticks_off()
    ax.set_xlabel("Rules before the matching rule (0 shown at the left; log scale above 1)")
    ax.set_ylabel("Time inside the firewall [ns/packet]")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return svg(fig)
