"""``fwlab bench search``: the RFC 2544 binary search and MLRsearch on the same DUT, as a suite.

Owns: the bench's suite (one routed bed with the device model "napi", nftables with one rule
count, one ``rfc2544`` throughput item per search), the ABBA order of its trials, and reading the
record back into the comparison: each contender's trial seconds, their ratio, both results and
whether the results' gap lies within the DUT's measured noise.
It has no bed, DUT or trial loop of its own: the suite runs through the orchestrator exactly as
``fwlab run`` runs it (:func:`fwlab.run.start.start`, the ``rfc2544`` method), so a bench
search and a suite search are the same thing, and the bench leaves an ordinary run record
(``fwlab report`` reads it) and prints the suite it ran (``fwlab run`` takes it).

Pairings (both searches use the same full trial duration T, loss ratio and relative width):
- ``strict`` (default: ``mlr_goal`` rfc2544, ``repetitions`` 1): one RFC 2544 binary search,
  every trial T long, against MLRsearch with the goal T / T / exceed ratio 0 -- one bad trial of
  any length makes an upper bound, one good full-length trial a lower bound: the one-to-one match.
- ``tst009`` (``mlr_goal`` tst009, seed 001's ``repetitions`` 3): seed 001's binary search x3
  averaged against MLRsearch with ETSI TST 009's shape (trials of T, 2T per load, a load is a
  lower bound when at most half of its trial time was bad).
MLRsearch starts with trials of ``initial_trial_s`` and spends full-length trials only near the
end (its coarse-to-fine targets: ``coarse_targets`` of them, trial durations geometric from
``initial_trial_s`` to T, 0.25 / 0.57 / 1.31 / 3 s by default); the binary search's first load is
the bed's maximum load. Defaults chosen with tools/search_schedule_sweep.py (60 seeds): on a
simulated DUT whose zero-loss load falls with the trial duration (as this VM's does) 0.25 s and
three coarse targets give mlr_vs_binary 0.41 against 0.44 for the old 0.5 s and two, but per seed
the old schedule's trial seconds differ by a median +8 % (quartiles -16 % to +30 %): a gain
smaller than the seed-to-seed spread. On a fixed capacity the old schedule is 7 % cheaper (0.195
vs 0.210). No schedule option reached 1/3 on the first DUT.

Noise: every round repeats both searches, so each contender's results are repeated
measurements of one quantity. Their pooled within-contender spread (and the binary search's own
repetitions) is the DUT's measured noise; the gap of the two contenders' means is within noise
when it is at most 2 such sigmas (seed 002's rule) or within the searches' own resolution
(the relative width), and undecided when fewer than two results of any contender exist.

Goal: ``mlr_vs_binary`` <= ``GOAL_RATIO``, judged once (:func:`goal_verdict`) on the ratio's Fieller
interval over the rounds (fwlab.stats.ratio): reached, not reached, or inconclusive (the interval
spans the goal, or one round gives none).
"""

from __future__ import annotations

import math
import statistics
import sys
import tomllib
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from scipy.stats import t as student_t

from fwlab.errors import FwlabError
from fwlab.methods.rfc2544 import LOSS_BELOW_CAPACITY
from fwlab.results.trial import TrialRecord
from fwlab.search import SearchResult
from fwlab.search.result import measured_again
from fwlab.stats.ratio import RatioInterval, ratio_interval
from fwlab.stats.zero_loss_range import JudgedTrial, zero_loss_range
from fwlab.suites import parse_suite


MLR_GOALS = ("rfc2544", "tst009")
"""Goal shapes `goals` scales to the trial length (see the module docstring)."""

CONTENDERS = ("binary", "mlr", "csit")
"""RFC 2544 binary search, fwlab's MLRsearch, CSIT's MLRsearch (the PyPI reference, on mlr's goal)."""

GOAL_RATIO = 0.34
"""Issue goal: MLRsearch's trial seconds at most about a third of the binary search's."""

REACHED, NOT_REACHED, INCONCLUSIVE = "reached", "not reached", "inconclusive"
"""The goal's verdicts (:func:`goal_verdict`)."""


