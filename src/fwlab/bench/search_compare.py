"""The contenders of ``fwlab bench search`` compared over its rounds: each one's trial seconds
and results, the full-length trials that passed and failed alike, the DUT's measured noise,
whether the gap of their results lies within it, and the goal's verdict.

Noise: every round repeats both searches, so each contender's results are repeated
measurements of one quantity. Their pooled within-contender spread (and the binary search's own
repetitions) is the DUT's measured noise; the gap of the two contenders' means is within noise
when it is at most 2 such sigmas (seed 002's rule) or within the searches' own resolution
(the relative width), and undecided when fewer than two results of any contender exist.

Goal: ``mlr_vs_binary`` <= ``GOAL_RATIO``, judged once (:func:`goal_verdict`) on the ratio's Fieller
interval over the rounds (fwlab.stats.ratio): reached, not reached, or inconclusive (the interval
spans the goal, or one round gives none).

Owns: pure statistics over the searches read back from the record. Never runs a trial.
"""

from __future__ import annotations

import math
import statistics

from scipy.stats import t as student_t

from fwlab.bench.search_phases import FULL_LENGTH_PHASES, classify, phase_breakdown, remeasured, what_stops_it
from fwlab.methods.rfc2544 import LOSS_BELOW_CAPACITY
from fwlab.stats.ratio import RatioInterval, ratio_interval
from fwlab.stats.zero_loss_range import JudgedTrial, zero_loss_range

CONTENDERS = ("binary", "mlr", "csit")
"""RFC 2544 binary search, fwlab's MLRsearch, CSIT's MLRsearch (the PyPI reference, on mlr's goal)."""

GOAL_RATIO = 0.34
"""Issue goal: MLRsearch's trial seconds at most about a third of the binary search's."""

REACHED, NOT_REACHED, INCONCLUSIVE = "reached", "not reached", "inconclusive"
"""The goal's verdicts (:func:`goal_verdict`)."""


def kpps(v: float | None) -> str:
    return "missing" if v is None else f"{v / 1e3:.2f} kpps"


def goal_verdict(ratio: RatioInterval | None, goal: float = GOAL_RATIO) -> str | None:
    """The one classifier of the goal (mlr_vs_binary <= ``goal``), on the ratio's interval:
    ``reached`` when the whole interval is at or below the goal, ``not reached`` when all of it is
    above, ``inconclusive`` when it spans the goal or there is no interval (one round, or the
    binary search's seconds too noisy); None when no ratio was measured."""
    if ratio is None:
        return None
    if not ratio.has_interval:
        return INCONCLUSIVE
    if ratio.high <= goal:
        return REACHED
    if ratio.low > goal:
        return NOT_REACHED
    return INCONCLUSIVE


def _results(runs: list[dict], alg: str) -> list[float]:
    """Every result of one contender: each binary repetition, else each search's result."""
    out = []
    for r in runs:
        if r["algorithm"] != alg:
            continue
        reps = [v for v in (r.get("repetitions_pps") or []) if v is not None]
        out += reps or ([r["throughput_pps"]] if r["throughput_pps"] is not None else [])
    return out


def spending(runs: list[dict]) -> dict:
    """Where a contender's trial seconds went (what keeps the ratio up): seconds per trial
    duration, the full-length trials, and those that failed at the very load a shorter trial had
    passed (the DUT's zero-loss load falls with the trial duration: short trials were
    optimistic there), and the full-length attempts measured again because the generator fell
    short. From :func:`classify`, as the phases are: its ``final_failed_below_shorter_pass`` adds
    the full-length failures below such a load."""
    by_duration: dict[str, float] = {}
    full = full_failed_after_short = full_generator_short = 0
    for r in runs:
        for key, sec in (r.get("trial_seconds_by_duration") or {}).items():
            by_duration[key] = by_duration.get(key, 0.0) + sec
        cs = classify(r)
        full += sum(1 for c in cs if c.full_length)
        full_failed_after_short += sum(1 for c in cs if c.failed_after_shorter_pass == "at")
        full_generator_short += sum(1 for c in cs if c.phase == "generator_short_retried")
    return {"trial_seconds_by_duration": dict(sorted(by_duration.items(), key=lambda kv: float(kv[0]))),
            "full_length_trials": full, "full_length_failed_after_short_pass": full_failed_after_short,
            "full_length_generator_short_retried": full_generator_short}


