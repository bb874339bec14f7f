"""fwlab's searches against CSIT's reference MLRsearch on the simulated DUTs: the test oracle.

Owns: the catalogue of simulated DUT models (`MODELS`) and goal sets (`GOAL_SETS`) the searches
are compared on, running one contender on one model over seeds, and the comparison's figures:
per (model, goal, contender) the median result over the seeds, the median and total trial
seconds, and the highest result / highest load really sent.
Never touches: traffic, files. Every DUT here is arithmetic (`fwlab.search.simulated`), so the
whole comparison runs in seconds; `tests/unit/test_search_reference.py` asserts on it and
``fwlab bench search --models`` prints it.

Agreement, as the test checks it: fwlab's median result lies within the goal's relative width of
the reference's (medians over the seeds of a noisy model; one run of a deterministic one), and no
result of either ever lies above the highest load its generator really sent.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fwlab.search.mlr import SearchGoal, goals_of
from fwlab.search.registry import run_search
from fwlab.search.result import SearchResult
from fwlab.search.simulated import (Buffered, Cliff, FixedCapacity, GradualLoss, LossInversion, NoisyCapacity,
                                    SimulatedDut, Stalling, Wandering)

CONTENDERS = ("binary", "mlr", "csit")
"""The searches a comparison may run: RFC 2544 binary, fwlab's MLRsearch, CSIT's MLRsearch."""


@dataclass(frozen=True)
class Model:
    """One simulated DUT, built afresh per seed."""

    name: str
    build: Callable[[int], SimulatedDut]
    """seed -> a new DUT (deterministic models ignore the seed)."""
    max_load_pps: float
    """The searches' maximum load [packets/s]."""
    min_load_pps: float
    """The searches' minimum load [packets/s]."""
    noisy: bool
    """Does the result depend on the seed (then medians over seeds are compared)?"""
    description: str = ""
    seeds: int = 1
    """Seeds a comparison runs by default: enough for the medians, few enough to stay fast."""
    seeds_by_goal_set: dict[str, int] = field(default_factory=dict)
    """Goal sets whose searches are cheap on this model and get more seeds (smaller errors)."""

    def seeds_for(self, goal_set: str) -> int:
        return self.seeds_by_goal_set.get(goal_set, self.seeds) if self.noisy else 1


MODELS: tuple[Model, ...] = (
    Model("fixed", lambda seed: FixedCapacity(800_000), 1e6, 1e4, False, "fixed capacity 800 kpps"),
    Model("cliff", lambda seed: Cliff(800_000, collapse=0.3), 1e6, 1e4, False,
          "800 kpps, above it forwards 30 % of that"),
    Model("gradual", lambda seed: GradualLoss(700_000), 1e6, 1e4, False,
          "no loss to 700 kpps, then 0.5 x overload^2 (0.5 % at 770 kpps)"),
    Model("buffered", lambda seed: Buffered(600_000, buffer_frames=60_000), 1e6, 1e4, False,
          "600 kpps behind a 60k-frame buffer: passes 660 kpps for 1 s, 601 kpps for 60 s"),
    Model("generator-capped", lambda seed: FixedCapacity(800_000, generator_limit_pps=700_000), 1e6, 1e4,
          False, "an 800 kpps DUT behind a generator that sends at most 700 kpps"),
    Model("noisy", lambda seed: NoisyCapacity(800_000, spread=0.05, seed=seed), 1e6, 1e4, True,
          "capacity uniform in 800 kpps +- 5 % per trial", seeds=30,
          seeds_by_goal_set={"rfc2544": 200, "tst009": 200, "strict": 200}),
    Model("loss-inversion", lambda seed: LossInversion(800_000, probability=0.1, seed=seed), 1e6, 1e4, True,
          "800 kpps, 10 % of trials below it lose 1 % anyway", seeds=20),
    Model("stalling", lambda seed: Stalling(800_000, seed=seed), 1e6, 1e4, True,
          "800 kpps, 2 stalls/s of 4 ms mean, 256-frame ring", seeds=8),
    Model("wandering", lambda seed: Wandering(seed=seed, step_s=0.02), 30_000, 1_000, True,
          "12 kpps wandering in time (sigma 0.2, tau 0.15 s, 20 ms steps), 256-frame ring", seeds=10),
)
"""Every simulated DUT the comparison runs on (fwlab's `SimulatedDut` models and the cliff, the
gradual loss curve, the buffered DUT and the capped generator)."""

