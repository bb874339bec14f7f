"""The traffic mix of an imported-rule-set run: class weights, and the whole mix's rate, cost and latency.

Owns: reading and checking a user's class profile (``--mix FILE``, a TOML file of ``KEY = WEIGHT``
lines or a ``[class_weights]`` table; the suite key ``class_weights`` in ``[ruleset]``), resolving
its keys to the derived traffic classes (a class id ``c3``, a rule id ``inet filter fwd #12``, a
rule handle ``12`` / ``#12``, or the tail of a rule id ``FORWARD #3``; a key naming a verdict map's
rule spreads its weight evenly over its elements' classes), and the mix's figures per round:

- rate: the mix is a packet stream whose share ``w_i`` (weights normalised to sum 1) are packets of
  class ``i``; each class's packets take 1/rate_i each (its back-to-back rate in that round), so
  the mix's rate is ``1 / sum(w_i / rate_i)`` and its cost ``sum(w_i * cost_i)`` [ns/packet];
- rate ratio: mean mix rate with the rule set / mean without over the rounds, with its Fieller
  interval (:func:`fwlab.stats.ratio.ratio_interval`);
- latency: the mixture of the classes' latency histograms, each scaled to its share ``w_i``, with
  the rule set and in the reference (classes without a latency in that condition, dropped or tcp
  or a trial that timed nothing, are left out with the reason their own summary gives; the rest
  renormalised).

The classes are measured one after the other, not interleaved on the wire: the mix's figures are
computed from the same round's per-class measurements, and the record says so. Never touches the
bed.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from fwlab.errors import SuiteError
from fwlab.files import loads_toml, read_text
from fwlab.rules.derive import TrafficClass
from fwlab.rules.imported_model import base_rule_id
from fwlab.stats.latency import mixture, percentile_ns
from fwlab.stats.ratio import ratio_interval

#: record key -> percentile; the keys the engine's own latency figures use (``p999``, not ``p99.9``)
LATENCY_PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}
MIX_METHOD = ("mix rate of a round = 1 / sum(w_i / rate_i) over the weighted classes (w normalised to 1: the "
              "time per packet of a stream whose packets are w_i of class i, from the same round's per-class "
              "back-to-back rates; the classes are not interleaved on the wire); mix cost = sum(w_i x cost_i); "
              "median [min ... max] of the rounds; rate ratio = mean mix rate with the rule set / mean without, "
              "95 % Fieller interval over the rounds")


def check_weights(data, where: str) -> dict[str, float]:
    """A profile table -> {key: weight}: numbers >= 0, finite, at least one > 0 (one line otherwise)."""
    fix = 'e.g. class_weights = { c1 = 3, "inet filter fwd #12" = 1 }'
    if not isinstance(data, dict) or not data:
        raise SuiteError(f"{where}: the class weights must be a non-empty table of KEY = WEIGHT", fix=fix)
    out: dict[str, float] = {}
    for k, v in data.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise SuiteError(f"{where}: weight of '{k}' is {v!r}, not a number >= 0", fix=fix)
        out[str(k).strip()] = float(v)
    if not any(v > 0 for v in out.values()):
        raise SuiteError(f"{where}: every weight is 0", fix="give at least one class a weight > 0")
    return out


def read_mix_file(path: Path) -> dict[str, float]:
    """``--mix FILE``: TOML ``KEY = WEIGHT`` lines (keys with spaces quoted) or a ``[class_weights]`` table."""
    data = loads_toml(read_text(path, "mix file", SuiteError, fix='write lines like c1 = 3'), f"the mix file {path}",
                      SuiteError, fix='write lines like c1 = 3 or "inet filter fwd #12" = 0.5')
    if set(data) == {"class_weights"}:
        data = data["class_weights"]
    return check_weights(data, f"mix file {path.name}")


def _matches(key: str, c: TrafficClass) -> bool:
    rid = base_rule_id(c.rule_id)
    if key in (c.class_id, c.rule_id, rid):
        return True
    k = key.lstrip("#")
    if k.isdigit():
        return rid.endswith(f" #{k}") and not rid.startswith("filter ")  # nft handles; iptables ids need the chain
    return rid.endswith(f" {key}")


def resolve(weights: dict[str, float] | None, classes: list[TrafficClass], where: str = "class weights") -> dict:
    """{class_id: normalised weight} for every class (0 for a class the profile does not name), and how.

    ``weights`` None: every class weighs the same. A key naming no class, or rules of two chains
    (an nft handle repeated across tables), is an error naming the key."""
    ids = [c.class_id for c in classes]
    if not classes:
        return {"weights": {}, "source": "none", "keys": {}}
    if weights is None:
        return {"weights": {i: 1 / len(ids) for i in ids}, "source": "even", "keys": {}}
    raw = {i: 0.0 for i in ids}
    keys: dict[str, list[str]] = {}
    for key, w in weights.items():
        hit = [c for c in classes if _matches(key, c)]
        if not hit:
            raise SuiteError(f"{where}: '{key}' names no derived traffic class (classes "
                             f"{', '.join(ids[:6])}{' ...' if len(ids) > 6 else ''}; or a rule id / handle of a "
                             f"rule that has a class)",
                             fix="run with --no-rate first to see the classes and their rules, then name those")
        rules = {base_rule_id(c.rule_id) for c in hit}
        if len(rules) > 1 and key not in ids:
            raise SuiteError(f"{where}: '{key}' names {len(rules)} rules ({', '.join(sorted(rules)[:3])})",
                             fix="name the rule by its whole id, e.g. 'inet filter fwd #12'")
        for c in hit:
            raw[c.class_id] += w / len(hit)
        keys[key] = [c.class_id for c in hit]
    total = sum(raw.values())
    if total <= 0:
        raise SuiteError(f"{where}: the weights of the named classes sum to 0", fix="give a class a weight > 0")
    return {"weights": {i: raw[i] / total for i in ids}, "source": "profile", "keys": keys}


def median_range(xs: list[float | None]) -> dict:
    """Median, min, max and count of the values that are not None (the rounds' summary of every
    rate and cost of ``run --ruleset`` and ``optimize``)."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def _at(xs: list, k: int):
    return xs[k] if k < len(xs) else None


