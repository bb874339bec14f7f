"""``fwlab bench precision``: fixed 3 repetitions against adaptive repetitions on ``quick``.

Owns: the two contenders, built from the built-in ``quick`` suite (fixed: ``repetitions = 3``;
adaptive: ``precision`` with ``repetitions`` as the minimum and a stated maximum), running them
alternately in one bench (ABBA order over rounds: fixed, adaptive; adaptive, fixed; ...) so both
see the same machine conditions, and the comparison: each run's wall time (bed builds included),
trials, and the share of figures whose 95 % Student t interval half-width is within the precision
(the fixed run judged by the same rule at its 3 repetitions), plus adaptive / fixed wall time.
Figures that did not reach the precision are listed with the half-width they reached.

By default the bench runs a slice of quick: rule counts 0 and 1000 of both layouts and both
traffic items (8 of quick's 16 figures), so that fixed + adaptive stays within about 8 minutes of
the shared live lock here; ``rules=None`` runs every rule count of quick. Runs a suite through a
function handed in (the CLI gives it ``fwlab.run.start.start``; a test gives a stand-in).
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, TextIO

from fwlab.errors import FwlabError
from fwlab.results.store import RunRecord
from fwlab.stats.precision import INTERVAL, PrecisionRule, cv_to_stop_at, figures_of, outcome, repetitions_needed
from fwlab.stats.summary import summarize
from fwlab.suites import load_suite, parse_suite

SUITE = "quick"
CONTENDERS = ("fixed", "adaptive")


@dataclass(frozen=True)
class PrecisionBenchConfig:
    precision: float = 0.03  #: goal: 95 % interval half-width / |mean| [ratio]
    fixed_repetitions: int = 3  #: the fixed contender's repetitions
    min_repetitions: int = 2  #: the adaptive contender's minimum (quick's own repetitions)
    max_repetitions: int = 10  #: the adaptive contender's stated maximum
    rules: tuple[int, ...] | None = (0, 1000)  #: the slice of quick's rule counts (None: all of quick)
    rounds: int = 1  #: fixed + adaptive pairs (ABBA order)
    out: str = "results"  #: where the run records go

    def check(self) -> None:
        PrecisionRule(self.precision, self.min_repetitions, self.max_repetitions)  # FwlabError when bad
        if self.fixed_repetitions < 2 or self.rounds < 1:
            raise FwlabError("--fixed-repetitions must be >= 2 (an interval needs 2 values) and --rounds >= 1",
                             fix="e.g. --fixed-repetitions 3 --rounds 1")
        have = load_suite(SUITE)[0].rules
        if self.rules is not None and (not self.rules or not set(self.rules) <= set(have)):
            raise FwlabError(f"--rules must be a slice of quick's rule counts ({', '.join(map(str, have))}), "
                             f"not {', '.join(map(str, self.rules))}", fix="e.g. --rules 0,1000, or --rules all")
        suites(self)  # the contenders validate as suites


def suites(cfg: PrecisionBenchConfig):
    """(fixed suite, adaptive suite): quick (or its slice) with the two repetition settings."""
    base, _ = load_suite(SUITE)
    data = base.model_dump()
    if cfg.rules is not None:
        data["rules"] = list(cfg.rules)
    fixed = {**data, "name": f"{SUITE}-fixed{cfg.fixed_repetitions}", "repetitions": cfg.fixed_repetitions}
    adaptive = {**data, "name": f"{SUITE}-adaptive", "repetitions": cfg.min_repetitions, "precision": cfg.precision,
                "max_repetitions": cfg.max_repetitions}
    fix = "--precision in (0, 1), --max-repetitions >= --min-repetitions, --rules among quick's rule counts"
    return parse_suite(fixed, "of the bench (fixed)", fix=fix), parse_suite(adaptive, "of the bench (adaptive)", fix=fix)


def judge(run_dir: Path, rule: PrecisionRule) -> dict:
    """One run's figures against the precision (the same rule for both contenders)."""
    rec = RunRecord.open(run_dir)
    trials = rec.trials()
    o = outcome(trials, rule)
    # each figure's spread: the stats module's coefficient of variation of its values (None with
    # fewer than 2 values or a mean of 0)
    cvs = {fid: summarize(vals).cv if (vals := [v for v in f.by_rep.values() if v is not None]) else None
           for fid, f in figures_of(trials).items()}
    return {"trials": len(trials), "trial_seconds": sum(float(t.get("duration_s") or 0) for t in trials),
            "figures": o.total, "met": o.met, "share_met": (o.met / o.total) if o.total else None,
            "rel_half_width": {f.figure: f.rel_half_width for f in o.figures},
            "repetitions": {f.figure: f.repetitions for f in o.figures},
            # the measured spread (sample SD / mean) and the repetitions the interval needs at it
            "cv": cvs,
            "repetitions_needed": {fid: (repetitions_needed(cv, rule.precision, rule.confidence)
                                         if cv is not None else None) for fid, cv in cvs.items()},
            "not_met": [{"figure": f.figure, "metric": f.metric, "repetitions": f.repetitions,
                         "rel_half_width": f.rel_half_width, "status": f.status}
                        for f in o.figures if f.status != "met"]}


