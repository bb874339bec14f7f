"""Shared pieces of the stress sections (parallel streams, attack, IPv4 vs IPv6, delay): how a
trial is named in a legend, grouping helpers and the per-second time-series plot.

Owns: looks of the time-series and x-y plots of those sections. Reads trial dicts only.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from fwlab.report.plots import plt, svg
from fwlab.report.summary import size_words
from fwlab.results.trial import TrialRecord


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


def series_plot(lines: list[tuple[str, list[dict]]], key: str, ylabel: str, scale: float, title: str,
                xlabel: str = "time in the trial [s]") -> str | None:
    """One line per (legend, samples); ``key`` read from each sample, x = ``t_s``."""
    fig, ax = plt.subplots(figsize=(8.0, 3.8), dpi=100)
    n = 0
    for name, samples in lines:
        pts = [(s["t_s"], s[key] * scale) for s in samples if s.get(key) is not None and s.get("t_s") is not None]
        if not pts:
            continue
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", markersize=3, linewidth=1, label=name)
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
    return svg(fig)


def xy_plot(lines: list[tuple[str, list[tuple[float, float]], str]], xlabel: str, ylabel: str, title: str,
            xlog: bool = False) -> str | None:
    """One line per (legend, points, linestyle)."""
    fig, ax = plt.subplots(figsize=(8.0, 4.0), dpi=100)
    n = 0
    for name, pts, style in lines:
        pts = sorted(p for p in pts if p[1] is not None)
        if not pts:
            continue
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=4, linestyle=style, label=name)
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
    return svg(fig)


def plot_div(svg: str | None) -> str:
    return f"<div class='plot'>{svg}</div>" if svg else ""
