"""Condensing a record's stream trials into per-configuration figures.

Owns: grouping repetitions, the ratio to the same run's 0-rule reference (seed 001 Table 1),
the per-rule cost fit of linear layouts and rule load times. Reads only the stored record.
"""

from __future__ import annotations

import csv
import io
import statistics
from dataclasses import dataclass, field

from fwlab.stats import fit_per_packet_cost, summarize
from fwlab.stats.quality import flag_cv

#: fields that identify a curve (everything but the rule count and the repetition)
CURVE_FIELDS = ("mode", "backend", "layout", "stateful_shortcut", "ip_version", "traffic", "size_bytes", "streams",
                "label")
METRICS = ("throughput_bps", "rx_pps", "loss_ratio", "transactions_per_s", "throughput_pps", "throughput_pct_of_max")
#: trial kinds whose figures form rule-count curves (others have report sections of their own)
CURVE_KINDS = ("stream", "rfc2544")
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
        k = self.k
        if k["backend"] == "none":
            return "none (no firewall)"
        if k["layout"] == "none":  # a reference that loads no rules (e.g. xdp-pass)
            return f"{k['backend']} (no rules)"
        s = f"{k['backend']} {k['layout']}"
        if k["stateful_shortcut"]:
            s += " +established"
        if k.get("label"):
            s += f" [{k['label']}]"
        return s

    @property
    def traffic_label(self) -> str:
        k = self.k
        size = f" {size_words(k['size_bytes'], k['traffic'], self.kind)}" if k["size_bytes"] else ""
        streams = f" x{k['streams']}" if k["streams"] > 1 else ""
        label = f" [{k['label']}]" if k.get("label") else ""
        return f"IPv{k['ip_version']} {k['traffic'].upper()}{label}{size}{streams} ({k['mode']})"

    def pct_of_zero(self, metric: str, rules: int) -> float | None:
        base = self.points.get(0)
        p = self.points.get(rules)
        if base is None or p is None:
            return None
        b, v = base.median(metric), p.median(metric)
        if not b or v is None:
            return None
        return 100.0 * v / b


def size_words(size_bytes, traffic, kind) -> str:
    """'64 B frames' or '64 B payload': fwlab-engine (traffic engine, RFC 2544 and latency kinds)
    sizes Ethernet frames incl. FCS; iperf3, netperf and the other tools size the payload
    (datagram or write)."""
    framed = traffic == "engine" or kind == "rfc2544"
    return f"{size_bytes} B {'frames' if framed else 'payload'}"


def curves(trials: list[dict], kinds: tuple[str, ...] = CURVE_KINDS) -> list[Curve]:
    out: dict[tuple, Curve] = {}
    for t in trials:
        if t.get("kind") not in kinds:
            continue
        key = tuple(t.get(f) for f in CURVE_FIELDS)
        c = out.setdefault(key, Curve(key, kind=t["kind"]))
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


def per_rule_costs(cs: list[Curve]) -> list[dict]:
    """Fit 1/rate = a + b N on every linear curve with >= 2 rule counts (rate in packets/s)."""
    rows = []
    for c in cs:
        if c.k["layout"] != "linear" or c.k["backend"] == "none":
            continue
        pts = [(n, v) for n, p in c.points.items() for v in p.values.get("rx_pps", []) if v > 0]
        if len({n for n, _ in pts}) < 2:
            continue
        f = fit_per_packet_cost(pts)
        rows.append({"curve": c.label, "traffic": c.traffic_label, "per_rule_ns": f.per_rule_ns,
                     "base_ns": f.base_ns, "r_squared": f.r_squared, "points": f.n_points})
    return rows


def load_times(cs: list[Curve]) -> list[dict]:
    """Median rule-set load time per backend/layout and rule count (one load serves many trials)."""
    acc: dict[tuple, list[float]] = {}
    for c in cs:
        if c.k["backend"] == "none":
            continue
        for n, p in c.points.items():
            acc.setdefault((c.k["mode"], c.k["backend"], c.k["layout"], c.k["stateful_shortcut"], n), []).extend(p.load_s)
    rows = []
    for (mode, be, lay, sc, n), v in sorted(acc.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        if v:
            rows.append({"mode": mode, "backend": be, "layout": lay, "stateful_shortcut": sc,
                         "rules": n, "load_s_median": statistics.median(v), "loads": len(v)})
    return rows


def summary_rows(cs: list[Curve]) -> list[dict]:
    rows = []
    for c in cs:
        for n, p in c.points.items():
            row = {**c.k, "rules": n, "n": 0, "errors": len(p.errors)}
            for m in METRICS:
                vals = p.values.get(m) or []
                row["n"] = max(row["n"], len(vals))
                if vals:
                    s = summarize(vals)
                    row[f"{m}_median"] = s.median
                    row[f"{m}_mean"] = s.mean
                    row[f"{m}_min"] = s.min
                    row[f"{m}_max"] = s.max
                    row[f"{m}_cv"] = s.cv
                    row[f"{m}_ci95_low"], row[f"{m}_ci95_high"] = s.ci_mean if s.ci_mean else (None, None)
                row[f"{m}_pct_of_0_rules"] = c.pct_of_zero(m, n)
            prim = p.values.get(primary_metric(c)) or []
            row["quality_flags"] = ";".join(sorted(set(p.flags) | {f.code for f in flag_cv(prim)}))
            rows.append(row)
    return rows


#: per-metric statistics in summary.csv, in column order
SUMMARY_STATS = ("median", "mean", "min", "max", "cv", "ci95_low", "ci95_high", "pct_of_0_rules")
#: summary.csv's columns, always all and in this order whatever the suite (docs/record-format.md)
SUMMARY_COLUMNS = (CURVE_FIELDS + ("rules", "n", "errors")
                   + tuple(f"{m}_{s}" for m in METRICS for s in SUMMARY_STATS) + ("quality_flags",))


def summary_csv(cs: list[Curve]) -> str:
    """summary.csv text: `SUMMARY_COLUMNS` in that order, a cell left empty where a configuration
    has no value (e.g. loss for TCP)."""
    rows = summary_rows(cs)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(SUMMARY_COLUMNS))  # a field not listed raises: add it there
    w.writeheader()
    for r in rows:
        w.writerow(r)
    return buf.getvalue()