def run_bench(cfg: PrecisionBenchConfig, run_suite: Callable, log: TextIO | None = sys.stderr) -> dict:
    """``run_suite(suite, toml_text, out_root, quiet=...)`` runs one suite and returns its RunRecord."""
    cfg.check()
    fixed, adaptive = suites(cfg)
    by_name = {"fixed": fixed, "adaptive": adaptive}
    rule = PrecisionRule(cfg.precision, cfg.min_repetitions, cfg.max_repetitions)
    runs: list[dict] = []
    for rnd in range(1, cfg.rounds + 1):
        # ABBA: a steady drift of the host's speed favours neither contender
        for name in CONTENDERS if rnd % 2 else CONTENDERS[::-1]:
            t0 = time.monotonic()
            text = f"# fwlab bench precision: the built-in {SUITE} suite as the {name} contender (see run.json parsed)\n"
            rec = run_suite(by_name[name], text, Path(cfg.out), quiet=log is None)
            wall = time.monotonic() - t0
            j = judge(rec.path, rule)
            runs.append({"round": rnd, "contender": name, "wall_s": wall, "record": str(rec.path), **j})
            if log:
                log.write(f"round {rnd} {name:8s}: {wall:6.1f} s wall, {j['trials']} trials, {j['met']} of "
                          f"{j['figures']} figures within ±{100 * cfg.precision:g} %  ({rec.path})\n")
                log.flush()
    return {"config": asdict(cfg), "interval": INTERVAL, "runs": runs, "summary": compare(runs),
            "why": why(runs, cfg)}


def why(runs: list[dict], cfg: PrecisionBenchConfig) -> dict:
    """Why adaptive is (not) faster, measured: adaptive saves trials over fixed only on figures
    that stop below the fixed count, i.e. whose spread (SD / mean) is at most
    ``cv_to_stop_below_fixed`` (``cv_to_stop_at`` one repetition fewer than fixed; None when that is
    below 2, where no interval stops); every other figure runs at least as many repetitions as
    fixed, the noisier up to the maximum. The same thresholds are stored, counted against and
    printed. The spreads are the adaptive runs' (they have the most repetitions)."""
    cvs = [cv for r in runs if r["contender"] == "adaptive" for cv in r["cv"].values() if cv is not None]
    need = [n for r in runs if r["contender"] == "adaptive" for n in r["repetitions_needed"].values()]
    stop_min = cv_to_stop_at(max(2, cfg.min_repetitions), cfg.precision)
    below = cfg.fixed_repetitions - 1
    stop_below_fixed = cv_to_stop_at(below, cfg.precision) if below >= max(2, cfg.min_repetitions) else None
    stop_max = cv_to_stop_at(cfg.max_repetitions, cfg.precision)
    out = {"cv_to_stop_at_min": stop_min, "cv_to_stop_below_fixed": stop_below_fixed, "cv_to_stop_at_max": stop_max,
           "figures": len(cvs), "median_cv": statistics.median(cvs) if cvs else None,
           "below_fixed": 0 if stop_below_fixed is None else sum(1 for cv in cvs if cv <= stop_below_fixed),
           "within_max": sum(1 for cv in cvs if cv <= stop_max),
           "median_repetitions_needed": (statistics.median([n if n is not None else 101 for n in need])
                                         if need else None)}
    if not cvs:
        out["sentence"] = "no adaptive run gave two values of a figure: no spread measured"
        return out
    where = (f"i.e. whose spread (SD / mean) is at most {100 * stop_below_fixed:.2f} % (the t interval at "
             f"{below} repetitions is that wide)" if stop_below_fixed is not None else
             f"and none can (an interval needs at least {max(2, cfg.min_repetitions)} repetitions)")
    out["sentence"] = (
        f"adaptive saves time over fixed {cfg.fixed_repetitions} only on figures that stop with fewer "
        f"repetitions, {where}; measured here: median spread "
        f"{100 * out['median_cv']:.2f} %, {out['below_fixed']} of {len(cvs)} figures below fixed's count, "
        f"{out['within_max']} within the maximum of {cfg.max_repetitions} (spread <= {100 * stop_max:.2f} %), "
        f"so adaptive runs every other figure at least {cfg.fixed_repetitions} times and the noisier up to "
        f"{cfg.max_repetitions}")
    return out


