"""The trend page: one self-contained HTML file for a `fwlab.analysis.trend.Trend`.

Owns: how a trend looks - a table of changes (figure, run, direction, size with its interval,
verdict and reason, jumpavg's evidence in bits), then one SVG plot per figure (every repetition
as a dot, the per-run median as a line, each jumpavg group's average as a horizontal bar,
changes marked) and the list of runs in time order. Never computes a trend itself.
"""

from __future__ import annotations

import html
from pathlib import Path

from fwlab.analysis.trend import INCONCLUSIVE, REGRESSION, FigureTrend, Trend
from fwlab.files import file_part, write_output
from fwlab.results.curves import METRIC_INFO
from fwlab.svgplot import figure_svg, plt

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


def render(trend: Trend) -> str:
    """The whole page as HTML text."""
    labels = [r.started_utc[:16].replace("T", " ") for r in trend.runs]
    rows = []
    for c in trend.changes:
        unit, scale = _unit(next(f.metric for f in trend.figures if f.figure == c.figure))
        ci = f"[{c.change_ci95_pct[0]:+.1f}, {c.change_ci95_pct[1]:+.1f}]" if c.change_ci95_pct else "n/a"
        colour = "#7f8c8d" if c.verdict == INCONCLUSIVE else _COLOURS[c.direction]
        rows.append(
            f"<tr><td>{html.escape(c.figure)}</td><td>{c.run_index} ({html.escape(labels[c.run_index])})</td>"
            f"<td style='color:{colour}'>{c.direction}</td>"
            f"<td>{c.before_avg * scale:.4g} &rarr; {c.after_avg * scale:.4g} {unit}</td>"
            f"<td>{c.change_pct:+.1f}% {ci}</td><td>{c.verdict}</td><td>{_fmt(c.p_value, '.3g')}</td>"
            f"<td>{c.bits_saved:.1f}</td><td>{html.escape(c.reason)}</td></tr>")
    table = ("<table><tr><th>figure</th><th>from run</th><th>direction</th><th>group averages</th>"
             "<th>change [95% interval]</th><th>verdict</th><th>Welch p</th><th>jumpavg bits</th>"
             "<th>why</th></tr>" + "".join(rows) + "</table>") if rows else \
        "<p>No change: jumpavg keeps every figure's series in one group.</p>"
    runs = "".join(f"<tr><td>{r.index}</td><td>{html.escape(r.started_utc)}</td><td>{html.escape(r.identity)}</td>"
                   f"<td>{html.escape(str(r.fwlab_version))}</td><td>{html.escape(str(r.kernel))}</td>"
                   f"<td>{html.escape(r.path)}</td></tr>" for r in trend.runs)
    plots = "".join(f"<div class='plot'>{figure_plot(f, labels)}</div>" for f in trend.figures)
    n_sig = sum(c.verdict == "significant" for c in trend.changes)
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>fwlab trend: {html.escape(trend.suite)}</title>
<style>body{{font-family:sans-serif;margin:1.5em;max-width:70em}} table{{border-collapse:collapse;font-size:85%}}
td,th{{border:1px solid #ccc;padding:2px 6px;text-align:left}} .plot svg{{max-width:100%;height:auto}}</style>
</head><body>
<h1>Trend of suite {html.escape(trend.suite)} over {len(trend.runs)} runs</h1>
<p>Each figure is the median over a run's repetitions; runs in the order of their recorded start time.
Series are grouped with jumpavg (FD.io CSIT's trending); each boundary between groups is a change, judged
by Welch's t-test (alpha 0.05) of <code>fwlab compare</code> over the per-run medians of both groups
(inconclusive when a group holds one run). {len(trend.changes)} change(s), {n_sig} significant.</p>
<h2>Changes</h2>
{table}
<h2>Figures</h2>
<p>Grey dots: repetitions; line: per-run median; blue bars: jumpavg group averages; dashed: changes
(red regression, green progression, grey inconclusive).</p>
{plots}
<h2>Runs</h2>
<table><tr><th>#</th><th>started (UTC)</th><th>identity</th><th>fwlab</th><th>kernel</th><th>directory</th></tr>
{runs}</table>
</body></html>
"""


def page_path(trend: Trend, out: Path | str | None = None) -> Path:
    """Where the page goes: `out`, or ``trend-<suite>.html`` beside the last run (the suite's name,
    read from a record, checked to be a plain file name first: fwlab.files.file_part)."""
    if out is not None:
        return Path(out)
    name = file_part(trend.suite, "suite name", fix="give the page's file with --out FILE")
    return Path(trend.runs[-1].path).parent / f"trend-{name}.html"


def write_page(trend: Trend, out: Path | str | None = None) -> Path:
    """Render the page and write it safely (fwlab.files.write_output) to `page_path`."""
    return write_output(page_path(trend, out), render(trend), "trend page")
