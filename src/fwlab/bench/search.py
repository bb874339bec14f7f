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

Where the trial seconds went is bench.search_phases; the comparison of the contenders (their
noise, the gap, the goal's verdict) bench.search_compare.
"""

from __future__ import annotations

import math
import sys
import tomllib
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from fwlab.bench.search_compare import CONTENDERS, compare, kpps, overlap_clause
from fwlab.bench.suite_text import suite_toml
from fwlab.errors import FwlabError
from fwlab.results.trial import TrialRecord
from fwlab.search import SearchResult
from fwlab.suites import parse_suite

MLR_GOALS = ("rfc2544", "tst009")
"""Goal shapes `goals` scales to the trial length (see the module docstring)."""


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


def _goal_evidence(iv: dict, per_round: list[float]) -> str:
    """The ratio's interval (or why there is none) and the rounds' own ratios, for the goal line."""
    rounds = f"per round {', '.join(f'{v:.3f}' for v in per_round)}" if per_round else "no round complete"
    if iv.get("low") is None:
        return f"{iv['ratio']:.3f}, no interval ({iv.get('why') or 'not measured'}); {rounds}"
    return f"{iv['ratio']:.3f} [{iv['low']:.3f}, {iv['high']:.3f}] ({100 * iv['confidence']:g} % interval over the rounds); {rounds}"


def _onset_text(a: dict) -> str:
    """Each result as % of the rate the DUT forwarded in a lossy trial of its search, and how many
    of them fell below ``methods.rfc2544.LOSS_BELOW_CAPACITY`` of it (flagged loss-below-capacity in the record)."""
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
             f"max load {kpps(mx)}"]
    for alg in CONTENDERS:
        a = s[alg]
        if not a["searches"]:
            continue
        per = ", ".join(f"{v:.1f}" for v in a["trial_seconds_per_search"])
        lines.append(f"{alg:6s}  result {kpps(a['throughput_pps'])} (each: "
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


__all__ = ["MLR_GOALS", "SearchBenchConfig", "abba", "format_models", "format_table", "goals", "model_comparison",
           "run_bench", "runs_from_records", "suite_data", "suite_toml", "trace"]
