"""RFC 2544 §26.1 throughput by binary search, exactly as seed 001 ran it.

Procedure (one repetition):
1. step down: try 100 % of the maximum load; on failure drop by `step_down_ratio` of the maximum
   (100 %, 80 %, 60 % ...; never below the minimum load) until a trial passes;
2. bisect between the last passing and the last failing load until the width is reached
   ((fail - pass) / fail <= relative_width, or fail - pass <= absolute_width_pps if given);
3. if search trials are shorter than `final_trial_duration_s`, confirm the last pass with one
   full-length trial; if that fails it becomes the new failing load and the search goes on
   below it with full-length trials only (bisecting from the best lower pass, which gets its own
   full-length confirmation, or stepping down further).
A trial passes when its loss ratio is <= `loss_ratio` (0 for RFC 2544) and its generator was not
short. With `repetitions` > 1 the whole search runs that many times; the result holds the means
and keeps each run in `repetitions`.

Owns: the binary procedure and `BinaryGoal`. Never touches: traffic (only the measurer does).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, fields
from typing import Any

from fwlab.errors import SearchError
from fwlab.search.measurer import TrialResult
from fwlab.search.registry import register
from fwlab.search.result import (
    IRREGULAR_FLAGS,
    SearchResult,
    SearchTrial,
    generator_set_bound,
    relative_width,
)
from fwlab.search.trial_log import TrialLog

_SLACK = 1e-9


@dataclass(frozen=True)
class BinaryGoal:
    """Options of the RFC 2544 binary search."""

    trial_duration_s: float = 60.0
    """Duration of the search's trials [s]."""
    final_trial_duration_s: float = 60.0
    """Duration of the confirming trial at the result [s]; >= trial_duration_s (RFC 2544: 60)."""
    loss_ratio: float = 0.0
    """Highest loss ratio that still passes [0..1); RFC 2544 throughput is 0."""
    step_down_ratio: float = 0.2
    """Step of the initial descent, as a fraction of the maximum load (0..1]."""
    relative_width: float = 0.005
    """Stop when (fail - pass) / fail is at most this (0..1)."""
    absolute_width_pps: float | None = None
    """If set, stop when fail - pass is at most this [packets/s] instead of relative_width."""
    repetitions: int = 1
    """How many times the whole search runs; results are averaged (seed 001: 3)."""

    def __post_init__(self) -> None:
        problems = []
        for name in ("trial_duration_s", "final_trial_duration_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                problems.append(f"{name} must be > 0")
        if not problems and self.final_trial_duration_s < self.trial_duration_s:
            problems.append("final_trial_duration_s must be >= trial_duration_s")
        if not 0 <= self.loss_ratio < 1:
            problems.append("loss_ratio must be in [0, 1)")
        if not 0 < self.step_down_ratio <= 1:
            problems.append("step_down_ratio must be in (0, 1]")
        if not 0 < self.relative_width < 1:
            problems.append("relative_width must be in (0, 1)")
        if self.absolute_width_pps is not None and not self.absolute_width_pps > 0:
            problems.append("absolute_width_pps must be > 0 when set")
        if isinstance(self.repetitions, bool) or not isinstance(self.repetitions, int) \
                or self.repetitions < 1:
            problems.append("repetitions must be an int >= 1")
        if problems:
            raise SearchError(f"invalid binary search goal ({'; '.join(problems)}): {self!r}",
                              fix="correct the search options in the suite")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_any(cls, goals: Any) -> BinaryGoal:
        """Accept None (defaults), a BinaryGoal, a dict of its fields, or a one-item list."""
        if goals is None:
            return cls()
        if isinstance(goals, cls):
            return goals
        if isinstance(goals, (list, tuple)) and len(goals) == 1:
            return cls.from_any(goals[0])
        if isinstance(goals, dict):
            known = {f.name for f in fields(cls)}
            unknown = set(goals) - known
            if unknown:
                raise SearchError(f"unknown binary search options {sorted(unknown)}",
                                  fix=f"use only {', '.join(sorted(known))}")
            return cls(**goals)
        raise SearchError(f"binary search takes one BinaryGoal, got {goals!r}",
                          fix="pass a BinaryGoal, a dict of its fields, or nothing")

    def width_ok(self, lower: float, upper: float) -> bool:
        if self.absolute_width_pps is not None:
            return upper - lower <= self.absolute_width_pps * (1 + _SLACK)
        return (upper - lower) / upper <= self.relative_width * (1 + _SLACK)

    def passes(self, trial: TrialResult) -> bool:
        return not trial.generator_short and trial.loss_ratio <= self.loss_ratio


def _one_repetition(log: TrialLog, max_load: float, min_load: float, goal: BinaryGoal,
                    label: str) -> SearchResult:
    first = len(log.trials)
    duration = goal.trial_duration_s
    final = goal.final_trial_duration_s
    passes: list[float] = []  # loads that passed, in any duration
    confirmed: set[float] = set()  # loads that passed a full-length trial

    def trial(load: float, dur: float, phase: str) -> bool:
        passed = log.run(dur, load, f"{label}/{phase}", goal.passes, goal.loss_ratio).passed
        if passed:
            passes.append(load)
            if dur >= final:
                confirmed.add(load)
        return passed

    lo: float | None = None  # last (highest) passing load
    hi: float | None = None  # lowest failing load above lo
    step = 0
    min_failed = False
    while True:
        if lo is None:  # step down
            if hi is not None and hi <= min_load:
                min_failed = True
                break
            load = max(min_load, max_load * (1.0 - step * goal.step_down_ratio))
            step += 1
            if hi is not None and load >= hi:
                continue
            if trial(load, duration, "step-down"):
                lo = load
            else:
                hi = load
                if load <= min_load:
                    min_failed = True
                    break
            continue
        if hi is not None and not goal.width_ok(lo, hi):
            load = (lo + hi) / 2.0
            if trial(load, duration, "bisect"):
                lo = load
            else:
                hi = load
            continue
        if lo in confirmed:
            break
        if trial(lo, final, "final"):
            break
        # The full-length trial failed where a shorter one passed: short trials are not to be
        # trusted here, so go on below it with full-length trials only.
        hi = lo
        duration = final
        lo = max((p for p in passes if p < hi), default=None)

    trials = tuple(log.trials[first:])
    return _result(goal, None if min_failed else lo, hi, max_load, trials)


def _result(goal: BinaryGoal, lo: float | None, hi: float | None, max_load: float,
            trials: tuple[SearchTrial, ...]) -> SearchResult:
    flags = set()
    if lo is None:
        flags.add("min_load_failed")
    elif lo >= max_load:
        flags.add("max_load_passed")
    if generator_set_bound(trials, hi, goal.loss_ratio):
        flags.add("generator_short_trials")
    width = relative_width(lo, hi)
    width_reached = lo is not None and hi is not None and goal.width_ok(lo, hi)
    if lo is not None and hi is not None and not width_reached:
        flags.add("width_not_reached")
    # Loss inversion: among trials of one duration, a higher load passed where a lower failed.
    inversion = False
    for duration in {t.result.duration_s for t in trials}:
        same = [t for t in trials if t.result.duration_s == duration]
        passed = [t.result.intended_load_pps for t in same if t.passed]
        failed = [t.result.intended_load_pps for t in same if not t.passed]
        inversion = inversion or bool(passed and failed and max(passed) > min(failed))
    return SearchResult(
        algorithm="binary",
        goal=goal.to_dict(),
        lower_bound_pps=lo,
        upper_bound_pps=hi,
        throughput_pps=lo,
        trials=trials,
        trial_count=len(trials),
        trial_seconds=sum(t.result.duration_s for t in trials),
        width_reached=width_reached,
        relative_width=width,
        irregular=tuple(f for f in IRREGULAR_FLAGS if f in flags),
        loss_inversion=inversion,
    )


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    if not present or len(present) != len(values):
        return None
    return statistics.fmean(present)


@register("binary")
def binary_search(log: TrialLog, max_load_pps: float, min_load_pps: float,
                  goals: Any = None) -> list[SearchResult]:
    """RFC 2544 binary search (see the module docstring); returns one result."""
    goal = BinaryGoal.from_any(goals)
    runs = [_one_repetition(log, max_load_pps, min_load_pps, goal, f"rep{i + 1}")
            for i in range(goal.repetitions)]
    if len(runs) == 1:
        return runs
    flags = {f for run in runs for f in run.irregular}
    widths = [r.relative_width for r in runs]
    trials = tuple(log.trials)
    return [SearchResult(
        algorithm="binary",
        goal=goal.to_dict(),
        lower_bound_pps=_mean([r.lower_bound_pps for r in runs]),
        upper_bound_pps=_mean([r.upper_bound_pps for r in runs]),
        # Average what passed; a run where nothing passed contributes nothing but is flagged.
        throughput_pps=(statistics.fmean(v) if (v := [r.throughput_pps for r in runs
                                                       if r.throughput_pps is not None]) else None),
        trials=trials,
        trial_count=len(trials),
        trial_seconds=sum(t.result.duration_s for t in trials),
        width_reached=all(r.width_reached for r in runs),
        relative_width=None if None in widths else max(widths),
        irregular=tuple(f for f in IRREGULAR_FLAGS if f in flags),
        loss_inversion=any(r.loss_inversion for r in runs),
        repetitions=tuple(runs),
    )]