@dataclass(frozen=True)
class SearchBenchConfig:
    rules: int = 10000  #: linear nftables rules before the permit rule
    layout: str = "linear"
    mode: str = "routed"
    frame_size: int = 64  #: Ethernet frame incl. FCS [bytes]
    trial_s: float = 3.0  #: full-length trial duration of both searches [s]
    initial_trial_s: float = 0.25  #: MLRsearch's first (coarsest) trial duration [s]
    coarse_targets: int = 3  #: MLRsearch's targets before the goal, trial durations geometric up to trial_s
    relative_width: float = 0.02  #: both searches stop at this (upper - lower) / upper
    rounds: int = 2  #: binary + mlr pairs, ABBA order
    loss_ratio: float = 0.0  #: a trial passes with at most this loss ratio, in both searches (RFC 2544: 0)
    repetitions: int = 1  #: binary searches per round, averaged (seed 001: 3)
    mlr_goal: str = "rfc2544"  #: one of MLR_GOALS
    mrr_duration_s: float = 1.0  #: each of the two maximum-load trials of the bed [s]

    def __post_init__(self) -> None:
        if self.mlr_goal not in MLR_GOALS:
            raise ValueError(f"mlr_goal must be one of {MLR_GOALS}, not {self.mlr_goal!r}")

    @property
    def pairing(self) -> str:
        """"strict" (one binary search vs MLRsearch exceed 0), else a name of what was paired."""
        if self.mlr_goal == "rfc2544" and self.repetitions == 1:
            return "strict"
        return f"binary x{self.repetitions} averaged vs mlr {self.mlr_goal}-like"


def goals(cfg: SearchBenchConfig) -> dict:
    sum_factor, exceed = {"tst009": (2.0, 0.5), "rfc2544": (1.0, 0.0)}[cfg.mlr_goal]
    return {
        "binary": {"trial_duration_s": cfg.trial_s, "final_trial_duration_s": cfg.trial_s, "loss_ratio": cfg.loss_ratio,
                   "relative_width": cfg.relative_width, "repetitions": cfg.repetitions},
        "mlr": {"name": f"{cfg.mlr_goal}-like", "final_trial_duration_s": cfg.trial_s,
                "duration_sum_s": sum_factor * cfg.trial_s, "loss_ratio": cfg.loss_ratio, "exceed_ratio": exceed,
                "relative_width": cfg.relative_width, "initial_trial_duration_s": cfg.initial_trial_s,
                "preceding_targets": cfg.coarse_targets},
    } | {"csit": {"name": f"{cfg.mlr_goal}-like", "final_trial_duration_s": cfg.trial_s,
                  "duration_sum_s": sum_factor * cfg.trial_s, "loss_ratio": cfg.loss_ratio, "exceed_ratio": exceed,
                  "relative_width": cfg.relative_width, "initial_trial_duration_s": cfg.initial_trial_s,
                  "preceding_targets": cfg.coarse_targets}}


# -- the suite ------------------------------------------------------------------------------------
def suite_data(cfg: SearchBenchConfig) -> dict:
    """The bench as a suite: one bed, one rule set, one throughput item per contender."""
    g = goals(cfg)
    return {
        "name": "bench-search",
        "description": f"fwlab bench search: RFC 2544 binary search vs MLRsearch, pairing {cfg.pairing}",
        "mode": [cfg.mode], "backends": ["nftables"], "layouts": [cfg.layout], "rules": [cfg.rules],
        "ip_versions": [4], "device_model": "napi", "duration_s": cfg.trial_s, "repetitions": cfg.rounds,
        "settle_s": 0.2,
        "traffic": [{"kind": "throughput", "tool": "rfc2544", "label": alg, "sizes": [cfg.frame_size],
                     "options": {"algorithm": alg, "goal": g[alg], "mrr_duration_s": cfg.mrr_duration_s}}
                    for alg in CONTENDERS],
    }


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"no TOML for {v!r}")


def suite_toml(data: dict) -> str:
    """``data`` as suite TOML (scalars, lists, inline tables; ``traffic`` as [[traffic]])."""
    lines = [f"{k} = {_toml_value(v)}" for k, v in data.items() if k != "traffic"]
    for item in data.get("traffic", []):
        lines += ["", "[[traffic]]"] + [f"{k} = {_toml_value(v)}" for k, v in item.items()]
    return "\n".join(lines) + "\n"


