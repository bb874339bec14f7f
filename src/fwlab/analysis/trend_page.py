"""The trend dashboard: one HTML page (templates/trend.html.j2, plotly.min.js beside it) for a
`fwlab.analysis.trend.Trend`, laid out as FD.io CSIT's trending pages.

Owns: how a trend looks - a dashboard row per figure (status, trend value, last change, change
since the first group, regressions and progressions, regressions first), the table of changes
(figure, run, direction, size with its interval, verdict and reason, jumpavg's evidence in
bits), then one plot per figure in a grid: interactive (plotly: hover a run, zoom, toggle series)
with its static SVG kept for print and byte-identical rebuilds (every repetition as a dot, the
per-run median as a line, each jumpavg group's average as a bar, changes marked), and the list
of runs in time order. Never computes a trend itself.
"""

from __future__ import annotations

import re
from pathlib import Path

from fwlab import webpage
from fwlab.analysis.trend import INCONCLUSIVE, PROGRESSION, REGRESSION, FigureTrend, Trend
from fwlab.files import file_part, write_output
from fwlab.results.curves import METRIC_INFO
from fwlab.svgplot import figure_svg, plt
from fwlab.webpage import Plots, figure_json, write_plotly_js

_COLOURS = {REGRESSION: "#c0392b", "progression": "#1e8449"}


def _unit(metric: str) -> tuple[str, float]:
    _, unit, scale = METRIC_INFO.get(metric, (metric, "", 1.0))
    return unit, scale


def figure_plot(ft: FigureTrend, labels: list[str]) -> str:
    unit, scale = _unit(ft.metric)
    fig, ax = plt.subplots(figsize=(7.5, 2.8), dpi=100)
    xs = list(range(len(ft.run_values)))
    for x, vals in zip(xs, ft.run_values):
        ax.plot([x] * len(vals), [v * scale for v in vals], "o", color="#7f8c8d", markersize=3, alpha=0.7)
    pts = [(x, m * scale) for x, m in zip(xs, ft.medians) if m is not None]
    ax.plot([p[0] for p in pts], [p[1] for p in pts], "-", color="#2c3e50", linewidth=1, label="median of the run")
    for g in ft.groups:
        ax.hlines(g["avg"] * scale, g["first_run"] - 0.3, g["last_run"] + 0.3, colors="#2980b9", linewidth=3,
                  alpha=0.6)
    for c in ft.changes:
        colour = "#7f8c8d" if c.verdict == INCONCLUSIVE else _COLOURS[c.direction]
        ax.axvline(c.run_index - 0.5, color=colour, linestyle="--", linewidth=1.2)
        ax.annotate(f"{c.change_pct:+.1f}%", (c.run_index - 0.5, c.after_avg * scale), color=colour,
                    fontsize=8, xytext=(3, 3), textcoords="offset points")
    ax.set_xticks(xs)
    ax.set_xticklabels(labels, fontsize=7, rotation=30, ha="right")
    ax.set_ylabel(f"{ft.metric} [{unit}]", fontsize=8)
    ax.set_title(ft.figure, fontsize=9)
    ax.grid(True, alpha=0.3)
    return figure_svg(fig)


def _fmt(v, spec: str = ".1f") -> str:
    return "" if v is None else format(v, spec)


def _anchor(figure: str) -> str:
    return "fig-" + (re.sub(r"[^a-z0-9]+", "-", figure.lower()).strip("-") or "figure")


def figure_interactive(ft: FigureTrend, trend: Trend, labels: list[str]) -> str | None:
    """One figure's trend as a plotly figure (the same values as `figure_plot`): the repetitions,
    the per-run median (hover: the run, its identity and fwlab version), the jumpavg groups'
    averages as the trend line, each change a ring at its first run with its size and verdict."""
    import plotly.graph_objects as go

    unit, scale = _unit(ft.metric)
    if not any(m is not None for m in ft.medians):
        return None
    runs = {r.index: r for r in trend.runs}
    reps = [(labels[i], v * scale) for i, vals in enumerate(ft.run_values) for v in vals]
    meds = [(i, m * scale) for i, m in enumerate(ft.medians) if m is not None]
    traces = [
        go.Scatter(x=[x for x, _ in reps], y=[v for _, v in reps], mode="markers", name="repetitions",
                   marker={"color": "#7f8c8d", "size": 5, "opacity": 0.7},
                   hovertemplate=f"%{{x}}: one repetition %{{y:.4g}} {unit}<extra></extra>"),
        go.Scatter(x=[labels[i] for i, _ in meds], y=[v for _, v in meds], mode="lines+markers",
                   name="median of the run", line={"color": "#2c3e50", "width": 1},
                   customdata=[[i, runs[i].identity, str(runs[i].fwlab_version), len(ft.run_values[i])]
                               for i, _ in meds],
                   hovertemplate=(f"run %{{customdata[0]}} (%{{x}}): median %{{y:.4g}} {unit} of "
                                  "%{customdata[3]} repetitions<br>%{customdata[1]}<br>fwlab %{customdata[2]}"
                                  "<extra></extra>")),
    ]
    tx, ty = [], []
    for g in ft.groups:
        tx += [labels[g["first_run"]], labels[g["last_run"]], None]
        ty += [g["avg"] * scale, g["avg"] * scale, None]
    traces.append(go.Scatter(x=tx, y=ty, mode="lines", name="trend (jumpavg group average)",
                             line={"color": "#2980b9", "width": 4}, opacity=0.6, connectgaps=False,
                             hovertemplate=f"group average %{{y:.4g}} {unit}<extra></extra>"))
    for kind in (REGRESSION, PROGRESSION, INCONCLUSIVE):
        cs = [c for c in ft.changes if (c.verdict == INCONCLUSIVE) == (kind == INCONCLUSIVE)
              and (kind == INCONCLUSIVE or c.direction == kind)]
        if not cs:
            continue
        colour = "#7f8c8d" if kind == INCONCLUSIVE else _COLOURS[kind]
        traces.append(go.Scatter(
            x=[labels[c.run_index] for c in cs], y=[c.after_avg * scale for c in cs], mode="markers",
            name=kind if kind == INCONCLUSIVE else f"{kind}s", marker={"symbol": "circle-open", "size": 16,
                                                                       "color": colour, "line": {"width": 3}},
            customdata=[[f"{c.change_pct:+.1f}", c.direction, c.verdict,
                         f"[{c.change_ci95_pct[0]:+.1f}, {c.change_ci95_pct[1]:+.1f}]" if c.change_ci95_pct else "n/a"]
                        for c in cs],
            hovertemplate=("%{x}: %{customdata[1]} %{customdata[0]} % %{customdata[3]}, %{customdata[2]}"
                           "<extra></extra>")))
    return figure_json(traces, {
        "height": 360,  # the figure's name is the heading above the plot
        "xaxis": {"type": "category", "categoryorder": "array", "categoryarray": labels, "tickangle": -30},
        "yaxis": {"title": {"text": f"{ft.metric} [{unit}]"}},
        "shapes": [{"type": "line", "xref": "x", "yref": "paper", "x0": labels[c.run_index], "x1": labels[c.run_index],
                    "y0": 0, "y1": 1, "line": {"dash": "dash", "width": 1, "color": "#7f8c8d" if c.verdict == INCONCLUSIVE
                                                else _COLOURS[c.direction]}} for c in ft.changes],
        "margin": {"l": 60, "r": 10, "t": 20, "b": 60}})


