"""Interactive plots (plotly) beside the static SVG ones: hover values, zoom, series toggled from
the legend.

Owns: the plotly figures of the report's main plots, built from the same curves and the same
medians the SVG plots and summary.csv show. How a page holds them (the static SVG kept, ids,
plotly.js beside the page, offline) is fwlab.webpage's.
"""

from __future__ import annotations

from fwlab.report.plots import AT_LEAST, UNITS
from fwlab.results.curves import Curve
from fwlab.webpage import figure_json


def rate_figure(cs: list[Curve], metric: str, title: str) -> str | None:
    """The rate-vs-rule-count plot (``plots.rate_vs_rules``) as a plotly figure: per configuration
    its medians with min–max bars and every repetition (one legend entry, toggled together).
    Rule counts are categories (0 included, evenly spaced); None when nothing was measured."""
    import plotly.graph_objects as go

    label, scale = UNITS[metric]
    unit = label[label.rfind("[") + 1:-1] if label.endswith("]") else ""
    ns = sorted({n for c in cs for n, p in c.points.items() if p.median(metric) is not None})
    if not ns:
        return None
    from plotly.colors import qualitative

    traces = []
    for c in cs:
        pts = sorted((n, p) for n, p in c.points.items() if p.median(metric) is not None)
        if not pts:
            continue
        group = f"g{len(traces)}"
        colour = qualitative.Plotly[len({t.legendgroup for t in traces}) % len(qualitative.Plotly)]
        if c.k["backend"] == "none" and len(pts) == 1:
            v = pts[0][1].median(metric) * scale
            traces.append(go.Scatter(x=[str(n) for n in ns], y=[v] * len(ns), mode="lines", name=c.label,
                                     line={"dash": "dot", "color": "grey"}, legendgroup=group,
                                     hovertemplate=f"{c.label}: %{{y:.4g}} {unit} (0 rules)<extra></extra>"))
            continue
        med = [p.median(metric) * scale for _, p in pts]
        lo = [(p.median(metric) - p.spread(metric)[0]) * scale for _, p in pts]
        hi = [(p.spread(metric)[1] - p.median(metric)) * scale for _, p in pts]
        reps = [len(p.values.get(metric) or []) for _, p in pts]
        floor = ["≥ " if AT_LEAST in p.flags else "" for _, p in pts]
        traces.append(go.Scatter(
            x=[str(n) for n, _ in pts], y=med, mode="lines+markers", name=c.label, legendgroup=group,
            line={"color": colour},
            error_y={"type": "data", "symmetric": False, "array": hi, "arrayminus": lo},
            customdata=[[r, f] for r, f in zip(reps, floor)],
            hovertemplate=(f"{c.label}<br>%{{x}} rules: %{{customdata[1]}}%{{y:.4g}} {unit}"
                           "<br>median of %{customdata[0]} repetitions<extra></extra>")))
        every = [(str(n), v * scale) for n, p in pts for v in p.values.get(metric) or []]
        if every:
            traces.append(go.Scatter(
                x=[x for x, _ in every], y=[v for _, v in every], mode="markers", name=f"{c.label}: repetitions",
                legendgroup=group, showlegend=False, marker={"symbol": "circle-open", "size": 6, "color": colour},
                hovertemplate=f"{c.label}<br>%{{x}} rules: one repetition %{{y:.4g}} {unit}<extra></extra>"))
    return figure_json(traces, {
        "title": {"text": f"{title}<br><sup>median, bars min–max, hollow points each repetition; "
                          "click a legend entry to hide or show it</sup>"},
        "xaxis": {"title": {"text": "Rules before the matching rule"}, "type": "category",
                  "categoryorder": "array", "categoryarray": [str(n) for n in ns]},
        "yaxis": {"title": {"text": label}, "rangemode": "tozero"}})


def load_time_figure(rows: list[dict]) -> str | None:
    """Rule-set load time vs rule count (``plots.load_time_plot``), log-log, one line per layout."""
    import plotly.graph_objects as go

    series: dict[str, list[tuple[int, float, int]]] = {}
    for r in rows:
        if r["rules"] <= 0:
            continue
        name = f"{r['backend']} {r['layout']}" + (" +established" if r["stateful_shortcut"] else "")
        series.setdefault(name, []).append((r["rules"], r["load_s_median"] * 1e3, r["loads"]))
    if not series:
        return None
    traces = [go.Scatter(x=[p[0] for p in sorted(pts)], y=[p[1] for p in sorted(pts)], mode="lines+markers",
                         name=name, customdata=[p[2] for p in sorted(pts)],
                         hovertemplate=f"{name}<br>%{{x}} rules: %{{y:.4g}} ms<br>median of %{{customdata}} loads"
                                       "<extra></extra>")
              for name, pts in sorted(series.items())]
    return figure_json(traces, {
        "title": {"text": "Rule-set load time (median of the loads of each rule set)"},
        "xaxis": {"title": {"text": "Rules in the rule set"}, "type": "log"},
        "yaxis": {"title": {"text": "Load time, one atomic command [ms]"}, "type": "log"}})