def abba(trials: list) -> list:
    """Rounds in ABBA order: binary, mlr; mlr, binary; ... (a steady drift of the host's speed then
    favours neither search). ``trials`` are in plan order (repetition-major)."""
    out: list = []
    for rnd in sorted({t.repetition for t in trials}):
        pair = [t for t in trials if t.repetition == rnd]
        pair.sort(key=lambda t: CONTENDERS.index(t.label) if t.label in CONTENDERS else len(CONTENDERS))
        out += pair if rnd % 2 else pair[::-1]
    return out


# -- reading the record back ----------------------------------------------------------------------
def _wall_s(rec: TrialRecord) -> float | None:
    try:
        return (datetime.fromisoformat(rec.ended_utc.replace("Z", "+00:00"))
                - datetime.fromisoformat(rec.started_utc.replace("Z", "+00:00"))).total_seconds()
    except (AttributeError, ValueError):
        return None


def trace(trial) -> dict:
    """One search trial, short: phase, duration, intended load, loss ratio, pass."""
    r = trial.result
    return {"phase": trial.phase, "duration_s": round(r.duration_s, 3), "load_pps": round(r.intended_load_pps),
            "loss_ratio": r.loss_ratio, "generator_short": r.generator_short, "passed": trial.passed}


def runs_from_records(records: list[TrialRecord]) -> list[dict]:
    """One entry per search (trial of the record), in the order they ran."""
    runs = []
    for rec in sorted(records, key=lambda r: r.started_utc or ""):
        alg = rec.identity.label
        if alg not in CONTENDERS:
            continue
        base = {"round": rec.identity.repetition, "algorithm": alg, "trial_id": rec.trial_id, "wall_s": _wall_s(rec)}
        results = ((rec.extra or {}).get("rfc2544") or {}).get("results") or []
        if rec.error or not results:
            runs.append({**base, "error": rec.error or "no search result in the record", "throughput_pps": None,
                         "trial_count": None, "trial_seconds": None, "irregular": [], "repetitions_pps": [],
                         "trials": []})
            continue
        res = SearchResult.from_dict(results[0])
        runs.append({**base, "throughput_pps": res.throughput_pps, "lower_bound_pps": res.lower_bound_pps,
                     # as the rfc2544 method recorded them (metrics and flag), not judged again here
                     "forwarded_at_loss_pps": rec.metric("forwarded_at_loss_pps"),
                     "pct_of_forwarded_at_loss": rec.metric("throughput_pct_of_forwarded_at_loss"),
                     "loss_below_capacity": rec.has_flag("loss-below-capacity"),
                     "upper_bound_pps": res.upper_bound_pps, "trial_count": res.trial_count,
                     "trial_seconds": res.trial_seconds, "irregular": list(res.irregular),
                     "relative_width": res.relative_width,
                     "repetitions_pps": [r.throughput_pps for r in res.repetitions],
                     "trial_seconds_by_duration": _seconds_by_duration(res),
                     "trials": [trace(t) for t in res.trials]})
    return runs


def _seconds_by_duration(res: SearchResult) -> dict[str, float]:
    """Trial seconds per trial duration (where a search spends its time)."""
    out: dict[str, float] = {}
    for t in res.trials:
        key = f"{t.result.duration_s:g}"
        out[key] = out.get(key, 0.0) + t.result.duration_s
    return out


# -- where the trial seconds went ----------------------------------------------------------------
MLR_PHASES = ("max_rate", "preceding_targets", "final_target_shorter", "final_at_lower_bound",
              "final_at_upper_bound", "final_failed_below_shorter_pass", "generator_short_retried", "final_other")
"""MLRsearch's trial seconds, taken apart (see :func:`phases`)."""


def _target_step(phase: str) -> tuple[int, int] | None:
    """(k, n) of an MLRsearch phase label such as "rfc2544-like/2of3" (retries included)."""
    for part in phase.split("/"):
        k, sep, n = part.partition("of")
        if sep and k.isdigit() and n.isdigit():
            return int(k), int(n)
    return None


FULL_LENGTH_PHASES = ("final_at_lower_bound", "final_at_upper_bound", "final_failed_below_shorter_pass",
                      "generator_short_retried", "final_other")
"""The phases made of full-length trials (the rest of MLR_PHASES are shorter trials)."""

def _measured_again(trials: list[dict]) -> set[int]:
    """Indices of the trace's attempts the search measured again (`fwlab.search.result.measured_again`)."""
    return measured_again([(t.get("phase", ""), t["load_pps"], t["duration_s"]) for t in trials])


