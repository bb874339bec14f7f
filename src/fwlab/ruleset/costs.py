"""The per-class figures of ``fwlab run --ruleset``: cost and latency of each derived class.

Owns: which classes get a latency trial and at what load, the added median latency with its
interval over the rounds, each class's latency with and without the rule set, and its cost per
packet (1e9/rate - 1e9/reference rate, per round, then median and range). Pure: the rates and
histograms come from the run's trials. Never sends traffic.
"""

from __future__ import annotations

import statistics

from fwlab.rules.derive import TrafficClass
from fwlab.ruleset.mix import latency_figures, median_range
from fwlab.stats.median_interval import median_interval


def latency_missing(c: TrafficClass) -> str | None:
    """Why class ``c`` gets no latency trial (None: it gets one)."""
    if c.expected != "accept":
        return f"the rule set {c.terminal}s it: no frame arrives to be timed"
    if c.packet.l4proto != "udp":
        return "tcp SYN test frames carry no send timestamp (fwlab-engine times udp frames only)"
    return None


def latency_load(rates: dict[tuple[str, str], list[float | None]], class_id: str, k: int,
                 fraction: float) -> float | None:
    """The load [packets/s] of class ``class_id``'s latency trials in round ``k``, the same in both
    conditions: ``fraction`` x the lower of its rates with and without the rule set in that round
    (the one measured if only one was); None when neither was."""
    got = [r[k] for r in (rates.get((class_id, cond)) or [] for cond in ("rules", "reference"))
           if len(r) > k and r[k]]
    return max(1.0, min(got) * fraction) if got else None


def added_latency(pairs: list[tuple[float, float]]) -> dict:
    """Added median latency [ns] from per-round (rules p50, reference p50) pairs, each pair at the
    same load: the median of the differences with its order-statistic interval (95 %, or min to
    max with the lower coverage ``level`` it has when there are fewer than 6 rounds)."""
    diffs = [a - b for a, b in pairs]
    iv = median_interval(diffs, 0.95)
    return {"median": statistics.median(diffs), "low": iv.low if iv else None, "high": iv.high if iv else None,
            "level": iv.level if iv else None, "n": len(diffs), "per_round": diffs,
            "why": None if iv else "one round: no interval",
            "method": "per round: p50 with the rule set - p50 without, both at the same load; median of the "
                      "rounds, distribution-free order-statistic interval of the median (95 % from 6 rounds)"}


def _added_p50(trials: dict[str, list[dict]]) -> tuple[dict | None, str | None]:
    """The added median latency from the two conditions' trials paired by round, or None and why."""
    by_round = {cond: {t.get("round", i): t for i, t in enumerate(ts)} for cond, ts in trials.items()}
    pairs, unlike = [], []
    for k in sorted(set(by_round["rules"]) & set(by_round["reference"])):
        a, b = by_round["rules"][k], by_round["reference"][k]
        if not (a.get("hdr") and b.get("hdr")):
            continue
        if a.get("load_pps") != b.get("load_pps"):
            unlike.append(k)
            continue
        pairs.append((latency_figures([(a["hdr"], 1.0)])["p50"], latency_figures([(b["hdr"], 1.0)])["p50"]))
    if pairs:
        return added_latency(pairs), None
    if unlike:
        return None, (f"the two conditions were timed at different loads in round(s) {', '.join(map(str, unlike))}: "
                      "their medians are not comparable")
    return None, "no round timed in both conditions"


def summarize_latency(c: TrafficClass, lat: dict[tuple[str, str], list[dict]]) -> dict:
    """A class's latency with rules and without: the rounds' histograms merged, percentiles [ns];
    ``added_p50_ns``: the added median latency over the rounds timed in both conditions at the
    same load (:func:`added_latency`), None with ``added_p50_missing`` otherwise."""
    why = latency_missing(c)
    if why:
        return {"missing": why}
    out: dict = {}
    for cond in ("rules", "reference"):
        trials = lat.get((c.class_id, cond), [])
        texts = [t["hdr"] for t in trials if t.get("hdr")]
        fig = latency_figures([(t, 1.0 / len(texts)) for t in texts]) if texts else None
        out[cond] = {"latency_ns": fig, "rounds": len(texts),
                     "samples": sum(t.get("samples") or 0 for t in trials),
                     "load_pps": [t.get("load_pps") for t in trials]}
        if fig is None:
            out[cond]["missing"] = next((t["why"] for t in trials if t.get("why")), "no frame arrived")
    out["added_p50_ns"], missing = _added_p50({cond: lat.get((c.class_id, cond), []) for cond in ("rules", "reference")})
    if missing:
        out["added_p50_missing"] = missing
    return out


def latency_why(summary: dict, cond: str) -> str | None:
    """Why a class's :func:`summarize_latency` has no latency in ``cond`` (None: it has one): the
    class gets no trial (dropped, tcp), or its trials in that condition timed nothing (their reason)."""
    if summary.get("missing"):
        return summary["missing"]
    d = summary.get(cond) or {}
    return None if d.get("latency_ns") else d.get("missing") or "no latency measured"


REFERENCES = {
    "reference": "no rule set: the DUT forwards the packet (the reference of a class the rule set accepts)",
    "drop-reference": "one forward-hook chain with policy drop and no rule (the reference of a class the rule set "
                      "drops or rejects: the cost of deciding to drop, not a saving against forwarding)"}


def reference_of(c: TrafficClass) -> str:
    """The condition that is class ``c``'s reference."""
    return "reference" if c.expected == "accept" else "drop-reference"


def summarize_costs(classes: list[TrafficClass], rates: dict[tuple[str, str], list[float]],
                    lat: dict[tuple[str, str], list[dict]] | None = None) -> list[dict]:
    """Per class: rate with rules and in its own reference (forwarding for a class the rule set
    accepts, the drop reference for one it drops), cost [ns/packet] = 1e9/rate - 1e9/ref (per
    round, then median and range), latency when measured, sorted most expensive first."""
    out = []
    for c in classes:
        r = rates.get((c.class_id, "rules"), [])
        ref = rates.get((c.class_id, "reference"), [])
        costs = [1e9 / a - 1e9 / b for a, b in zip(r, ref) if a and b]
        out.append({"class_id": c.class_id, "rule_id": c.rule_id, "rule_text": c.rule_text,
                    "expected": c.expected, "traversed_rules": c.traversed_rules,
                    "reference": reference_of(c), "reference_text": REFERENCES[reference_of(c)],
                    "rate_pps": median_range(r), "reference_rate_pps": median_range(ref),
                    "cost_ns_per_packet": median_range(costs)})
        if lat is not None:
            out[-1]["latency"] = summarize_latency(c, lat)
    out.sort(key=lambda d: -(d["cost_ns_per_packet"]["median"] or float("-inf")))
    return out


