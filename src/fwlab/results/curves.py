"""Rule-count curves made from a record's trials: ``Point``, ``Curve``, ``curves`` and metric info.

Owns: grouping trials into curves (one per ``CURVE_FIELDS`` key, one point per rule count, the
repetitions' values per metric), the same curve's 0-rule reference, each metric's
display name and unit, and which metric is a curve's primary figure. The report and analysis/
both read these. Reads trial lines only; no statistics beyond a median, no files, no plots.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from fwlab.results.identity import CURVE_FIELDS, config_label, curve_key, traffic_label
from fwlab.results.kinds import CURVE_KINDS
from fwlab.results.trial import TrialRecord, as_records

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
    kernel_mem_bytes: list[int] = field(default_factory=list)  #: per load (see fwlab.dut.memory)
    flags: list[str] = field(default_factory=list)
    digests: set[str] = field(default_factory=set)  #: rule-set digests read back from the kernel

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
    shared_ref: Point | None = None  #: the pooled 0-rule reference when other layouts share it
    shared_with: tuple[str, ...] = ()  #: the layouts whose 0-rule repetitions `shared_ref` pools

    @property
    def k(self) -> dict:
        return dict(zip(CURVE_FIELDS, self.key))

    @property
    def label(self) -> str:
        return config_label(self.k)

    @property
    def traffic_label(self) -> str:
        return traffic_label(self.k, self.kind)

    def reference(self) -> Point | None:
        """The 0-rule reference: pooled over layouts that load the same 0-rule set, else own."""
        return self.shared_ref if self.shared_ref is not None else self.points.get(0)


def curves(trials: Iterable[Mapping | TrialRecord], kinds: tuple[str, ...] = CURVE_KINDS) -> list[Curve]:
    out: dict[tuple, Curve] = {}
    for t in as_records(trials):
        if t.kind not in kinds:
            continue
        key = t.curve_key
        c = out.setdefault(key, Curve(key, kind=str(t.kind)))
        p = c.points.setdefault(t.rules, Point(t.rules))
        if t.error or not t.metrics:
            p.errors.append(t.error or "no metrics")
            continue
        for m in METRICS:
            v = t.metric(m)
            if v is not None:
                p.values.setdefault(m, []).append(float(v))
        if t.rule_load_s is not None and t.repetition is not None:
            p.load_s.append(float(t.rule_load_s))
            mem = (t.extra or {}).get("rule_kernel_mem_bytes")
            if mem is not None:
                p.kernel_mem_bytes.append(int(mem))
        p.flags.extend(t.flag_codes)
        if t.ruleset_digest:
            p.digests.add(t.ruleset_digest)
    for c in out.values():
        c.points = dict(sorted(c.points.items()))
    cs = sorted(out.values(), key=lambda c: tuple(str(x) for x in c.key))
    _share_references(cs)
    return cs


#: layouts whose 0-rule sets are the same rule set (no entries: no list, no set)
SHARED_LAYOUTS = ("linear", "set")


def _share_references(cs: list[Curve]) -> None:
    """Pool the 0-rule points of curves that differ only in layout (linear vs set) into one
    reference, when the rule sets read back from the kernel agree (same digest, or none recorded)."""
    at = CURVE_FIELDS.index("layout")
    groups: dict[tuple, list[Curve]] = {}
    for c in cs:
        if c.k["layout"] in SHARED_LAYOUTS and c.points.get(0) is not None:
            groups.setdefault(c.key[:at] + c.key[at + 1:], []).append(c)
    for group in groups.values():
        if len(group) < 2 or len(set().union(*(c.points[0].digests for c in group))) > 1:
            continue
        pooled = Point(0)
        for c in group:
            p0 = c.points[0]
            for m, vs in p0.values.items():
                pooled.values.setdefault(m, []).extend(vs)
            pooled.errors.extend(p0.errors)
            pooled.flags.extend(p0.flags)
            pooled.digests |= p0.digests
        layouts = tuple(c.k["layout"] for c in group)
        for c in group:
            c.shared_ref, c.shared_with = pooled, layouts


def primary_metric(curve: Curve) -> str:
    """Packet rate for UDP, throughput for TCP streams, transactions/s for request-response."""
    return {"udp": "rx_pps", "engine": "rx_pps", "tcp_rr": "transactions_per_s", "tcp_crr": "transactions_per_s",
            "throughput": "throughput_pps"}.get(
        curve.k["traffic"], "throughput_bps")
