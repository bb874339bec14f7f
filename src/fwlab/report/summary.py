"""Condensing a record's stream trials into per-configuration figures.

Owns: the per-rule cost fit of linear layouts, rule load times, the noise floor of a shared
0-rule reference and the summary.csv text. Its rows are ``fwlab.stats.run_summary``'s, the one
computed summary every output reads (curves from ``fwlab.results.curves``, which group
repetitions and pool the 0-rule reference of layouts that load the same rule set; the ratio to it
carries its Fieller interval, seed 001 Table 1). Reads only the stored record.
"""

from __future__ import annotations

import csv
import io
import statistics

from fwlab.results.curves import (  # noqa: F401  (re-exported for older import paths)
    CURVE_FIELDS,
    CURVE_KINDS,
    METRIC_INFO,
    METRICS,
    Curve,
    Point,
    curves,
    primary_metric,
)
from fwlab.results.identity import size_words  # noqa: F401  (re-exported for older import paths)
from fwlab.stats import compare_figure, fit_per_packet_cost
from fwlab.stats.run_summary import SUMMARY_COLUMNS, SUMMARY_STATS, summary_rows  # noqa: F401  (re-exported)


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
    """Median rule-set load time per backend/layout and rule count (one load serves many trials),
    beside the median host kernel-memory delta of those loads and the median primary rate of
    the trials that ran on the rule set (per traffic item: ``rates``)."""
    acc: dict[tuple, list[float]] = {}
    mem: dict[tuple, list[int]] = {}
    rates: dict[tuple, dict[str, tuple[str, float]]] = {}
    for c in cs:
        if c.k["backend"] == "none":
            continue
        metric = primary_metric(c)
        for n, p in c.points.items():
            key = (c.k["mode"], c.k["backend"], c.k["layout"], c.k["stateful_shortcut"], n)
            acc.setdefault(key, []).extend(p.load_s)
            mem.setdefault(key, []).extend(p.kernel_mem_bytes)
            med = p.median(metric)
            if med is not None:
                rates.setdefault(key, {})[c.traffic_label] = (metric, med)
    rows = []
    for key, v in sorted(acc.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        mode, be, lay, sc, n = key
        if v:
            m = mem.get(key) or []
            rows.append({"mode": mode, "backend": be, "layout": lay, "stateful_shortcut": sc,
                         "rules": n, "load_s_median": statistics.median(v), "loads": len(v),
                         "kernel_mem_bytes_median": statistics.median(m) if m else None,
                         "rates": rates.get(key, {})})
    return rows


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