def full_length_overlap(runs: list[dict]) -> dict | None:
    """Where the DUT's zero-loss load at the full trial length is a range, not one number
    (:func:`fwlab.stats.zero_loss_range.zero_loss_range`), over every search of both contenders:
    attempts the search measured again because the generator fell short are left out with the
    generator-short trials. Returns the range (``low_pps``, ``high_pps``, ``relative_span`` =
    (high - low) / high, ``duration_s``), the full-length trials in it (``trials``, ``passed``)
    and each contender's trials in it per search (``per_search``); None when every failure lies
    above every pass (a single zero-loss load) or there is no full-length pass or failure."""
    judged = []
    for r in runs:
        trials = r.get("trials") or []
        again = remeasured(trials)
        judged += [JudgedTrial(t["duration_s"], t["load_pps"], bool(t["passed"]), bool(t.get("generator_short")),
                               r["algorithm"]) for k, t in enumerate(trials) if k not in again]
    zr = zero_loss_range(judged)
    if zr is None:
        return None
    searches = {alg: sum(1 for r in runs if r["algorithm"] == alg and r.get("trials")) for alg in CONTENDERS}
    out = zr.to_dict()
    del out["by_source"]
    return {**out, "per_search": {alg: (zr.by_source.get(alg, 0) / n if n else None) for alg, n in searches.items()}}


def overlap_clause(ov: dict | None) -> str:
    """:func:`full_length_overlap` in one clause ("" when there is none)."""
    if ov is None:
        return ""
    per = ", ".join(f"{alg} {v:.1f}" for alg, v in ov["per_search"].items() if v is not None)
    return (f"{ov['duration_s']:g} s trials passed and failed alike between {kpps(ov['low_pps'])} and "
            f"{kpps(ov['high_pps'])} ({100 * ov['relative_span']:.0f} % of the higher; {ov['passed']} of "
            f"{ov['trials']} trials there passed): the DUT's zero-loss load at that length is a range, not one "
            f"number, and a result in it depends on how many trials a search spends there and how it judges them "
            f"(with exceed ratio 0 one failure is an upper bound, so each further trial can only lower it; "
            f"per search: {per})")


def _ratio_per_round(runs: list[dict]) -> list[float]:
    """mlr_vs_binary of each round on its own (rounds where both searches completed)."""
    out = []
    for rnd in sorted({r["round"] for r in runs}):
        sec = {alg: [r.get("trial_seconds") for r in runs if r["round"] == rnd and r["algorithm"] == alg]
               for alg in ("binary", "mlr")}
        if all(v and None not in v for v in sec.values()) and sum(sec["binary"]):
            out.append(sum(sec["mlr"]) / sum(sec["binary"]))
    return out


def noise(results: dict[str, list[float]]) -> dict:
    """The DUT's measured noise: the pooled within-contender standard deviation of repeated
    results (each contender's results are the same measurement taken again), relative to the
    grand mean; None when no contender has two results."""
    ss, df = 0.0, 0
    for values in results.values():
        if len(values) >= 2:
            m = statistics.fmean(values)
            ss += sum((v - m) ** 2 for v in values)
            df += len(values) - 1
    every = [v for values in results.values() for v in values]
    if not df or not every:
        return {"sigma_pps": None, "cv": None, "df": 0}
    sigma = math.sqrt(ss / df)
    return {"sigma_pps": sigma, "cv": sigma / statistics.fmean(every), "df": df}


