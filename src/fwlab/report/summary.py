"""Condensing a record's stream trials into per-configuration figures.

Owns: grouping repetitions, the shared 0-rule reference (curves that differ only in layout load
the same rule set at 0 rules, so their 0-rule repetitions are pooled into one reference and
their spread is the run's noise floor), the ratio to that reference with its Fieller interval
(seed 001 Table 1), the per-rule cost fit of linear layouts and rule load times. Reads only the
stored record.
"""

from __future__ import annotations

import csv
import io
import statistics
from dataclasses import dataclass, field

from fwlab.stats import RatioInterval, compare_figure, fit_per_packet_cost, ratio_interval, summarize
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

    def reference(self) -> Point | None:
        """The 0-rule reference: pooled over layouts that load the same 0-rule set, else own."""
        return self.shared_ref if self.shared_ref is not None else self.points.get(0)

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
        """Median at `rules` as % of the 0-rule reference's median."""
        base = self.reference()
        p = self.points.get(rules)
        if base is None or p is None:
            return None
        b, v = base.median(metric), p.median(metric)
        if not b or v is None:
            return None
        return 100.0 * v / b

    def ratio_to_zero(self, metric: str, rules: int) -> RatioInterval | None:
        """Mean at `rules` over the 0-rule reference's mean, with the Fieller interval (noise of
        both); None where either has no values."""
        base = self.reference()
        p = self.points.get(rules)
        if base is None or p is None or not p.values.get(metric) or not base.values.get(metric):
            return None
        return ratio_interval(p.values[metric], base.values[metric])


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
        if t.get("ruleset_digest"):
            p.digests.add(t["ruleset_digest"])
    for c in out.values():
        c.points = dict(sorted(c.points.items()))
    cs = sorted(out.values(), key=lambda c: tuple(str(x) for x in c.key))
    _share_references(cs)
    return cs


_LAYOUT = CURVE_FIELDS.index("layout")
#: layouts whose 0-rule sets are the same rule set (no entries: no list, no set)
SHARED_LAYOUTS = ("linear", "set")


def _share_references(cs: list[Curve]) -> None:
    """Pool the 0-rule points of curves that differ only in layout (linear vs set) into one
    reference, when the rule sets read back from the kernel agree (same digest, or none recorded)."""
    groups: dict[tuple, list[Curve]] = {}
    for c in cs:
        if c.k["layout"] in SHARED_LAYOUTS and c.points.get(0) is not None:
            groups.setdefault(c.key[:_LAYOUT] + c.key[_LAYOUT + 1:], []).append(c)
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


def noise_floor(cs: list[Curve]) -> list[dict]:
    """Per shared 0-rule reference: each layout's 0-rule mean of the primary metric, their spread
    (max - min) as % of the pooled mean, and the Welch test between the first two layouts. Identical
    configurations measured apart: the spread is the run's noise floor."""
    rows, seen = [], set()
    for c in cs:
        if c.shared_ref is None or id(c.shared_ref) in seen:
            continue
        seen.add(id(c.shared_ref))
        m = primary_metric(c)
        group = [o for o in cs if o.shared_ref is c.shared_ref]
        means = {o.k["layout"]: statistics.fmean(o.points[0].values[m])
                 for o in group if o.points[0].values.get(m)}
        pooled = c.shared_ref.values.get(m) or []
        if len(means) < 2 or not pooled:
            continue
        mean = statistics.fmean(pooled)
        a, b = group[0].points[0].values.get(m) or [], group[1].points[0].values.get(m) or []
        cmp = compare_figure("0-rule", a, b)
        rows.append({"traffic": c.traffic_label, "backend": c.k["backend"], "metric": m,
                     "layouts": list(means), "means": means, "n": len(pooled),
                     "spread_pct": 100.0 * (max(means.values()) - min(means.values())) / mean if mean else None,
                     "p_value": cmp.p_value, "verdict": cmp.verdict})
    return rows


def primary_metric(curve: Curve) -> str:
    """Packet rate for UDP, throughput for TCP streams, transactions/s for request-response."""
    return {"udp": "rx_pps", "engine": "rx_pps", "tcp_rr": "transactions_per_s", "tcp_crr": "transactions_per_s",
            "throughput": "throughput_pps"}.get(
        curve.k["traffic"], "throughput_bps")


def per_rule_costs(cs: list[Curve]) -> list[dict]:
    """Fit 1/rate = a + b N on every linear curve with >= 2 rule counts (rate in packets/s), the
    0-rule point being the shared reference; with the slope's 95 % t interval."""
    rows = []
    for c in cs:
        if c.k["layout"] != "linear" or c.k["backend"] == "none":
            continue
        # the 0-rule point is the shared reference (pooled over layouts with the same 0-rule set)
        pts = [(n, v) for n, p in c.points.items() for v in ((c.reference() if n == 0 else p) or p).values.get(
            "rx_pps", []) if v > 0]
        if len({n for n, _ in pts}) < 2:
            continue
        f = fit_per_packet_cost(pts)
        rows.append({"curve": c.label, "traffic": c.traffic_label, "per_rule_ns": f.per_rule_ns,
                     "per_rule_ns_ci": f.per_rule_ns_ci, "base_ns": f.base_ns, "r_squared": f.r_squared,
                     "points": f.n_points})
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
                r = c.ratio_to_zero(m, n)   # mean ratio with its Fieller interval
                row[f"{m}_pct_of_0_rules_ci95_low"], row[f"{m}_pct_of_0_rules_ci95_high"] = (
                    (100.0 * r.low, 100.0 * r.high) if r is not None and r.has_interval else (None, None))
            prim = p.values.get(primary_metric(c)) or []
            row["quality_flags"] = ";".join(sorted(set(p.flags) | {f.code for f in flag_cv(prim)}))
            rows.append(row)
    return rows


#: per-metric statistics in summary.csv, in column order
SUMMARY_STATS = ("median", "mean", "min", "max", "cv", "ci95_low", "ci95_high", "pct_of_0_rules",
                 "pct_of_0_rules_ci95_low", "pct_of_0_rules_ci95_high")
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
