"""Shared pieces of the stress sections (parallel streams, attack, IPv4 vs IPv6, delay): how a
trial is named in a legend, grouping helpers and the per-second time-series plot.

Owns: looks of the time-series and x-y plots of those sections, each drawn as SVG and as a plotly
figure from the same points (`Plot`). Reads trial dicts only.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from fwlab.report.plots import plt, svg
from fwlab.report.summary import size_words
from fwlab.results.trial import TrialRecord
from fwlab.webpage import figure_json, plot_box


def config_label(t: TrialRecord) -> str:
    if t.backend == "none":
        return "no firewall"
    s = f"{t.backend} {t.layout} {t.rules}r"
    return s + (" +est" if t.stateful_shortcut else "")


def traffic_name(t: TrialRecord) -> str:
    size = f" {size_words(t.size_bytes, t.traffic, t.kind)}" if t.size_bytes else ""
    lb = f" [{t.label}]" if t.label else ""
    d = t.metric("direction")
    dr = f" {d}" if d and not t.label else ""
    return f"{str(t.traffic).upper()}{lb}{dr}{size}"


def med(xs: Iterable) -> float | None:
    v = [float(x) for x in xs if x is not None]
    return statistics.median(v) if v else None


def fmt(v, scale: float = 1.0, digits: int = 2) -> str:
    return "–" if v is None else f"{v * scale:.{digits}f}"


@dataclass(frozen=True)
class Plot:
    """A plot drawn twice from the same points: the static SVG and the plotly figure (JSON,
    fwlab.webpage.figure_json) that replaces it on screen; `plot_div` places both."""

    svg: str
    figure: str | None = None

    def __bool__(self) -> bool:
        return bool(self.svg)


def _live(lines: list[tuple[str, list[tuple[float, float]], str]], xlabel: str, ylabel: str, title: str,
          xlog: bool = False, markers: bool = False) -> str:
    """The plotly figure of an x-y plot: one line per (legend, points, matplotlib line style);
    hover gives each point's values, the legend toggles a line."""
    import plotly.graph_objects as go

    dash = {"-": "solid", "--": "dash", ":": "dot", "-.": "dashdot"}
    traces = [go.Scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], name=name,
                         mode="lines+markers" if markers else "lines",
                         line={"dash": dash.get(style, "solid"), "width": 1.5}, marker={"size": 5 if markers else 3},
                         hovertemplate=f"{name}<br>%{{x:.4g}}: %{{y:.4g}}<extra></extra>")
              for name, pts, style in lines]
    return figure_json(traces, {"title": {"text": title, "font": {"size": 13}},
                                "xaxis": {"title": {"text": xlabel}, **({"type": "log"} if xlog else {})},
                                "yaxis": {"title": {"text": ylabel}, "rangemode": "tozero"}})


def series_plot(lines: list[tuple[str, list[dict]]], key: str, ylabel: str, scale: float, title: str,
                xlabel: str = "time in the trial [s]") -> Plot | None:
    """One line per (legend, samples); ``key`` read from each sample, x = ``t_s``."""
    fig, ax = plt.subplots(figsize=(8.0, 3.8), dpi=100)
    n = 0
    drawn = []
    for name, samples in lines:
        pts = [(s["t_s"], s[key] * scale) for s in samples if s.get(key) is not None and s.get("t_s") is not None]
        if not pts:
            continue
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", markersize=3, linewidth=1, label=name)
        drawn.append((name, pts, "-"))
        n += 1
    if not n:
        plt.close(fig)
        return None
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="best", ncol=2 if n > 6 else 1)
    return Plot(svg(fig), _live(drawn, xlabel, ylabel, title))


def xy_plot(lines: list[tuple[str, list[tuple[float, float]], str]], xlabel: str, ylabel: str, title: str,
            xlog: bool = False) -> Plot | None:
    """One line per (legend, points, linestyle)."""
    fig, ax = plt.subplots(figsize=(8.0, 4.0), dpi=100)
    n = 0
    drawn = []
    for name, pts, style in lines:
        pts = sorted(p for p in pts if p[1] is not None)
        if not pts:
            continue
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=4, linestyle=style, label=name)
        drawn.append((name, pts, style))
        n += 1
    if not n:
        plt.close(fig)
        return None
    if xlog:
        ax.set_xscale("symlog", linthresh=1)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return Plot(svg(fig), _live(drawn, xlabel, ylabel, title, xlog=xlog, markers=True))


def plot_div(plot: Plot | str | None) -> str:
    """A plot's place on the page: a `Plot` as its static SVG with its live figure
    (fwlab.webpage.plot_box), an SVG text as it is; nothing for no plot."""
    if not plot:
        return ""
    if isinstance(plot, Plot):
        return str(plot_box(plot.svg, plot.figure))
    return f"<div class='plot'>{plot}</div>"