def compare(runs: list[dict]) -> dict:
    """Medians per contender and adaptive_over_fixed = adaptive wall time / fixed wall time."""
    out: dict = {}
    for name in CONTENDERS:
        rs = [r for r in runs if r["contender"] == name]
        med = (lambda k: statistics.median([r[k] for r in rs if r[k] is not None]) if rs else None)  # noqa: E731
        hws = [v for r in rs for v in r["rel_half_width"].values() if v is not None]
        out[name] = {"runs": len(rs), "wall_s": med("wall_s"), "trials": med("trials"),
                     "share_met": med("share_met"),
                     "median_rel_half_width": statistics.median(hws) if hws else None,
                     "max_rel_half_width": max(hws) if hws else None,
                     "not_met": sorted({f["figure"] for r in rs for f in r["not_met"]})}
    f, a = out["fixed"]["wall_s"], out["adaptive"]["wall_s"]
    out["adaptive_over_fixed"] = a / f if a and f else None
    out["adaptive_all_met"] = bool(out["adaptive"]["runs"]) and out["adaptive"]["share_met"] == 1.0
    out["adaptive_faster"] = out["adaptive_over_fixed"] is not None and out["adaptive_over_fixed"] < 1
    return out


def format_table(res: dict) -> str:
    c, s = res["config"], res["summary"]
    rules = "all of quick's rule counts" if c["rules"] is None else f"rule counts {', '.join(map(str, c['rules']))}"
    lines = [f"quick ({rules}); precision ±{100 * c['precision']:g} % by the {res['interval']}; fixed "
             f"{c['fixed_repetitions']} repetitions vs adaptive {c['min_repetitions']}..{c['max_repetitions']}; "
             f"{c['rounds']} round(s), ABBA"]
    for name in CONTENDERS:
        x = s[name]
        share = "missing" if x["share_met"] is None else f"{100 * x['share_met']:.0f} %"
        hw = ("" if x["median_rel_half_width"] is None else
              f"  half-width median ±{100 * x['median_rel_half_width']:.1f} %, widest ±{100 * x['max_rel_half_width']:.1f} %")
        lines.append(f"{name:8s}  wall {x['wall_s']:7.1f} s  trials {x['trials']}  figures within the precision "
                     f"{share}{hw}")
        if x["not_met"]:
            lines.append(f"          not within it: {', '.join(x['not_met'])}")
    r = s["adaptive_over_fixed"]
    lines.append(f"adaptive_over_fixed (wall time) {r:.2f}" if r is not None else "adaptive_over_fixed: missing")
    if res.get("why", {}).get("sentence"):
        lines.append("why: " + res["why"]["sentence"])
    if not s["adaptive_all_met"]:
        lines.append(f"adaptive did not reach ±{100 * c['precision']:g} % on every figure within "
                     f"{c['max_repetitions']} repetitions (see not within it)")
    return "\n".join(lines)


__all__ = ["PrecisionBenchConfig", "compare", "format_table", "judge", "run_bench", "suites"]
