"""``fwlab bench search``: the RFC 2544 binary search and MLRsearch on the same DUT.

Owns: one real test bed (device model "napi", nftables with one rule count), its measured
maximum load, and alternating the two searches round by round in ABBA order (binary, mlr; mlr,
binary; ...) so both see the same machine conditions; the comparison of their results and trial seconds.
Both searches use the same final trial duration, loss ratio and relative width. The binary
search is seed 001's procedure: every trial at full length, the whole search repeated
(`repetitions`, seed 001: 3) and the results averaged. MLRsearch runs once, with one of two goals
scaled to the trial length T:
- `tst009` (default; ETSI TST 009's 60 s / 120 s / exceed 50 %): trials of T, 2T per load, a
  load is a lower bound when at most half of its trial time was bad -- MLRsearch's answer to the
  noise seed 001 averages repetitions against;
- `rfc2544` (T / T / exceed 0): one bad trial of any length makes an upper bound, one good
  full-length trial a lower bound -- the strict one-to-one match of a single binary search
  (use it with `repetitions` 1).
MLRsearch starts with short trials and narrows the interval before it spends full-length trials.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import asdict, dataclass
from typing import TextIO

from fwlab.dut import DutContext, get_backend
from fwlab.rules import generate
from fwlab.runners.engine import EngineMeasurer
from fwlab.methods.rfc2544 import Rfc2544Options, Rfc2544Runner
from fwlab.search import run_search
from fwlab.testbed import Testbed, Topology, new_run_id


MLR_GOALS = ("tst009", "rfc2544")
"""Goal shapes `goals` scales to the trial length (see the module docstring)."""


@dataclass(frozen=True)
class SearchBenchConfig:
    rules: int = 10000  #: linear nftables rules before the permit rule
    layout: str = "linear"
    mode: str = "routed"
    frame_size: int = 64  #: Ethernet frame incl. FCS [bytes]
    trial_s: float = 5.0  #: full-length trial duration of both searches [s]
    initial_trial_s: float = 0.5  #: MLRsearch's first (coarsest) trial duration [s]
    relative_width: float = 0.02  #: both searches stop at this (upper - lower) / upper
    rounds: int = 3  #: binary + mlr pairs
    loss_ratio: float = 0.0  #: a trial passes with at most this loss ratio, in both searches (RFC 2544: 0)
    repetitions: int = 3  #: binary searches per round, averaged (seed 001: 3)
    mlr_goal: str = "tst009"  #: one of MLR_GOALS

    def __post_init__(self) -> None:
        if self.mlr_goal not in MLR_GOALS:
            raise ValueError(f"mlr_goal must be one of {MLR_GOALS}, not {self.mlr_goal!r}")


def goals(cfg: SearchBenchConfig) -> dict:
    sum_factor, exceed = {"tst009": (2.0, 0.5), "rfc2544": (1.0, 0.0)}[cfg.mlr_goal]
    return {
        "binary": {"trial_duration_s": cfg.trial_s, "final_trial_duration_s": cfg.trial_s, "loss_ratio": cfg.loss_ratio,
                   "relative_width": cfg.relative_width, "repetitions": cfg.repetitions},
        "mlr": {"name": f"{cfg.mlr_goal}-like", "final_trial_duration_s": cfg.trial_s,
                "duration_sum_s": sum_factor * cfg.trial_s, "loss_ratio": cfg.loss_ratio, "exceed_ratio": exceed,
                "relative_width": cfg.relative_width, "initial_trial_duration_s": cfg.initial_trial_s,
                "preceding_targets": 2},
    }


def compare(runs: list[dict]) -> dict:
    """Medians per algorithm and the ratios: mlr_vs_binary (trial seconds) and the results' gap."""
    out: dict = {}
    for alg in ("binary", "mlr"):
        rs = [r for r in runs if r["algorithm"] == alg]
        tp = [r["throughput_pps"] for r in rs if r["throughput_pps"] is not None]
        out[alg] = {"runs": len(rs), "throughput_pps": statistics.median(tp) if tp else None,
                    "trial_count": statistics.median([r["trial_count"] for r in rs]) if rs else None,
                    "trial_seconds": statistics.median([r["trial_seconds"] for r in rs]) if rs else None,
                    "wall_s": statistics.median([r["wall_s"] for r in rs]) if rs else None,
                    "irregular": sorted({f for r in rs for f in r["irregular"]})}
    b, m = out["binary"], out["mlr"]
    out["mlr_vs_binary"] = (m["trial_seconds"] / b["trial_seconds"]) if b["trial_seconds"] and m["trial_seconds"] else None
    if b["throughput_pps"] and m["throughput_pps"]:
        out["result_gap"] = abs(m["throughput_pps"] - b["throughput_pps"]) / b["throughput_pps"]
        out["results_agree_5pct"] = out["result_gap"] <= 0.05
    else:
        out["result_gap"], out["results_agree_5pct"] = None, None
    out["mlr_at_most_third"] = out["mlr_vs_binary"] is not None and out["mlr_vs_binary"] <= 1 / 3
    out.update(_noise([r for r in runs if r["algorithm"] == "binary"], out["result_gap"]))
    return out


