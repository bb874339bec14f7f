"""CSIT's own MLRsearch (PyPI ``MLRsearch``, FD.io) as a registered search: ``"csit"``.

Owns: translating fwlab's `SearchGoal` into the reference's goal, driving the reference's
controller through fwlab's measurer seam (every trial goes through the `TrialLog`, so resume,
`on_trial`, retries and the run record work as for fwlab's own searches) and turning its
`GoalResult` into fwlab's `SearchResult`.
Never touches: traffic (only the measurer does), the reference's logic (it runs unchanged).

What the reference is given, and why:
- no warm-up trial (fwlab's rfc2544 method measures the bed's maximum load before any search);
- ``fail_fast`` off: a goal whose minimum load fails returns no lower bound (fwlab flags
  ``min_load_failed``) instead of raising;
- a wall-clock limit of a day (its default 20 min would end a long RFC 2544 goal on a live bed;
  fwlab's `TrialLog.max_trials` is the safety stop);
- counts as the measurer reported them, except that a DUT's duplicates never make the forwarded
  count exceed the offered one and an over-sending generator never makes the intended count
  smaller than the offered one (the reference would count either as loss; fwlab records
  duplicates apart).
The reference's loss ratio is (lost + unsent) / intended, the same as `TrialResult.loss_ratio`.
Phases are "<first goal's name>/csit-<duration>s": the reference does not tell its measurer which
target asked for a trial. A trial's `passed` is judged by the first goal's loss ratio.
"""

from __future__ import annotations

import math
from typing import Any

from fwlab.errors import SearchError
from fwlab.search.measurer import TrialResult
from fwlab.search.mlr import SearchGoal, goals_of
from fwlab.search.registry import register
from fwlab.search.result import IRREGULAR_FLAGS, SearchResult, generator_set_bound, relative_width
from fwlab.search.trial_log import TrialLog

_SLACK = 1e-9

REFERENCE = "MLRsearch"
"""The PyPI distribution this search runs (CSIT's implementation, 1.2.1 when written)."""


def reference_version() -> str | None:
    """The installed MLRsearch version, None when it is missing."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(REFERENCE)
    except PackageNotFoundError:
        return None


def _reference():
    try:
        import MLRsearch  # noqa: N813  (the distribution's own name)
    except ImportError:
        raise SearchError("search 'csit' needs the MLRsearch package (CSIT's reference implementation)",
                          fix="pip install 'MLRsearch==1.2.1' into fwlab's environment") from None
    return MLRsearch


def reference_goal(goal: SearchGoal) -> Any:
    """The reference's SearchGoal for fwlab's `goal` (same fields, the reference's names)."""
    ref = _reference()
    coefficient = goal.expansion_coefficient
    if not float(coefficient).is_integer():
        raise SearchError(f"search 'csit' needs a whole expansion_coefficient, not {coefficient}",
                          fix="set expansion_coefficient = 2 (the reference's default) or use search 'mlr'")
    try:
        return ref.SearchGoal(
            loss_ratio=goal.loss_ratio, exceed_ratio=goal.exceed_ratio, relative_width=goal.relative_width,
            initial_trial_duration=goal.initial_trial_duration_s, final_trial_duration=goal.final_trial_duration_s,
            duration_sum=goal.duration_sum_s, preceding_targets=goal.preceding_targets,
            expansion_coefficient=int(coefficient), fail_fast=False)
    except ValueError as exc:  # fwlab's goal checks should have refused it first
        raise SearchError(f"the MLRsearch reference refuses goal {goal.name or goal}: {exc}",
                          fix="correct the goal in the suite or start from a preset") from None


class _Seam:
    """The reference's measurer, backed by fwlab's trial log."""

    def __init__(self, log: TrialLog, phase: str, judge_loss_ratio: float) -> None:
        self.log, self.phase, self.judge_loss_ratio = log, phase, judge_loss_ratio

    def passes(self, trial: TrialResult) -> bool:
        return not trial.generator_short and trial.loss_ratio <= self.judge_loss_ratio

    def measure(self, intended_duration: float, intended_load: float) -> Any:
        trial = self.log.run(float(intended_duration), float(intended_load),
                             f"{self.phase}/csit-{intended_duration:g}s", self.passes, self.judge_loss_ratio)
        r = trial.result
        return _reference().MeasurementResult(
            intended_duration=r.duration_s, intended_load=r.intended_load_pps,
            offered_count=r.offered_count, forwarding_count=min(r.forwarded_count, r.offered_count),
            intended_count=max(r.intended_count, r.offered_count))


@register("csit")
def csit_search(log: TrialLog, max_load_pps: float, min_load_pps: float,
                goals: Any = None) -> list[SearchResult]:
    """CSIT's MLRsearch on fwlab's goals (same presets and fields as "mlr"); one result per goal."""
    ref = _reference()
    parsed = goals_of(goals)
    ref_goals = [reference_goal(g) for g in parsed]
    if len(set(ref_goals)) != len(ref_goals):
        raise SearchError("search 'csit' was given the same goal twice",
                          fix="drop the duplicate goal (the reference keys its results by goal)")
    config = ref.Config()
    config.goals = ref_goals
    if max_load_pps > config.min_load:  # each setter checks against the other's current value
        config.max_load, config.min_load = max_load_pps, min_load_pps
    else:
        config.min_load, config.max_load = min_load_pps, max_load_pps
    config.search_duration_max = 86_400.0
    config.warmup_duration = None
    seam = _Seam(log, parsed[0].name or "goal0", parsed[0].loss_ratio)

    class Measurer(ref.AbstractMeasurer):
        def measure(self, intended_duration: float, intended_load: float) -> Any:
            return seam.measure(intended_duration, intended_load)

    found = ref.MultipleLossRatioSearch(config=config).search(measurer=Measurer(), debug=lambda _text: None)
    return [_goal_result(goal, found[ref_goal], log, max_load_pps) for goal, ref_goal in zip(parsed, ref_goals)]


def _goal_result(goal: SearchGoal, found: Any, log: TrialLog, max_load: float) -> SearchResult:
    clo = None if found.relevant_lower_bound is None else float(found.relevant_lower_bound)
    chi = None if found.relevant_upper_bound is None else float(found.relevant_upper_bound)
    tput = found.conditional_throughput
    flags = set()
    if clo is None:
        flags.add("min_load_failed")
    elif clo >= max_load * (1 - _SLACK):
        flags.add("max_load_passed")
    if generator_set_bound(log.trials, chi, goal.loss_ratio):
        flags.add("generator_short_trials")
    width = relative_width(clo, chi)
    # the reference's width is on its discrete load grid; one grid step of slack
    width_reached = width is not None and width <= goal.relative_width * (1 + 1e-6) + 1e-6
    if width is not None and not width_reached:
        flags.add("width_not_reached")
    trials = tuple(log.trials)
    return SearchResult(
        algorithm="csit", goal=goal.to_dict(), lower_bound_pps=clo, upper_bound_pps=chi,
        throughput_pps=None if tput is None else float(tput), trials=trials, trial_count=len(trials),
        trial_seconds=math.fsum(t.result.duration_s for t in trials), width_reached=width_reached,
        relative_width=width, irregular=tuple(f for f in IRREGULAR_FLAGS if f in flags))