def beyond_sigmas(df: int | None) -> float:
    """How many sigmas of the gap make it a difference at the 5 % level: Student's t(0.975, df)
    for a sigma estimated with df degrees of freedom (4.30 at 2, 2.45 at 6), never below seed
    002's 2."""
    if not df:
        return math.inf
    return max(2.0, float(student_t.ppf(0.975, df)))


def within_noise(gap: float | None, gap_sigma: float | None, width: float, df: int | None = None) -> bool | None:
    """Is the contenders' relative gap within the DUT's noise? Yes when it is at most 2 sigmas
    of the gap (seed 002's rule) or at most the searches' own resolution (their relative width);
    no (beyond noise) only when it exceeds the width and `beyond_sigmas(df)` sigmas -- the 5 %
    level for a sigma taken from df degrees of freedom (without df: 2 sigmas); undecided (None)
    in between, or when the gap or, beyond the width, its sigma is missing."""
    if gap is None:
        return None
    if gap <= width:
        return True
    if gap_sigma is None:
        return None
    if gap <= 2 * gap_sigma:
        return True
    return False if gap > (beyond_sigmas(df) if df is not None else 2.0) * gap_sigma else None


def compare(runs: list[dict], relative_width: float = 0.02) -> dict:
    """Per contender: results, trial seconds (total and per search), wall; then mlr_vs_binary
    (total trial seconds over the same rounds), the results' gap and whether it is within noise."""
    out: dict = {}
    for alg in CONTENDERS:
        rs = [r for r in runs if r["algorithm"] == alg]
        ok = [r for r in rs if r.get("trial_seconds") is not None]
        vals = _results(runs, alg)
        out[alg] = {"searches": len(rs), "failed": len(rs) - len(ok), "results_pps": vals,
                    "throughput_pps": statistics.fmean(vals) if vals else None,
                    "trial_seconds_total": sum(r["trial_seconds"] for r in ok) if ok else None,
                    "trial_seconds_per_search": [r["trial_seconds"] for r in ok],
                    "trial_count_per_search": [r["trial_count"] for r in ok],
                    "wall_s_per_search": [r.get("wall_s") for r in rs],
                    "irregular": sorted({f for r in rs for f in r["irregular"]}),
                    "pct_of_forwarded_at_loss": [r.get("pct_of_forwarded_at_loss") for r in ok],
                    "loss_below_capacity": sum(1 for r in ok if r.get("loss_below_capacity")),
                    **spending(ok)}
    b, m, c = out["binary"], out["mlr"], out["csit"]
    complete = b["failed"] == 0 and m["failed"] == 0 and b["searches"] == m["searches"] > 0
    out["mlr_vs_binary"] = (m["trial_seconds_total"] / b["trial_seconds_total"]) \
        if complete and b["trial_seconds_total"] else None
    # the reference beside them (when the bench ran it): its trial seconds against each
    with_csit = c["searches"] > 0 and c["failed"] == 0 and c["trial_seconds_total"]
    out["csit_vs_binary"] = c["trial_seconds_total"] / b["trial_seconds_total"] \
        if with_csit and b["failed"] == 0 and b["trial_seconds_total"] else None
    out["mlr_vs_csit"] = m["trial_seconds_total"] / c["trial_seconds_total"] if with_csit and m["failed"] == 0 \
        and m["trial_seconds_total"] is not None else None
    out["mlr_vs_csit_result_gap"] = (m["throughput_pps"] - c["throughput_pps"]) / c["throughput_pps"] \
        if c["throughput_pps"] and m["throughput_pps"] is not None else None
    out["mlr_vs_binary_per_round"] = _ratio_per_round(runs) if out["mlr_vs_binary"] is not None else []
    # the ratio of the mean trial seconds per search (= of the totals: both ran as many searches)
    # with its Fieller interval over the rounds; the goal is judged on that interval
    ri = ratio_interval(m["trial_seconds_per_search"], b["trial_seconds_per_search"]) \
        if out["mlr_vs_binary"] is not None else None
    verdict = goal_verdict(ri)
    out["goal"] = {"ratio": GOAL_RATIO, "verdict": verdict, "interval": None if ri is None else ri.to_dict()}
    out["mlr_at_most_third"] = {REACHED: True, NOT_REACHED: False}.get(verdict)
    binary_per_search = (b["trial_seconds_total"] / b["searches"]) if complete and b["searches"] else None
    out["mlr_phases"] = phase_breakdown(runs, binary_per_search) if out["mlr_vs_binary"] is not None else None
    out["what_stops_it"] = what_stops_it(out["mlr_vs_binary"], out["mlr_phases"]) \
        if verdict in (NOT_REACHED, INCONCLUSIVE) else None
    # the ratio taken apart in two (from the phases): MLRsearch's full-length trials (what no
    # short trial can replace: the lower bound's confirmation, and the full-length trials that
    # failed) and its shorter ones (the rest of the ratio)
    ph = out["mlr_phases"]
    full_share = None if ph is None else sum(ph[key]["of_binary"] for key in FULL_LENGTH_PHASES)
    out["mlr_vs_binary_parts"] = None if full_share is None else {
        "full_length": full_share,
        "shorter": out["mlr_vs_binary"] - full_share,
        "full_length_trials_per_search": m["full_length_trials"] / m["searches"],
        "binary_trials_per_search": sum(b["trial_count_per_search"]) / b["searches"]}
    nz = noise({alg: out[alg]["results_pps"] for alg in CONTENDERS})
    gap = gap_sigma = None
    if b["throughput_pps"] and m["throughput_pps"] is not None:
        gap = abs(m["throughput_pps"] - b["throughput_pps"]) / b["throughput_pps"]
        if nz["cv"] is not None:
            # sigma of the difference of the two means, relative
            gap_sigma = nz["cv"] * math.sqrt(1 / len(b["results_pps"]) + 1 / len(m["results_pps"]))
    out["result_gap"] = gap
    out["noise"] = {**nz, "gap_sigma": gap_sigma, "relative_width": relative_width,
                    "how": "pooled within-contender spread of repeated search results (rounds x repetitions)"}
    out["noise"]["beyond_sigmas"] = beyond_sigmas(nz["df"]) if nz["df"] else None
    out["within_noise"] = within_noise(gap, gap_sigma, relative_width, nz["df"])
    out["full_length_overlap"] = full_length_overlap(runs)
    if out["what_stops_it"]:
        out["what_stops_it"] += noise_clause(nz["cv"], relative_width) + onset_clause(b, m)
    return out