def _noise(binary_runs: list[dict], gap: float | None) -> dict:
    """How steady the DUT was: the spread of every binary search result of the bench (each
    repetition of every round: the same measurement taken again), as a coefficient of variation,
    and whether the results' gap lies within two of those sigmas (seed 002's 2-sigma rule). When
    the host's speed shifts during the bench the spread shows it, and a gap is then not the
    searches' doing."""
    values = [v for r in binary_runs
              for v in (r.get("repetitions_pps") or [r["throughput_pps"]]) if v is not None]
    if len(values) < 2:
        return {"binary_results_pps": values, "binary_cv": None, "gap_within_2_sigma": None}
    cv = statistics.stdev(values) / statistics.fmean(values)
    return {"binary_results_pps": values, "binary_cv": cv,
            "gap_within_2_sigma": None if gap is None else gap <= 2 * cv}


def trace(trial) -> dict:
    """One search trial, short: phase, duration, intended load, loss ratio, pass."""
    r = trial.result
    return {"phase": trial.phase, "duration_s": round(r.duration_s, 3), "load_pps": round(r.intended_load_pps),
            "loss_ratio": r.loss_ratio, "generator_short": r.generator_short, "passed": trial.passed}


def run_bench(cfg: SearchBenchConfig, log: TextIO | None = sys.stderr) -> dict:
    def say(text: str) -> None:
        if log:
            log.write(text + "\n")
            log.flush()

    topo = Topology(run_id=new_run_id(), mode=cfg.mode, device_model="napi")
    runs: list[dict] = []
    with Testbed(topo) as bed:
        opts = Rfc2544Options()
        runner = Rfc2544Runner()
        say(f"test bed {topo.run_id}: {cfg.mode}, device model napi; measuring the maximum load")
        max_info = runner.max_load(bed, 4, cfg.frame_size, opts)
        if not max_info.get("mrr_pps"):
            raise RuntimeError(f"maximum load not measured: {max_info.get('error')}")
        be = get_backend("nftables")
        ctx = DutContext(bed.host, bed.ns("dut"), cfg.mode)
        plan = topo.plan
        be.load(ctx, generate(cfg.rules, cfg.layout, ip_version=4, client_net=plan.client_net(4),
                              server_net=plan.server_net(4), stateful_shortcut=False, seed=1))
        measurer = EngineMeasurer(bed=bed, frame_size=cfg.frame_size, max_lag=opts.max_lag,
                                  batch_window_us=opts.batch_window_us, rt_priority=opts.generator_rt_priority)
        g = goals(cfg)
        max_load = max_info["mrr_pps"]
        for rnd in range(1, cfg.rounds + 1):
            # ABBA order (binary, mlr; mlr, binary; ...): a steady drift of the host's speed
            # then favours neither search
            for alg in ("binary", "mlr") if rnd % 2 else ("mlr", "binary"):
                t0 = time.monotonic()
                res = run_search(alg, measurer, max_load, min(1000.0, max_load / 2), g[alg])[0]
                wall = time.monotonic() - t0
                runs.append({"round": rnd, "algorithm": alg, "throughput_pps": res.throughput_pps,
                             "lower_bound_pps": res.lower_bound_pps, "upper_bound_pps": res.upper_bound_pps,
                             "trial_count": res.trial_count, "trial_seconds": res.trial_seconds, "wall_s": wall,
                             "irregular": list(res.irregular), "relative_width": res.relative_width,
                             "repetitions_pps": [r.throughput_pps for r in res.repetitions],
                             "trials": [trace(t) for t in res.trials]})
                say(f"round {rnd} {alg:6s}: {(res.throughput_pps or 0) / 1e3:8.1f} kpps  {res.trial_count:3d} trials  "
                    f"{res.trial_seconds:6.1f} trial s  {wall:6.1f} s wall  {', '.join(res.irregular)}")
        device = bed.device_state()
    return {"config": asdict(cfg), "goals": g, "max_load": max_info, "device": device,
            "runs": runs, "summary": compare(runs)}


def format_table(res: dict) -> str:
    s = res["summary"]
    c = res["config"]
    lines = [f"max load {res['max_load']['mrr_pps'] / 1e3:.1f} kpps; {c['rules']} {c['layout']} rules; trials "
             f"{c['trial_s']} s; width {c['relative_width']}; loss ratio {c['loss_ratio']}; binary x{c['repetitions']} "
             f"averaged; MLRsearch goal {c['mlr_goal']}"]
    for alg in ("binary", "mlr"):
        a = s[alg]
        lines.append(f"{alg:6s}  throughput {(a['throughput_pps'] or 0) / 1e3:8.1f} kpps  trials {a['trial_count']}  "
                     f"trial seconds {a['trial_seconds']:.1f}  {', '.join(a['irregular'])}")
    ratio = s["mlr_vs_binary"]
    lines.append(f"mlr_vs_binary (trial seconds) {ratio:.3f}" if ratio is not None else "mlr_vs_binary: missing")
    lines.append(f"result gap {100 * s['result_gap']:.1f} %" if s["result_gap"] is not None else "result gap: missing")
    if s.get("binary_cv") is not None:
        lines.append(f"DUT noise: the {len(s['binary_results_pps'])} binary results spread {100 * s['binary_cv']:.1f} % "
                     f"(coefficient of variation); the gap is {'within' if s['gap_within_2_sigma'] else 'beyond'} "
                     f"2 sigma")
    return "\n".join(lines)


__all__ = ["SearchBenchConfig", "compare", "format_table", "goals", "run_bench", "trace"]
