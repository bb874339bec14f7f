"""A traffic class's in-kernel cost over its rounds, the mix's, and a rewrite's gain.

Owns, from the figures the class cost trials stored (:mod:`fwlab.methods.class_cost`), never the
bed: each trial's time per packet inside the firewall (``fw_class_ns``: the rule set's brackets on
the class's path, their medians added, with an interval), *referenced* to the same-packet
reference chain (scaled by the reference's median over all the run's trials / that trial's
reference median: whatever slowed that moment slowed both), and over the rounds the median with
the envelope of the rounds' intervals; whether that interval meets the precision target (half
width <= 10 % of the figure or <= 20 ns: ``decided``, else ``undecided``); the mix's in-kernel
cost (weighted sum over the classes with a figure, the rest named, and which figures are times to
a drop verdict timed on a marked copy); the mark statement's own time on a marked copy (the copy
that marks twice against the one that marks once, round by round); the gain of a rewrite
(original / proposal time, per round on the same reference, its envelope; ``faster`` /
``slower`` when the interval excludes 1, else ``undecided``). Pure.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from fwlab.stats.kernel_cost import CostPoint
from fwlab.stats.kernel_cost import figure as point_figure

TARGET_REL = 0.10  #: the precision target: half width at most this share of the figure ...
TARGET_NS = 20.0  #: ... or at most this many ns
DECIDED, UNDECIDED = "decided", "undecided"
FASTER, SLOWER = "faster", "slower"


@dataclass(frozen=True)
class Figure:
    """One value with its interval [ns or ratio]."""

    value: float
    low: float
    high: float


def precision(median: float | None, low: float | None, high: float | None) -> str:
    """``decided`` when the interval's half width is <= TARGET_REL of the median or <= TARGET_NS,
    else ``undecided`` (also without a figure)."""
    if median is None or low is None or high is None:
        return UNDECIDED
    half = (high - low) / 2
    return DECIDED if half <= TARGET_NS or (median > 0 and half <= TARGET_REL * median) else UNDECIDED


def common_reference(trials: list[dict]) -> float | None:
    """The reference chain's median gap over trials (their ``fw_ref_p50_ns``): the one scale every
    referenced figure of a run is converted back to ns with."""
    refs = [t["fw_ref_p50_ns"] for t in trials if t.get("fw_ref_p50_ns")]
    return statistics.median(refs) if refs else None


def referenced(t: dict, ref_ns: float | None) -> Figure | None:
    """A trial's class figure referenced and converted back to ns at ``ref_ns``: when the class's
    path is the forward bracket alone (the reference's partner), the median over packets of
    (firewall gap / reference gap) times ``ref_ns``, with that median's interval; else (several
    hooks) ``fw_class_ns`` [low, high] scaled by ref_ns / the trial's own reference median. None
    when the trial has no class figure or no reference."""
    if t.get("fw_class_ns") is None or not t.get("fw_ref_p50_ns") or not ref_ns:
        return None
    if (t.get("fw_class_brackets") == 1 and t.get("fw_class_hooks") == ["forward"]
            and t.get("fw_ref_ratio_p50") and t.get("fw_ref_ratio_low") is not None):
        f = point_figure(CostPoint.from_metrics("", 0, 0, t), ref_ns, referenced=True)  # the suite cost trial's rule
        return Figure(f.value_ns, f.low_ns, f.high_ns)
    s = ref_ns / t["fw_ref_p50_ns"]
    return Figure(t["fw_class_ns"] * s, t["fw_class_low_ns"] * s, t["fw_class_high_ns"] * s)


def raw(t: dict) -> Figure | None:
    if t.get("fw_class_ns") is None:
        return None
    return Figure(t["fw_class_ns"], t["fw_class_low_ns"], t["fw_class_high_ns"])


def _envelope(figs: list[Figure]) -> dict:
    vals = [f.value for f in figs]
    med = statistics.median(vals)
    low, high = min(f.low for f in figs), max(f.high for f in figs)
    return {"median": med, "low": low, "high": high, "n": len(figs), "per_round": vals,
            "half_width_ns": (high - low) / 2, "half_width_rel": (high - low) / 2 / med if med else None,
            "precision": precision(med, low, high)}


METHOD = ("per trial: the rule set's netfilter brackets on the class's path (every hook it registers), each "
          "bracket's median gap with its distribution-free interval at level 1 - 5 %/k, added over the k brackets; "
          "referenced: the same packets timed through a fixed reference chain of like code; a forward-only path as "
          "the median per-packet ratio firewall / reference x the reference's median over the run, several hooks "
          "scaled by the reference's median over the run / the trial's own; over the rounds: median, and the envelope of the rounds' "
          "intervals; precise when the half width is <= 10 % or <= 20 ns")


def summarize_class(trials: list[dict], ref_ns: float | None) -> dict:
    """A class's in-kernel cost over its trials' stored figures: referenced where every trial has a
    reference, else raw (``referenced`` says which); a class no trial timed has ``missing`` (the
    trials' own reason)."""
    figs = [referenced(t, ref_ns) for t in trials]
    is_ref = bool(figs) and all(f is not None for f in figs)
    if not is_ref:
        figs = [raw(t) for t in trials]
    got = [f for f in figs if f is not None]
    floors = [t["fw_floor_p50_ns"] for t in trials if t.get("fw_floor_p50_ns") is not None]
    out: dict = {"trials": len(trials), "referenced": is_ref, "reference_p50_ns": ref_ns if is_ref else None,
                 "floor_p50_ns": statistics.median(floors) if floors else None,
                 "brackets_on_path": max((t.get("fw_class_brackets") or 0 for t in trials), default=0),
                 "hooks": sorted({h for t in trials for h in t.get("fw_class_hooks") or []}),
                 "chains": sorted({c for t in trials for c in t.get("fw_class_chains") or []}),
                 "method": METHOD}
    if not got:
        why = next((t.get("fw_class_missing") or t.get("fw_missing") for t in trials
                    if t.get("fw_class_missing") or t.get("fw_missing")), None)
        return {**out, "missing": why or "no trial timed the class", "ns_per_packet": None}
    env = _envelope(got)
    if out["floor_p50_ns"] is not None and out["brackets_on_path"]:
        env["net_of_floor"] = env["median"] - out["floor_p50_ns"] * out["brackets_on_path"]
    raw_figs = [f for f in (raw(t) for t in trials) if f is not None]
    out["raw"] = _envelope(raw_figs) if raw_figs else None
    if len(got) < len(trials):
        out["rounds_missing"] = len(trials) - len(got)
    return {**out, "missing": None, "ns_per_packet": env}


def mix_cost(weights: dict[str, float], per_class: dict[str, dict]) -> dict:
    """The mix's in-kernel cost: sum of w_i x cost_i (and of the lows and highs) over the weighted
    classes with a figure, weights renormalised over them; the others named with their reason."""
    have = {i: w for i, w in weights.items() if w > 0 and (per_class.get(i) or {}).get("ns_per_packet")}
    left = {i: (per_class.get(i) or {}).get("missing") or "no in-kernel figure" for i, w in weights.items()
            if w > 0 and i not in have}
    share = sum(have.values())
    if not have:
        return {"ns_per_packet": None, "weight_covered": 0.0, "left_out": left,
                "missing": "no weighted class has an in-kernel figure"}
    fig = {k: sum(w / share * per_class[i]["ns_per_packet"][k] for i, w in have.items())
           for k in ("median", "low", "high")}
    fig["precision"] = precision(fig["median"], fig["low"], fig["high"])
    to_verdict = {i: per_class[i]["figure_kind"] for i in sorted(have) if per_class[i].get("figure_kind")}
    return {"ns_per_packet": fig, "weight_covered": share, "left_out": left, "classes": sorted(have),
            "to_drop_verdict": to_verdict,
            "weight_to_drop_verdict": sum(have[i] for i in to_verdict),
            "method": "sum over the classes with an in-kernel figure of w_i x cost_i (lows and highs alike; "
                      "weights renormalised over them): the time a packet of the mix spends inside the firewall"
                      + ("; the classes in to_drop_verdict count with their time to the drop verdict, timed on a "
                         "marked copy of the rule set" if to_verdict else "")}


def mark_cost(single: list[dict], double: list[dict], ref_ns: float | None) -> dict:
    """The mark statement's own time [ns]: per round (trials paired by order) the class's figure on
    the copy that sets the mark twice minus its figure on the copy that sets it once (each
    referenced at ``ref_ns`` where both trials have a reference, else raw), its interval [low2 -
    high1, high2 - low1]; over the rounds the median and the envelope."""
    diffs = []
    for a, b in zip(single, double):
        fa, fb = referenced(a, ref_ns), referenced(b, ref_ns)
        if fa is None or fb is None:
            fa, fb = raw(a), raw(b)
        if fa is not None and fb is not None:
            diffs.append(Figure(fb.value - fa.value, fb.low - fa.high, fb.high - fa.low))
    if not diffs:
        return {"ns": None, "missing": "no round timed both copies"}
    vals = [d.value for d in diffs]
    return {"ns": statistics.median(vals), "low": min(d.low for d in diffs), "high": max(d.high for d in diffs),
            "n": len(diffs), "per_round": vals,
            "method": "per round the class's time on the copy that sets the mark twice minus on the copy that sets it "
                      "once (the second mark statement's time); median and envelope over the rounds"}


def round_figures(original: list[dict], proposal: list[dict]) -> tuple[list[Figure | None], list[Figure | None], str]:
    """Per round (trials paired by order) the two rule sets' figures on one scale: referenced (the
    reference's median over both rule sets' trials) where both trials of the round have a
    reference, else raw; and which (``referenced`` | ``raw`` | ``mixed``)."""
    ref = common_reference(original + proposal)
    fa_all, fb_all, how = [], [], set()
    for a, b in zip(original, proposal):
        fa, fb = referenced(a, ref), referenced(b, ref)
        if fa is None or fb is None:
            fa, fb = raw(a), raw(b)
            how.add("raw")
        else:
            how.add("referenced")
        fa_all.append(fa)
        fb_all.append(fb)
    return fa_all, fb_all, "referenced" if how == {"referenced"} else "raw" if how == {"raw"} else "mixed"


def gain_of(original: list[Figure | None], proposal: list[Figure | None], figures: str = "referenced") -> dict:
    """gain = original time / proposal time per round, interval [orig low / prop high, orig high /
    prop low]; over the rounds the median and the envelope; ``faster`` when the whole envelope is
    above 1, ``slower`` below, else ``undecided``."""
    pairs = [Figure(a.value / b.value, a.low / b.high, a.high / b.low) for a, b in zip(original, proposal)
             if a is not None and b is not None and b.low > 0 and b.value > 0]
    if not pairs:
        return {"ratio": None, "low": None, "high": None, "verdict": UNDECIDED,
                "why": "no round timed both rule sets"}
    vals = [p.value for p in pairs]
    low, high = min(p.low for p in pairs), max(p.high for p in pairs)
    verdict = FASTER if low > 1 else SLOWER if high < 1 else UNDECIDED
    return {"ratio": statistics.median(vals), "low": low, "high": high, "n": len(pairs), "per_round": vals,
            "verdict": verdict, "figures": figures, "method": GAIN_METHOD}


GAIN_METHOD = ("in-kernel time per packet original / proposal per round (> 1: the proposal is faster), each "
               "referenced to its own trial's same-packet reference and converted at one reference median; "
               "interval from the two figures' intervals; median and envelope over the rounds")


def gain(original: list[dict], proposal: list[dict]) -> dict:
    """A rewrite's in-kernel gain for one class from its trials under both rule sets (:func:`gain_of`)."""
    fa, fb, how = round_figures(original, proposal)
    return gain_of(fa, fb, how)


def mix_gain(per_class: dict[str, tuple[list[dict], list[dict]]]) -> dict:
    """The even mix's in-kernel gain: per round the classes' figures (those every round of both
    rule sets timed) added on each side, then :func:`gain_of`; the classes left out named."""
    figs = {i: round_figures(a, b) for i, (a, b) in per_class.items()}
    used = {i: f for i, f in figs.items() if f[0] and all(x is not None for x in f[0] + f[1])}
    left = sorted(set(figs) - set(used))
    if not used:
        return {"ratio": None, "low": None, "high": None, "verdict": UNDECIDED, "classes": [], "left_out": left,
                "why": "no class has an in-kernel figure in every round of both rule sets"}
    rounds = min(len(f[0]) for f in used.values())

    def side(j: int) -> list[Figure]:
        return [Figure(*(sum(getattr(f[j][k], a) for f in used.values()) for a in ("value", "low", "high")))
                for k in range(rounds)]
    hows = {f[2] for f in used.values()}
    out = gain_of(side(0), side(1), hows.pop() if len(hows) == 1 else "mixed")
    return {**out, "classes": sorted(used), "left_out": left}
