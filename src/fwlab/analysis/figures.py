"""Figures of a run record: one readable name per configuration + rule count + metric.

Owns: the figure key (e.g. ``"routed nftables linear 1000r ip4 udp 64B rx_pps"``), the choice of
metric per curve (default: the curve's primary metric, as the report uses), and the mapping
``figure key -> list of per-repetition values`` that `fwlab.stats` compares. Grouping of trials
into curves and points is `fwlab.results.curves.curves`; this module only names what it finds.
Never touches: files other than through `RunRecord`, statistics, the test bed or traffic.

Figure key parts, in order (each omitted when listed in ``ignore``): mode, backend, layout,
``+established`` when the stateful shortcut is on, rule count (``1000r``), IP version (``ip4``),
traffic, size (``64B``, ``dflt`` for the tool's default), stream count when > 1 (``x4``), metric.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from fwlab.errors import FwlabError
from fwlab.results.curves import CURVE_FIELDS, METRICS, Curve, curves, primary_metric
from fwlab.results.record import RunRecord

__all__ = [
    "ALL",
    "IGNORABLE",
    "PRIMARY",
    "Figure",
    "figure_key",
    "figure_values",
    "medians",
    "run_figures",
    "trial_figures",
]

PRIMARY = "primary"
"""Metric selection: each curve's primary metric (packet rate for UDP, throughput for TCP)."""
ALL = "all"
"""Metric selection: every metric the record holds (throughput_bps, rx_pps, loss_ratio, ...)."""

#: curve fields a comparison may leave out of the key (e.g. compare a linear run with a set run)
IGNORABLE = tuple(f for f in CURVE_FIELDS if f not in ("traffic",)) + ("rules",)


@dataclass(frozen=True)
class Figure:
    """One figure of one run: a configuration at one rule count, one metric, its repetitions."""

    key: str
    """Readable key, e.g. 'routed nftables linear 1000r ip4 udp 64B rx_pps'."""
    full_key: str
    """The key with no field left out (the noise model's key)."""
    metric: str
    """Metric name as stored in the record, e.g. 'rx_pps' [packets/s], 'throughput_bps' [bit/s]."""
    values: tuple[float, ...]
    """One value per successful repetition, in the metric's stored unit."""
    errors: int
    """Repetitions of this configuration that failed (no metrics) [count]."""


def figure_key(fields: Mapping, rules: int | None, metric: str, ignore: Iterable[str] = ()) -> str:
    """Readable figure key from a curve's fields (`CURVE_FIELDS`), a rule count and a metric."""
    ignore = set(ignore)
    parts: list[str] = []

    def add(name: str, text: str) -> None:
        if name not in ignore:
            parts.append(text)

    add("mode", str(fields.get("mode")))
    add("backend", str(fields.get("backend")))
    add("layout", str(fields.get("layout")))
    if fields.get("stateful_shortcut"):
        add("stateful_shortcut", "+established")
    add("rules", f"{rules}r")
    add("ip_version", f"ip{fields.get('ip_version')}")
    parts.append(str(fields.get("traffic")))
    size = fields.get("size_bytes")
    add("size_bytes", f"{size}B" if size else "dflt")
    streams = fields.get("streams") or 1
    if streams > 1:
        add("streams", f"x{streams}")
    parts.append(metric)
    return " ".join(parts)


def _metrics_for(curve: Curve, metric: str | Sequence[str]) -> list[str]:
    if metric == PRIMARY:
        return [primary_metric(curve)]
    if metric == ALL:
        return list(METRICS)
    names = [metric] if isinstance(metric, str) else list(metric)
    unknown = [m for m in names if m not in METRICS]
    if unknown:
        raise FwlabError(f"unknown metric {', '.join(unknown)}",
                         fix=f"use one of {', '.join(METRICS)}, '{PRIMARY}' or '{ALL}'")
    return names


def _check_ignore(ignore: Iterable[str]) -> set[str]:
    ignore = set(ignore)
    bad = ignore - set(IGNORABLE)
    if bad:
        raise FwlabError(f"cannot leave {', '.join(sorted(bad))} out of a figure key",
                         fix=f"use one of {', '.join(IGNORABLE)}")
    return ignore


def trial_figures(trials: list[dict], metric: str | Sequence[str] = PRIMARY,
                  ignore: Iterable[str] = ()) -> dict[str, Figure]:
    """Figures of a list of stored trials (stream trials only), keyed by their readable key.

    `metric`: `PRIMARY` (default), `ALL`, one metric name or a list of names; a figure appears
    only where the record holds that metric. `ignore`: curve fields to leave out of the key;
    two configurations of one run that become the same key raise `FwlabError`.
    """
    ignore = _check_ignore(ignore)
    out: dict[str, Figure] = {}
    for c in curves(trials):
        for m in _metrics_for(c, metric):
            for n, p in c.points.items():
                values = p.values.get(m)
                if not values and not p.errors:
                    continue
                key = figure_key(c.k, n, m, ignore)
                if key in out:
                    raise FwlabError(f"two configurations of one run share the figure {key!r} once "
                                     f"{', '.join(sorted(ignore))} is left out",
                                     fix="leave out only fields that take one value in each run")
                out[key] = Figure(key=key, full_key=figure_key(c.k, n, m), metric=m,
                                  values=tuple(values or ()), errors=len(p.errors))
    return out


def run_figures(path: Path | str, metric: str | Sequence[str] = PRIMARY,
                ignore: Iterable[str] = ()) -> dict[str, Figure]:
    """Figures of the run record in directory `path` (see `trial_figures`)."""
    return trial_figures(RunRecord.open(path).trials(), metric, ignore)


def figure_values(figs: Mapping[str, Figure]) -> dict[str, list[float]]:
    """`figure key -> per-repetition values`, the input `fwlab.stats.compare_tables` takes."""
    return {k: list(f.values) for k, f in figs.items()}


def medians(figs: Mapping[str, Figure]) -> dict[str, float]:
    """Median over repetitions per figure (figures with no successful repetition are left out)."""
    return {k: float(statistics.median(f.values)) for k, f in figs.items() if f.values}
