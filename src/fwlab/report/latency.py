"""Latency distribution figures for the report: trials' HDR histograms (fwlab-engine's
`latency_hdr_b64`, ping's `rtt_hdr_b64`) merged over repetitions per configuration, drawn as
tail CDFs, with the merged percentiles in a table. Used by the engine latency section
(report/html.py), the RFC 2544 section and the round-trip delay section. Reads the record's
trial dicts only."""

from __future__ import annotations

from dataclasses import dataclass, field

from fwlab.errors import RecordError
from fwlab.report import plots
from fwlab.report.markup import esc, fmt, table
from fwlab.stats.latency import distribution, percentile_ns, merge
from fwlab.results.trial import TrialRecord

PERCENTILES = (50.0, 90.0, 99.0, 99.9, 99.99)


@dataclass
class CdfGroup:
    """One figure: configurations (curve label -> histogram texts of their repetitions)."""

    title: str
    quantity: str = "One-way latency"
    unit_name: str = "packets"
    configs: dict[str, list[str]] = field(default_factory=dict)
    order: dict[str, tuple] = field(default_factory=dict)
    unit: str = "ns"

    def add(self, label: str, sort_key: tuple, text: str) -> None:
        self.configs.setdefault(label, []).append(text)
        self.order[label] = sort_key


def config_label(t: TrialRecord) -> tuple[str, tuple]:
    """A trial's configuration (what repetitions share) as a curve label and a sort key."""
    be, lay, sc, n = t.backend, t.layout, bool(t.stateful_shortcut), t.rules
    if be == "none":
        return "none (no firewall)", ("", "", False, -1)
    return f"{be} {lay}" + (" +established" if sc else "") + f", {n} rules", (str(be), str(lay), sc, n or 0)


def render(groups: list[CdfGroup], intro: str) -> str:
    """Figures and percentile tables; empty when no group has a histogram."""
    parts = []
    for g in sorted(groups, key=lambda g: g.title):
        curves, rows = [], []
        for label in sorted(g.configs, key=lambda k: g.order[k]):
            texts = g.configs[label]
            try:
                d = distribution(texts, g.unit)
                h = merge(texts, g.unit)
            except RecordError as exc:
                rows.append([esc(label), len(texts), f"damaged histogram: {esc(exc.one_line())}"]
                            + [""] * (len(PERCENTILES) + 1))
                continue
            if d is None or h is None:
                continue
            curves.append((label, list(d.cdf), d.samples))
            rows.append([esc(label), d.histograms, d.samples]
                        + [fmt(percentile_ns(h, p, g.unit) / 1e3, 1) for p in PERCENTILES]
                        + [fmt(d.max_ns / 1e3, 1)])
        if not rows:
            continue
        if curves:
            parts.append("<div class='plot'>" + plots.latency_ccdf(
                curves, f"{g.title}\n{g.quantity.lower()} CDF tail, repetitions merged (HDR histograms)",
                g.quantity, g.unit_name) + "</div>")
        parts.append(table(["configuration", "histograms", g.unit_name]
                            + [f"p{p:g} [µs]" for p in PERCENTILES] + ["max [µs]"], rows, left=1))
    if not parts:
        return ""
    return intro + "\n".join(parts)


__all__ = ["CdfGroup", "PERCENTILES", "config_label", "render"]
