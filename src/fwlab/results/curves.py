"""Rule-count curves made from a record's trials: ``Point``, ``Curve``, ``curves`` and metric info.

Owns: grouping trials into curves (one per ``CURVE_FIELDS`` key, one point per rule count, the
repetitions' values per metric), the ratio to the same curve's 0-rule point, each metric's
display name and unit, and which metric is a curve's primary figure. The report and analysis/
both read these. Reads trial lines only; no statistics beyond a median, no files, no plots.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from fwlab.results.identity import CURVE_FIELDS, config_label, curve_key, traffic_label
from fwlab.results.kinds import CURVE_KINDS

__all__ = ["CURVE_FIELDS", "CURVE_KINDS", "METRICS", "METRIC_INFO", "Point", "Curve", "curves", "primary_metric"]

METRICS = ("throughput_bps", "rx_pps", "loss_ratio", "transactions_per_s", "throughput_pps", "throughput_pct_of_max")
#: metric -> (what it is, display unit, scale from the stored unit to the display unit)
METRIC_INFO = {"throughput_bps": ("throughput", "Gbit/s", 1e-9), "rx_pps": ("packet rate", "kpps", 1e-3),
               "transactions_per_s": ("transaction rate", "1/s", 1.0), "loss_ratio": ("loss", "%", 100.0),
               "throughput_pps": ("search throughput", "kpps", 1e-3),
               "throughput_pct_of_max": ("throughput", "% of max", 1.0)}


@dataclass
class Point:
    """One rule count of one curve, over its repetitions."""

    rules: int
    values: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    load_s: list[float] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)

    def median(self, metric: str) -> float | None:
        v = self.values.get(metric) or []
        return statistics.median(v) if v else None

    def spread(self, metric: str) -> tuple[float, float] | None:
        v = self.values.get(metric) or []
        return (min(v), max(v)) if v else None


@dataclass
class Curve:
    key: tuple
    points: dict[int, Point] = field(default_factory=dict)
    kind: str = "stream"  #: the trials' record kind (one of CURVE_KINDS)

    @property
    def k(self) -> dict:
        return dict(zip(CURVE_FIELDS, self.key))

    @property
    def label(self) -> str:
        return config_label(self.k)

    @property
    def traffic_label(self) -> str:
        return traffic_label(self.k, self.kind)

    def pct_of_zero(self, metric: str, rules: int) -> float | None:
        base = self.points.get(0)
        p = self.points.get(rules)
        if base is None or p is None:
            return None
        b, v = base.median(metric), p.median(metric)
        if not b or v is None:
            return None
        return 100.0 * v / b


def curves(trials: Iterable[Mapping], kinds: tuple[str, ...] = CURVE_KINDS) -> list[Curve]:
    out: dict[tuple, Curve] = {}
    for t in trials:
        if t.get("kind") not in kinds:
            continue
        key = curve_key(t)
        c = out.setdefault(key, Curve(key, kind=str(t["kind"])))
        p = c.points.setdefault(t["rules"], Point(t["rules"]))
        if t.get("error") or not t.get("metrics"):
            p.errors.append(t.get("error") or "no metrics")
            continue
        for m in METRICS:
            v = t["metrics"].get(m)
            if v is not None:
                p.values.setdefault(m, []).append(float(v))
        if t.get("rule_load_s") is not None and t.get("repetition") is not None:
            p.load_s.append(float(t["rule_load_s"]))
        for f in t.get("flags") or []:
            p.flags.append(f.get("code", "?"))
    for c in out.values():
        c.points = dict(sorted(c.points.items()))
    return sorted(out.values(), key=lambda c: tuple(str(x) for x in c.key))


def primary_metric(curve: Curve) -> str:
    """Packet rate for UDP, throughput for TCP streams, transactions/s for request-response."""
    return {"udp": "rx_pps", "engine": "rx_pps", "tcp_rr": "transactions_per_s", "tcp_crr": "transactions_per_s",
            "throughput": "throughput_pps"}.get(
        curve.k["traffic"], "throughput_bps")