def _labels(trend: Trend) -> list[str]:
    """Each run's start, minute resolution; numbered where two runs share a minute (the plots'
    categories must be distinct)."""
    out: list[str] = []
    for r in trend.runs:
        label = r.started_utc[:16].replace("T", " ")
        out.append(label if label not in out else f"{label} #{r.index}")
    return out


def render(trend: Trend) -> str:
    """The whole page as HTML text (templates/trend.html.j2)."""
    labels = _labels(trend)
    changes = []
    for c in trend.changes:
        unit, scale = _unit(next(f.metric for f in trend.figures if f.figure == c.figure))
        ci = f"[{c.change_ci95_pct[0]:+.1f}, {c.change_ci95_pct[1]:+.1f}]" if c.change_ci95_pct else "n/a"
        changes.append({"figure": c.figure, "anchor": _anchor(c.figure), "run": f"{c.run_index} ({labels[c.run_index]})",
                        "colour": INCONCLUSIVE if c.verdict == INCONCLUSIVE else c.direction, "direction": c.direction,
                        "averages": f"{c.before_avg * scale:.4g} → {c.after_avg * scale:.4g} {unit}",
                        "change": f"{c.change_pct:+.1f}% {ci}", "verdict": c.verdict, "p": _fmt(c.p_value, ".3g"),
                        "bits": f"{c.bits_saved:.1f}", "reason": c.reason})
    order = {REGRESSION: 0, PROGRESSION: 1}
    dashboard = []
    for f in sorted(trend.figures, key=lambda f: (order.get(f.status, 2), -f.count(REGRESSION), f.figure)):
        unit, scale = _unit(f.metric)
        last = f.changes[-1] if f.changes else None
        dashboard.append({"figure": f.figure, "anchor": _anchor(f.figure), "status": f.status,
                          "trend": "" if f.trend_avg is None else f"{f.trend_avg * scale:.4g} {unit}",
                          "last_change": "–" if last is None else f"{last.change_pct:+.1f}% at run {last.run_index} ({last.verdict})",
                          "long_term": "–" if f.long_term_change_pct is None else f"{f.long_term_change_pct:+.1f}%",
                          "regressions": f.count(REGRESSION), "progressions": f.count(PROGRESSION),
                          "runs": sum(m is not None for m in f.medians)})
    live = Plots()
    plots = [{"figure": f.figure, "anchor": _anchor(f.figure),
              "plot": live.figure(f"trend {f.figure}", figure_plot(f, labels), figure_interactive(f, trend, labels))}
             for f in trend.figures]
    return str(webpage.render("fwlab.analysis", "trend.html.j2", suite=trend.suite, runs=trend.runs,
                              changes=changes, n_significant=sum(c.verdict == "significant" for c in trend.changes),
                              dashboard=dashboard, plots=plots, interactive=webpage.script() if live.ids else "")) + "\n"


def page_path(trend: Trend, out: Path | str | None = None) -> Path:
    """Where the page goes: `out`, or ``trend-<suite>.html`` beside the last run (the suite's name,
    read from a record, checked to be a plain file name first: fwlab.files.file_part)."""
    if out is not None:
        return Path(out)
    name = file_part(trend.suite, "suite name", fix="give the page's file with --out FILE")
    return Path(trend.runs[-1].path).parent / f"trend-{name}.html"


def write_page(trend: Trend, out: Path | str | None = None) -> Path:
    """Render the page and write it safely (fwlab.files.write_output) to `page_path`, with
    plotly.min.js beside it (its interactive plots open offline)."""
    page = render(trend)
    path = write_output(page_path(trend, out), page, "trend page")
    write_plotly_js(page, path.parent, write_output)
    return path
