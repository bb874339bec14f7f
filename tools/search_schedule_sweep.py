#!/usr/bin/env python3
"""MLRsearch's schedule options against the strict binary search, on simulated DUTs (no root, ~1 min).

Runs `fwlab bench search`'s strict pairing (same goals, same comparison and phase breakdown) on a
DUT whose capacity wanders in time (`fwlab.search.simulated.Wandering`, calibrated on the live
bench's traces: short trials pass well above the load 3 s trials pass at) and on a fixed capacity,
for the options MLRsearch's design leaves open: number of coarse targets, the first trials'
duration and the expansion coefficient. Prints mlr_vs_binary and where MLRsearch's trial seconds
went per variant. Deterministic (seeded).

    .venv/bin/python tools/search_schedule_sweep.py [--seeds 60]
"""

from __future__ import annotations

import argparse
import statistics

from fwlab.bench.search import SearchBenchConfig, goals, trace
from fwlab.bench.search_compare import compare
from fwlab.search import run_search
from fwlab.search.simulated import FixedCapacity, Wandering

_D = SearchBenchConfig()
VARIANTS = [
    (f"default ({_D.coarse_targets} coarse targets, {_D.initial_trial_s:g} s, expansion 2)", {}),
    ("old schedule (2 coarse targets, 0.5 s, expansion 2)", {"preceding_targets": 2, "initial_trial_duration_s": 0.5}),
    (f"{_D.coarse_targets - 1} coarse targets", {"preceding_targets": _D.coarse_targets - 1}),
    (f"{_D.coarse_targets + 1} coarse targets", {"preceding_targets": _D.coarse_targets + 1}),
    ("first trials 0.5 s", {"initial_trial_duration_s": 0.5}),
    ("first trials 1 s", {"initial_trial_duration_s": 1.0}),
    ("expansion 1.5", {"expansion_coefficient": 1.5}),
    ("expansion 4", {"expansion_coefficient": 4.0}),
    ("1 coarse target, first trials 0.35 s", {"preceding_targets": 1, "initial_trial_duration_s": 0.35}),
]
"""(label, change to the default goal): the default's own labels come from SearchBenchConfig, the
old schedule (before 0.25 s / three targets) is set explicitly."""


def _run(result, alg: str, rnd: int) -> dict:
    return {"round": rnd, "algorithm": alg, "throughput_pps": result.throughput_pps,
            "lower_bound_pps": result.lower_bound_pps, "upper_bound_pps": result.upper_bound_pps,
            "trial_count": result.trial_count, "trial_seconds": result.trial_seconds,
            "irregular": list(result.irregular), "repetitions_pps": [], "trial_seconds_by_duration": {},
            "trials": [trace(t) for t in result.trials]}


def sweep(dut_factory, seeds: int, max_load: float = 200_000.0) -> None:
    """Every variant's MLRsearch on the same seeds against the same binary searches (paired):
    mlr_vs_binary over all seeds, the spread of the per-seed ratios (quartiles) and each variant's
    trial seconds against the default's, per seed (median and quartiles of the paired change)."""
    g = goals(SearchBenchConfig())
    binary = [_run(run_search("binary", dut_factory(1000 + s), max_load, 1000.0, g["binary"])[0], "binary", s)
              for s in range(seeds)]
    base: list[float] | None = None
    for name, change in VARIANTS:
        mlr = [_run(run_search("mlr", dut_factory(s), max_load, 1000.0, {**g["mlr"], **change})[0], "mlr", s)
               for s in range(seeds)]
        c = compare(binary + mlr)
        ratios = c["mlr_vs_binary_per_round"]
        secs = [r["trial_seconds"] for r in mlr]
        vs = ""
        if base is None:
            base = secs
        else:
            ch = [100 * (a / b - 1) for a, b in zip(secs, base)]
            vs = f"  vs default {_quartiles(ch, '%+.0f')} %"
        parts = ", ".join(f"{k} {v['seconds_per_search']:.1f}" for k, v in c["mlr_phases"].items())
        print(f"  {name:48s} mlr_vs_binary {c['mlr_vs_binary']:.3f} (per seed {_quartiles(ratios, '%.2f')})"
              f"{vs}  gap {100 * c['result_gap']:.1f} %  [s per search: {parts}]")


def _quartiles(values: list[float], fmt: str) -> str:
    """"median [q1, q3]" of values (one value: itself)."""
    if len(values) < 2:
        return fmt % values[0] if values else "-"
    q1, q2, q3 = statistics.quantiles(values, n=4)
    return f"{fmt % q2} [{fmt % q1}, {fmt % q3}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=60, help="searches per contender and variant (default 60)")
    args = ap.parse_args()
    print("DUT whose capacity wanders in time (zero-loss load falls with the trial duration):")
    sweep(lambda seed: Wandering(seed=seed), args.seeds)
    print("DUT fitted to the live traces of 2026-11-28 23:45 UTC (zero-loss 11.2 / 7.7 / 6.0 / 5.4 kpps at "
          "0.25 / 0.57 / 1.31 / 3 s; live 10.5 / 9.0 / 6.3 / 5.3):")
    sweep(lambda seed: Wandering(mean_pps=5000, ring_frames=1500, sigma=0.35, tau_s=0.5, seed=seed), args.seeds)
    print("fixed capacity 9 kpps (the same at every trial duration):")
    sweep(lambda seed: FixedCapacity(9_000), 1)


if __name__ == "__main__":
    main()