def mix_rate(weights: dict[str, float], rates: dict[str, float | None]) -> float | None:
    """1 / sum(w_i / rate_i) over the classes with w_i > 0; None when one of them has no rate."""
    used = {i: w for i, w in weights.items() if w > 0}
    if not used or any(not rates.get(i) for i in used):
        return None
    return 1.0 / sum(w / rates[i] for i, w in used.items())


def mix_per_round(weights: dict[str, float], rates: dict[tuple[str, str], list[float | None]], cond: str,
                  rounds: int) -> list[float | None]:
    """The mix's rate in each round of condition ``cond``: :func:`mix_rate` of that round's class
    rates (the one mix-rate computation, for ``run --ruleset`` and ``optimize`` alike)."""
    return [mix_rate(weights, {i: _at(rates.get((i, cond)) or [], k) for i in weights}) for k in range(rounds)]


def ratio_dict(num: list[float | None], den: list[float | None]) -> dict:
    """mean(num) / mean(den) over the rounds that have a value, with its Fieller interval
    (:func:`fwlab.stats.ratio.ratio_interval`), as a record dict."""
    ri = ratio_interval([x for x in num if x], [x for x in den if x])
    if ri is None:
        return {"ratio": None, "low": None, "high": None, "why": "no rate on one side"}
    return {"ratio": ri.ratio, "low": ri.low, "high": ri.high, "confidence": ri.confidence, "n_num": ri.n_num,
            "n_den": ri.n_den, "why": ri.why, "method": ri.method}


def summarize_mix(weights: dict[str, float], rates: dict[tuple[str, str], list[float | None]],
                  rounds: int) -> dict:
    """The mix's rate with rules and without, and its cost, per round then median [min, max]; the
    rate with rules / the reference rate (``rate_ratio``) with its 95 % Fieller interval."""
    per = {cond: mix_per_round(weights, rates, cond, rounds) for cond in ("rules", "reference")}
    per["cost"] = [1e9 / a - 1e9 / b if a and b else None for a, b in zip(per["rules"], per["reference"])]
    return {"rate_pps": median_range(per["rules"]), "reference_rate_pps": median_range(per["reference"]),
            "cost_ns_per_packet": median_range(per["cost"]), "rate_ratio": ratio_dict(per["rules"], per["reference"]),
            "per_round": per, "method": MIX_METHOD}


def latency_figures(texts: list[tuple[str, float]]) -> dict | None:
    """Percentiles [ns] of the mixture of (histogram text, weight) pairs; None when there is none."""
    h = mixture(texts)
    if h is None or h.get_total_count() == 0:
        return None
    out = {key: percentile_ns(h, p) for key, p in LATENCY_PERCENTILES.items()}
    out.update({"min": float(h.get_min_value()), "mean": float(h.get_mean_value()), "max": float(h.get_max_value())})
    return out


def mix_latency(weights: dict[str, float], hists: dict[str, list[str]], missing: dict[str, str | None],
                condition: str = "rules") -> dict:
    """The mix's latency in one condition: the classes' histograms (merged over rounds) mixed by
    weight; the weighted classes without a latency are named with their reason (``missing``, from
    the data: the class's own latency summary)."""
    have = {i: w for i, w in weights.items() if w > 0 and hists.get(i)}
    left_out = {i: missing.get(i) or "no latency measured" for i, w in weights.items() if w > 0 and not hists.get(i)}
    pairs = [(t, have[i] / len(hists[i])) for i in have for t in hists[i]]
    fig = latency_figures(pairs) if pairs else None
    share = sum(have.values())
    return {"latency_ns": fig, "condition": condition, "classes": sorted(have), "weight_covered": share,
            "left_out": left_out,
            "method": f"mixture of the classes' one-way latency histograms (every round of the {condition} condition), "
                      f"each scaled to its weight; classes without a latency left out and the rest renormalised"}
