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

from fwlab.bench.search import SearchBenchConfig, compare, goals, trace
from fwlab.search import run_search
from fwlab.search.simulated import FixedCapacity, Wandering

VARIANTS = [
    ("default (2 coarse targets, 0.5 s, expansion 2)", {}),
    ("1 coarse target", {"preceding_targets": 1}),
    ("3 coarse targets", {"preceding_targets": 3}),
    ("first trials 0.25 s", {"initial_trial_duration_s": 0.25}),
    ("first trials 1 s", {"initial_trial_duration_s": 1.0}),
    ("expansion 1.5", {"expansion_coefficient": 1.5}),
    ("expansion 4", {"expansion_coefficient": 4.0}),
]


def _run(result, alg: str, rnd: int) -> dict:
    return {"round": rnd, "algorithm": alg, "throughput_pps": result.throughput_pps,
            "lower_bound_pps": result.lower_bound_pps, "upper_bound_pps": result.upper_bound_pps,
            "trial_count": result.trial_count, "trial_seconds": result.trial_seconds,
            "irregular": list(result.irregular), "repetitions_pps": [], "trial_seconds_by_duration": {},
            "trials": [trace(t) for t in result.trials]}


def sweep(dut_factory, seeds: int, max_load: float = 200_000.0) -> None:
    g = goals(SearchBenchConfig())
    for name, change in VARIANTS:
        runs = []
        for s in range(seeds):
            runs.append(_run(run_search("binary", dut_factory(1000 + s), max_load, 1000.0, g["binary"])[0], "binary", s))
            runs.append(_run(run_search("mlr", dut_factory(s), max_load, 1000.0, {**g["mlr"], **change})[0], "mlr", s))
        c = compare(runs)
        parts = ", ".join(f"{k} {v['seconds_per_search']:.1f}" for k, v in c["mlr_phases"].items())
        print(f"  {name:48s} mlr_vs_binary {c['mlr_vs_binary']:.3f}  gap {100 * c['result_gap']:.1f} %  "
              f"[s per search: {parts}]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=60, help="searches per contender and variant (default 60)")
    args = ap.parse_args()
    print("DUT whose capacity wanders in time (zero-loss load falls with the trial duration):")
    sweep(lambda seed: Wandering(seed=seed), args.seeds)
    print("fixed capacity 9 kpps (the same at every trial duration):")
    sweep(lambda seed: FixedCapacity(9_000), 1)


if __name__ == "__main__":
    main()
