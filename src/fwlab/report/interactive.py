"""Interactive plots (plotly) beside the static SVG ones: hover values, zoom, series toggled from
the legend.

Owns: the plotly figures of the report's main plots, built from the same curves and the same
medians the SVG plots and summary.csv show, and the page's one script that draws them. The static
SVG stays in the page (print, a browser without scripts, byte-identical rebuilds): each plot is a
``<figure>`` holding the SVG, an empty ``div.iplot`` and the figure as JSON; the script swaps the
SVG for the live plot on screen. plotly.js is not fetched from a CDN: it is written beside the
report (``plotly.min.js``, from the installed plotly package), so the page opens without network.
Ids are given here, never drawn at random, so two builds of one record are the same bytes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from markupsafe import Markup

from fwlab.report.plots import AT_LEAST, UNITS
from fwlab.results.curves import Curve

#: the file beside report.html holding plotly.js (the page loads it by this relative name)
PLOTLY_JS = "plotly.min.js"

#: drawing options of every live plot: no plotly logo, no "edit in chart studio" link
CONFIG = {"displaylogo": False, "responsive": True, "toImageButtonOptions": {"format": "svg"}}


def plotly_js_source() -> Path:
    """The plotly.min.js the installed plotly package carries (plotly.js, offline)."""
    import plotly

    return Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"


def plotly_js_version() -> str:
    import plotly

    return str(plotly.__version__)


def _figure_json(traces: list, layout: dict) -> str:
    """A figure as compact JSON through plotly (validated against its schema), the same text for
    the same data; ``</`` written as ``<\\/`` so it cannot end the page's script element."""
    import plotly.graph_objects as go
    import plotly.io as pio

    fig = go.Figure(data=traces, layout={"template": "none", "hovermode": "closest",
                                         "legend": {"orientation": "h", "y": -0.25},
                                         "margin": {"l": 70, "r": 20, "t": 60, "b": 40}, **layout})
    return pio.to_json(fig, validate=True, pretty=False).replace("</", "<\\/")


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
    return _figure_json(traces, {
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
    return _figure_json(traces, {
        "title": {"text": "Rule-set load time (median of the loads of each rule set)"},
        "xaxis": {"title": {"text": "Rules in the rule set"}, "type": "log"},
        "yaxis": {"title": {"text": "Load time, one atomic command [ms]"}, "type": "log"}})


class Plots:
    """The interactive plots of one page, in page order: each gets an id from its name (``ip-``
    and a slug, numbered on repeats), never a random one."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def figure(self, name: str, svg: str, figure_json: str | None) -> Markup:
        """The page's markup for one plot: the static ``svg`` and, when there is a figure, the live
        plot's place and its JSON. ``svg`` is HTML built by the plotting code (fwlab.report.plots)."""
        if not figure_json:
            return Markup(f"<div class='plot'>{svg}</div>")
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "plot"
        ident, k = f"ip-{slug}", 2
        while ident in self.ids:
            ident, k = f"ip-{slug}-{k}", k + 1
        self.ids.append(ident)
        return Markup(f"<figure class='plot iplot-box'><div class='static'>{svg}</div>"
                      f"<div class='iplot' id='{ident}'></div>"
                      f"<script type='application/json' id='{ident}-data'>{figure_json}</script></figure>")

    def script(self) -> Markup:
        """Once per page, after every plot: load plotly.js from beside the page and draw each
        figure; without it (a page copied alone, scripts off) the static SVGs stay."""
        if not self.ids:
            return Markup("")
        config = json.dumps(CONFIG, sort_keys=True)
        return Markup(
            f"<script src='{PLOTLY_JS}'></script>\n<script>(function(){{if(!window.Plotly)return;"
            "document.querySelectorAll('div.iplot').forEach(function(d){"
            "var f=JSON.parse(document.getElementById(d.id+'-data').textContent);"
            "d.parentNode.classList.add('live');"
            f"Plotly.newPlot(d,f.data,f.layout,{config});}});}})();</script>")