STRICT_GOAL = {"name": "strict", "final_trial_duration_s": 3.0, "duration_sum_s": 3.0, "loss_ratio": 0.0,
               "exceed_ratio": 0.0, "relative_width": 0.02, "initial_trial_duration_s": 0.25,
               "preceding_targets": 3}
"""``fwlab bench search``'s strict pairing: 3 s trials, one bad trial makes an upper bound."""

GOAL_SETS: dict[str, list[Any]] = {
    "rfc2544": ["rfc2544"],
    "tst009": ["tst009"],
    "strict": [STRICT_GOAL],
    "csit-ndr": ["csit"],
    "csit-pdr": ["csit-pdr"],
    "csit-ndr+pdr": ["csit", "csit-pdr"],
}
"""Goal sets by name: every preset alone, the bench's strict goal, and CSIT's NDR and PDR searched
together (one search, two results)."""


def model(name: str) -> Model:
    for m in MODELS:
        if m.name == name:
            return m
    raise KeyError(name)


def highest_sent_pps(result: SearchResult) -> float:
    """The highest load the generator really sent in any trial of the search [packets/s]."""
    return max((t.result.offered_load_pps for t in result.trials), default=0.0)


@dataclass(frozen=True)
class Runs:
    """One contender on one model and goal set, over seeds: one entry per seed and goal."""

    model: str
    goal_set: str
    algorithm: str
    goals: tuple[SearchGoal, ...]
    results: tuple[tuple[SearchResult, ...], ...]
    """Per seed, the search's results (one per goal)."""
    seeds: tuple[int, ...]

    def throughputs(self, goal: int) -> list[float]:
        """Each seed's result for goal `goal` [packets/s] (a missing result counts as 0)."""
        return [rs[goal].throughput_pps or 0.0 for rs in self.results]

    def median(self, goal: int) -> float:
        return statistics.median(self.throughputs(goal))

    @property
    def trial_seconds(self) -> list[float]:
        """Each seed's trial seconds (one search serves every goal of the set)."""
        return [rs[0].trial_seconds for rs in self.results]

    def above_sent(self) -> float:
        """The highest result / highest load sent over seeds and goals (<= 1 when honest)."""
        return max((r.throughput_pps or 0.0) / highest_sent_pps(r) for rs in self.results for r in rs
                   if highest_sent_pps(r) > 0)

    def flags(self, goal: int) -> dict[str, int]:
        """How many seeds carried each irregular flag for goal `goal`."""
        out: dict[str, int] = {}
        for rs in self.results:
            for f in rs[goal].irregular:
                out[f] = out.get(f, 0) + 1
        return out


def binary_goal(goal: SearchGoal) -> dict[str, Any]:
    """The RFC 2544 binary search closest to an MLRsearch goal: every trial final-length."""
    return {"trial_duration_s": goal.final_trial_duration_s, "final_trial_duration_s": goal.final_trial_duration_s,
            "loss_ratio": goal.loss_ratio, "relative_width": goal.relative_width}


def run(algorithm: str, m: Model, goal_set: str, seeds: Iterable[int]) -> Runs:
    """`algorithm` on model `m` with goal set `goal_set`, once per seed (once for a deterministic
    model). The binary search takes the set's first goal's trial length, loss ratio and width."""
    goals = tuple(goals_of(GOAL_SETS[goal_set]))
    seeds = tuple(seeds) if m.noisy else (0,)
    out = []
    for seed in seeds:
        dut = m.build(seed)
        if algorithm == "binary":
            res = run_search("binary", dut, m.max_load_pps, m.min_load_pps, binary_goal(goals[0]))
        else:
            res = run_search(algorithm, dut, m.max_load_pps, m.min_load_pps, list(goals))
        out.append(tuple(res))
    return Runs(m.name, goal_set, algorithm, goals, tuple(out), seeds)