def noise_clause(cv: float | None, relative_width: float) -> str:
    """The DUT's own spread against the width both searches were asked for, when it is larger: a
    zero-loss load that varies from search to search (and trial to trial) is what makes full-length
    trials fail at loads shorter ones passed; "" when unmeasured or within the width."""
    if cv is None or cv <= relative_width:
        return ""
    return (f"; the DUT's results spread {100 * cv:.1f} % (cv) between searches, {cv / relative_width:.1f}x the "
            f"{100 * relative_width:g} % width both searches were asked for: its zero-loss load varies from "
            "trial to trial (docs/device-model.md, stalls)")


def onset_clause(binary: dict, mlr: dict) -> str:
    """How many results transients set (below LOSS_BELOW_CAPACITY of what their DUT forwarded in
    a lossy trial of the same search): then the zero-loss load both searches chase is the test
    bed's stalls', and where a search ends in it is chance; "" when none."""
    hit = binary["loss_below_capacity"] + mlr["loss_below_capacity"]
    if not hit:
        return ""
    n = len(binary["pct_of_forwarded_at_loss"]) + len(mlr["pct_of_forwarded_at_loss"])
    return (f"; {hit} of {n} results lie below {100 * LOSS_BELOW_CAPACITY:.0f} % of what their DUT forwarded "
            "in a lossy trial of the same search (loss-below-capacity): transients set them, not the rule "
            "set, so where a search ends is partly chance")