@dataclass(frozen=True)
class TrialClass:
    """Where one search trial's seconds go (:func:`classify`)."""

    phase: str  #: one of MLR_PHASES
    full_length: bool  #: the search's longest trial duration
    #: a full-length trial that failed where an earlier shorter trial had passed: "at" the same
    #: load, "below" (only a higher load had passed a shorter trial), None otherwise
    failed_after_shorter_pass: str | None


def classify(run: dict) -> list[TrialClass]:
    """Each trial of one search, classified once (phases and spending both derive from it):
    - ``max_rate``: its first trial, at the maximum load (its forwarding rate sets the first bounds);
    - ``preceding_targets``: the coarse targets' shorter trials;
    - ``final_target_shorter``: the final target's shorter pre-trials at new loads;
    - ``final_at_lower_bound`` / ``final_at_upper_bound``: full-length trials at the two loads the
      result stands on (the pass no schedule can avoid, and the fail when the upper bound needed one);
    - ``final_failed_below_shorter_pass``: other full-length trials that failed at or below a load
      that had passed a shorter trial: what the short trials' optimism costs on this DUT;
    - ``generator_short_retried``: full-length attempts whose generator fell short and that the
      search measured again ("<phase>/retryN" follows): the generator's cost, not the DUT's;
    - ``final_other``: the remaining full-length trials (narrowing passes).
    Shorter attempts measured again stay in their target's phase."""
    trials = run.get("trials") or []
    longest = max((t["duration_s"] for t in trials), default=0.0)
    lower, upper = run.get("lower_bound_pps"), run.get("upper_bound_pps")
    again = _measured_again(trials)
    out = []
    for k, t in enumerate(trials):
        d, load = t["duration_s"], t["load_pps"]
        full = d >= longest
        after = None
        if full and not t["passed"] and k not in again:
            passed_short = [u["load_pps"] for i, u in enumerate(trials[:k])
                            if u["passed"] and u["duration_s"] < longest and i not in again]
            after = "at" if load in passed_short else "below" if any(x > load for x in passed_short) else None
        step = _target_step(t.get("phase", ""))
        final = step is not None and step[0] == step[1]
        if k == 0:
            key = "max_rate"
        elif not full:
            key = "final_target_shorter" if final else "preceding_targets"
        elif k in again:
            key = "generator_short_retried"
        elif lower is not None and load == round(lower) and t["passed"]:
            key = "final_at_lower_bound"
        elif upper is not None and load == round(upper) and not t["passed"]:
            key = "final_at_upper_bound"
        elif after is not None:
            key = "final_failed_below_shorter_pass"
        else:
            key = "final_other"
        out.append(TrialClass(key, full, after))
    return out


def phases(run: dict) -> dict[str, float]:
    """One search's trial seconds by phase (:func:`classify`)."""
    out = dict.fromkeys(MLR_PHASES, 0.0)
    for t, c in zip(run.get("trials") or [], classify(run)):
        out[c.phase] += t["duration_s"]
    return out


def phase_breakdown(runs: list[dict], binary_seconds_per_search: float | None) -> dict | None:
    """MLRsearch's trial seconds by phase (:func:`phases`), per search on average and as a share of
    the binary search's mean trial seconds: the parts add up to ``mlr_vs_binary``."""
    ok = [r for r in runs if r["algorithm"] == "mlr" and r.get("trial_seconds") is not None]
    if not ok or not binary_seconds_per_search:
        return None
    each = [phases(r) for r in ok]
    per = {key: statistics.fmean(p[key] for p in each) for key in MLR_PHASES}
    out = {key: {"seconds_per_search": sec, "of_binary": sec / binary_seconds_per_search}
           for key, sec in per.items()}
    # the coarse targets one by one ("1of3 0.5 s": the first target's trials after the max-rate one)
    steps: dict[str, float] = {}
    for r in ok:
        for k, t in enumerate(r.get("trials") or []):
            step = _target_step(t["phase"])
            if k and step is not None and step[0] < step[1]:
                key = f"{step[0]}of{step[1]} {t['duration_s']:g} s"
                steps[key] = steps.get(key, 0.0) + t["duration_s"] / len(ok)
    out["preceding_targets"]["by_target"] = dict(sorted(steps.items()))
    return out


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