@dataclass
class Row:
    """One (model, goal) of a comparison: each contender's median result and trial seconds."""

    model: str
    goal_set: str
    goal: str
    relative_width: float
    seeds: int
    median_pps: dict[str, float] = field(default_factory=dict)
    median_se_pps: dict[str, float] = field(default_factory=dict)
    """Standard error of each median [packets/s]: 1.2533 x the seeds' standard deviation / sqrt(seeds)
    (the normal approximation); 0 for a deterministic model."""
    results_pps: dict[str, list[float]] = field(default_factory=dict)
    trial_seconds_median: dict[str, float] = field(default_factory=dict)
    trial_seconds_total: dict[str, float] = field(default_factory=dict)
    above_sent: dict[str, float] = field(default_factory=dict)
    flags: dict[str, dict[str, int]] = field(default_factory=dict)

    def gap(self, algorithm: str = "mlr", reference: str = "csit") -> float | None:
        """(algorithm's median - reference's) / reference's; None without a reference result."""
        ref = self.median_pps.get(reference)
        if not ref or algorithm not in self.median_pps:
            return None
        return (self.median_pps[algorithm] - ref) / ref

    def gap_se(self, algorithm: str = "mlr", reference: str = "csit") -> float:
        """Standard error of `gap` (both medians' errors, relative to the reference's median)."""
        ref = self.median_pps.get(reference)
        if not ref:
            return 0.0
        return math.hypot(self.median_se_pps.get(algorithm, 0.0), self.median_se_pps.get(reference, 0.0)) / ref

    def agrees(self, algorithm: str = "mlr", reference: str = "csit", sigmas: float = 2.0) -> bool:
        """Is `algorithm`'s median within the goal's relative width of `reference`'s? On a noisy
        model the medians' own uncertainty is allowed on top: `sigmas` x `gap_se` (a median over
        a few seeds of a stalling DUT is uncertain by more than the width)."""
        gap = self.gap(algorithm, reference)
        return gap is not None and abs(gap) <= self.relative_width * (1 + 1e-9) + sigmas * self.gap_se(algorithm, reference)

    def seconds_ratio(self, algorithm: str = "mlr", reference: str = "csit") -> float | None:
        ref = self.trial_seconds_total.get(reference)
        if not ref or algorithm not in self.trial_seconds_total:
            return None
        return self.trial_seconds_total[algorithm] / ref

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "goal_set": self.goal_set, "goal": self.goal,
                "relative_width": self.relative_width, "seeds": self.seeds, "median_pps": self.median_pps,
                "median_se_pps": self.median_se_pps, "trial_seconds_median": self.trial_seconds_median, "trial_seconds_total": self.trial_seconds_total,
                "highest_result_over_sent": self.above_sent, "flags": self.flags,
                "mlr_vs_csit_gap": self.gap(), "mlr_vs_csit_gap_se": self.gap_se(),
                "mlr_vs_csit_trial_seconds": self.seconds_ratio(), "mlr_agrees_with_csit": self.agrees()}


def compare(models: Sequence[Model] = MODELS, goal_sets: Sequence[str] = tuple(GOAL_SETS),
            seeds: Iterable[int] | None = None, contenders: Sequence[str] = ("mlr", "csit")) -> list[Row]:
    """Every contender on every model and goal set; one `Row` per (model, goal). `seeds`: the
    seeds of every noisy model; None: each model's own `Model.seeds` (0, 1, ...)."""
    rows = []
    for m in models:
        for gs in goal_sets:
            these = tuple(seeds) if seeds is not None else tuple(range(m.seeds_for(gs)))
            runs = {alg: run(alg, m, gs, these) for alg in contenders}
            first = next(iter(runs.values()))
            for k, goal in enumerate(first.goals):
                row = Row(m.name, gs, goal.name or f"goal{k}", goal.relative_width, len(first.seeds))
                for alg, r in runs.items():
                    if alg == "binary" and k > 0:
                        continue  # the binary search answers the first goal only
                    row.median_pps[alg] = r.median(k)
                    values = r.throughputs(k)
                    row.results_pps[alg] = values
                    row.median_se_pps[alg] = 1.2533 * statistics.stdev(values) / math.sqrt(len(values)) \
                        if len(values) > 1 else 0.0
                    row.trial_seconds_median[alg] = statistics.median(r.trial_seconds)
                    row.trial_seconds_total[alg] = math.fsum(r.trial_seconds)
                    row.above_sent[alg] = r.above_sent()
                    row.flags[alg] = r.flags(k)
                rows.append(row)
    return rows
