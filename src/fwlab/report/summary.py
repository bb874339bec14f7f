"""Condensing a record's stream trials into per-configuration figures.

Owns: the per-rule cost fit of linear layouts, rule load times and summary.csv rows over the
curves of ``fwlab.results.curves`` (grouping repetitions, the ratio to the same run's 0-rule
reference, seed 001 Table 1). Reads only the stored record.
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
from fwlab.stats import fit_per_packet_cost, summarize
from fwlab.stats.quality import flag_cv


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