def what_stops_it(ratio: float | None, parts: dict | None) -> str | None:
    """Which measured parts keep ``ratio`` up, in one sentence (:func:`compare` gives it when the
    goal was not shown reached); None when nothing was measured."""
    if ratio is None or parts is None:
        return None
    share = {key: v["of_binary"] for key, v in parts.items()}
    final = sum(share[key] for key in FULL_LENGTH_PHASES)
    biggest = max(share, key=share.get)
    return (f"full-length trials alone are {final:.2f} of the binary search's trial seconds "
            f"(at the two bounds {share['final_at_lower_bound'] + share['final_at_upper_bound']:.2f}, failed at or "
            f"below a load a shorter trial had passed {share['final_failed_below_shorter_pass']:.2f}, "
            f"generator fell short and measured again {share['generator_short_retried']:.2f}), shorter "
            f"trials {share['max_rate'] + share['preceding_targets'] + share['final_target_shorter']:.2f}; "
            f"the largest part is {biggest} ({share[biggest]:.2f}); without the failures after a shorter pass "
            f"the ratio would be {ratio - share['final_failed_below_shorter_pass']:.2f}")


# -- the comparison -------------------------------------------------------------------------------
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
        again = _measured_again(trials)
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
    return (f"{ov['duration_s']:g} s trials passed and failed alike between {_kpps(ov['low_pps'])} and "
            f"{_kpps(ov['high_pps'])} ({100 * ov['relative_span']:.0f} % of the higher; {ov['passed']} of "
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


# -- the simulated models ------------------------------------------------------------------------
def model_comparison(seeds: int | None = None) -> dict:
    """The three contenders on every simulated DUT and goal set (:mod:`fwlab.search.comparison`):
    per (model, goal) each contender's median result and trial seconds over the model's seeds
    (``seeds``: that many for every noisy model; None: each model's own), whether fwlab's
    MLRsearch agrees with the reference (within the goal's width, plus twice the medians' error on
    a noisy model), and the totals. The binary search answers a goal set's first goal with every
    trial at its final length (no duration sum: it cannot express exceed ratios)."""
    from fwlab.search.comparison import compare as compare_models
    from fwlab.search.csit import reference_version

    rows = compare_models(seeds=None if seeds is None else range(seeds), contenders=CONTENDERS)
    per_set: dict[tuple[str, str], Any] = {}
    for r in rows:
        per_set.setdefault((r.model, r.goal_set), r)
    totals = {alg: math.fsum(r.trial_seconds_total.get(alg, 0.0) for r in per_set.values()) for alg in CONTENDERS}
    mlr_rows = [r for r in rows if "mlr" in r.median_pps and "csit" in r.median_pps]
    return {"reference": f"MLRsearch {reference_version() or 'missing'} (PyPI, CSIT)",
            "rows": [r.to_dict() for r in rows],
            "trial_seconds_total": totals,
            "mlr_vs_csit_trial_seconds": totals["mlr"] / totals["csit"] if totals["csit"] else None,
            "goal_sets_mlr_slower": sorted(f"{m}/{g}" for (m, g), r in per_set.items()
                                           if (r.seconds_ratio() or 0) > 1 + 1e-9),
            "goal_sets": len(per_set),
            "mlr_agrees": sum(r.agrees() for r in mlr_rows), "rows_compared": len(mlr_rows),
            "mlr_disagrees": [f"{r.model}/{r.goal_set}/{r.goal}" for r in mlr_rows if not r.agrees()]}


def format_models(models: dict) -> str:
    """The model comparison as a table: one line per (model, goal)."""
    head = (f"simulated DUTs ({models['reference']} as the reference): median result [kpps] and trial seconds "
            "per contender; gap = mlr vs csit")
    lines = [head, f"{'model':17s} {'goal set':13s} {'goal':9s} " + "  ".join(f"{a:>18s}" for a in CONTENDERS)
             + "   gap    mlr/csit s"]
    for r in models["rows"]:
        cells = "  ".join(f"{r['median_pps'][a] / 1e3:9.2f} {r['trial_seconds_total'][a]:8.0f}" if a in r["median_pps"]
                          else f"{'-':>18s}" for a in CONTENDERS)
        gap = r["mlr_vs_csit_gap"]
        ratio = r["mlr_vs_csit_trial_seconds"]
        lines.append(f"{r['model']:17s} {r['goal_set']:13s} {r['goal']:9s} {cells}  "
                     f"{'-' if gap is None else f'{100 * gap:+5.2f}%'}{'' if r['mlr_agrees_with_csit'] else '!'} "
                     f"{'-' if ratio is None else f'{ratio:5.2f}'}")
    t = models["trial_seconds_total"]
    lines.append(f"total trial seconds: " + ", ".join(f"{a} {t[a]:.0f}" for a in CONTENDERS)
                 + f"; mlr/csit {models['mlr_vs_csit_trial_seconds']:.3f}; mlr agrees with csit on "
                 f"{models['mlr_agrees']} of {models['rows_compared']} goals; mlr slower on "
                 f"{len(models['goal_sets_mlr_slower'])} of {models['goal_sets']} goal sets")
    return "\n".join(lines)


# -- the bench ------------------------------------------------------------------------------------
def run_bench(cfg: SearchBenchConfig, out_root: Path | str = "results", log: TextIO | None = sys.stderr,
              models: bool = True) -> dict:
    """Run the bench's suite through the orchestrator (root, real traffic) and compare; with
    `models`, the same contenders on the simulated DUTs too (:func:`model_comparison`)."""
    import time

    from fwlab.run.start import start  # the one entry point of the run pipeline

    data = suite_data(cfg)
    text = suite_toml(data)
    suite = parse_suite(tomllib.loads(text), "of fwlab bench search")
    t0 = time.monotonic()
    rec = start(suite, text, Path(out_root), quiet=log is None, order=abba)
    wall = time.monotonic() - t0
    runs = runs_from_records(rec.records(kind="rfc2544"))
    bed = (rec.run.get("beds") or [{}])[0]
    max_load = next(iter(((bed.get("runner_info") or {}).get("rfc2544") or {}).values()), None)
    if not runs:
        raise FwlabError(f"the bench's run {rec.path} holds no search", fix=f"see fwlab report {rec.path}")
    return {"pairing": cfg.pairing, "config": asdict(cfg), "goals": goals(cfg), "record": str(rec.path),
            "suite_toml": text, "wall_s": wall, "max_load": max_load, "device": bed.get("device"),
            "summary": compare(runs, cfg.relative_width), "runs": runs,
            "models": model_comparison() if models else None}


def _kpps(v: float | None) -> str:
    return "missing" if v is None else f"{v / 1e3:.2f} kpps"


def _goal_evidence(iv: dict, per_round: list[float]) -> str:
    """The ratio's interval (or why there is none) and the rounds' own ratios, for the goal line."""
    rounds = f"per round {', '.join(f'{v:.3f}' for v in per_round)}" if per_round else "no round complete"
    if iv.get("low") is None:
        return f"{iv['ratio']:.3f}, no interval ({iv.get('why') or 'not measured'}); {rounds}"
    return f"{iv['ratio']:.3f} [{iv['low']:.3f}, {iv['high']:.3f}] ({100 * iv['confidence']:g} % interval over the rounds); {rounds}"


def _onset_text(a: dict) -> str:
    """Each result as % of the rate the DUT forwarded in a lossy trial of its search, and how many
    of them fell below LOSS_BELOW_CAPACITY of it (flagged loss-below-capacity in the record)."""
    pcts = a.get("pct_of_forwarded_at_loss") or []
    if not any(p is not None for p in pcts):
        return ""
    shown = ", ".join("-" if p is None else f"{p:.0f}" for p in pcts)
    return (f"  result / forwarded in a lossy trial {shown} % (loss-below-capacity in "
            f"{a['loss_below_capacity']} of {len(pcts)})")


def format_table(res: dict) -> str:
    s, c = res["summary"], res["config"]
    mx = (res.get("max_load") or {}).get("mrr_pps")
    lines = [f"pairing: {res['pairing']} (binary x{c['repetitions']} vs MLRsearch goal {c['mlr_goal']}-like); "
             f"{c['rounds']} rounds ABBA; {c['rules']} {c['layout']} rules; trials {c['trial_s']:g} s "
             f"(MLRsearch from {c['initial_trial_s']:g} s, {c.get('coarse_targets', 2)} coarse targets); width {c['relative_width']}; loss ratio {c['loss_ratio']}; "
             f"max load {_kpps(mx)}"]
    for alg in CONTENDERS:
        a = s[alg]
        if not a["searches"]:
            continue
        per = ", ".join(f"{v:.1f}" for v in a["trial_seconds_per_search"])
        lines.append(f"{alg:6s}  result {_kpps(a['throughput_pps'])} (each: "
                     f"{', '.join(f'{v / 1e3:.2f}' for v in a['results_pps'])})  trial seconds "
                     f"{a['trial_seconds_total'] or 0:.1f} ({per})  {', '.join(a['irregular'])}"
                     + (f"  {a['failed']} searches failed" if a["failed"] else "")
                     + _onset_text(a))
    ratio = s["mlr_vs_binary"]
    lines.append(f"mlr_vs_binary (trial seconds) {ratio:.3f}" if ratio is not None else "mlr_vs_binary: missing")
    if s.get("mlr_vs_csit") is not None:
        gap = s.get("mlr_vs_csit_result_gap")
        lines.append(f"mlr_vs_csit (trial seconds) {s['mlr_vs_csit']:.3f}; csit_vs_binary {s['csit_vs_binary'] or 0:.3f}; "
                     f"result mlr vs csit {'missing' if gap is None else f'{100 * gap:+.1f} %'}")
    m = s["mlr"]
    spent = ", ".join(f"{sec:.1f} s in {d} s trials" for d, sec in m["trial_seconds_by_duration"].items())
    lines.append(f"MLRsearch spent {spent}; {m['full_length_trials']} full-length trials, "
                 f"{m['full_length_failed_after_short_pass']} failed at a load a shorter trial had passed, "
                 f"{m['full_length_generator_short_retried']} measured again (generator_short_retried: "
                 "the generator fell short)")
    parts = s.get("mlr_vs_binary_parts")
    if parts:
        lines.append(f"  ratio = {parts['full_length']:.3f} full-length + {parts['shorter']:.3f} shorter trials; "
                     f"{parts['full_length_trials_per_search']:.1f} full-length trials per MLRsearch vs "
                     f"{parts['binary_trials_per_search']:.1f} per binary search")
    ph = s.get("mlr_phases")
    if ph:
        lines.append("  by phase (s per search / share of binary's): " + "; ".join(
            f"{k} {v['seconds_per_search']:.1f} / {v['of_binary']:.3f}" for k, v in ph.items())
            + " (coarse targets: " + ", ".join(f"{k}: {sec:.1f} s" for k, sec in
                                               ph["preceding_targets"]["by_target"].items()) + ")")
    g = s.get("goal") or {}
    if g.get("verdict"):
        lines.append(f"  goal <= {g['ratio']} {g['verdict']}: {_goal_evidence(g['interval'], s.get('mlr_vs_binary_per_round') or [])}"
                     + (f"; {s['what_stops_it']}" if s.get("what_stops_it") else ""))
    nz = s["noise"]
    gap = "missing" if s["result_gap"] is None else f"{100 * s['result_gap']:.1f} %"
    noise_txt = "not measured (fewer than 2 results per contender)" if nz["cv"] is None else \
        f"{100 * nz['cv']:.1f} % (sigma of one result, {nz['df']} degrees of freedom)"
    verdict = {True: "within noise", False: "BEYOND noise", None: "undecided"}[s["within_noise"]]
    if s["within_noise"] is None and nz.get("beyond_sigmas") and nz.get("gap_sigma"):
        verdict += (f" (gap {s['result_gap'] / nz['gap_sigma']:.1f} sigma: over 2, under the "
                    f"{nz['beyond_sigmas']:.2f} a difference needs at {nz['df']} degrees of freedom)")
    lines.append(f"result gap {gap}; DUT noise {noise_txt}; width {100 * nz['relative_width']:g} % -> {verdict}")
    if s.get("full_length_overlap"):
        lines.append("  " + overlap_clause(s["full_length_overlap"]))
    lines.append(f"wall {res['wall_s']:.0f} s; record {res['record']}")
    if res.get("models"):
        lines.append(format_models(res["models"]))
    return "\n".join(lines)


__all__ = ["model_comparison", "format_models", "CONTENDERS", "FULL_LENGTH_PHASES", "GOAL_RATIO", "INCONCLUSIVE", "MLR_GOALS", "MLR_PHASES", "NOT_REACHED",
           "REACHED", "TrialClass", "classify", "goal_verdict",
           "phase_breakdown", "phases", "what_stops_it", "noise_clause", "SearchBenchConfig", "abba", "compare", "format_table", "full_length_overlap", "goals", "noise", "overlap_clause",
           "onset_clause", "run_bench", "runs_from_records", "spending", "suite_data", "suite_toml", "trace", "within_noise"]
