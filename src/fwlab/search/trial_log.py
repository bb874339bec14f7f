"""The trial log: every trial a search asks for goes through here.

Owns: checking what the measurer returns, replaying a resumed run's recorded trials in order
instead of measuring them again, numbering and phase-labelling trials, and calling the caller's
`on_trial` hook after each new trial (so it can be written to disk at once).
Never touches: traffic or files itself; it only calls `Measurer.measure` and the hook.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from fwlab.errors import SearchError
from fwlab.search.measurer import GENERATOR_SHORT_RATIO, Measurer, TrialResult
from fwlab.search.result import RETRY_MARK, SearchTrial

OnTrial = Callable[[SearchTrial], None]
"""Hook called after every newly measured trial (replayed trials are already recorded)."""

DEFAULT_MAX_TRIALS = 100_000
"""Safety stop: a search that asks for more trials than this is a bug, not a measurement."""

DEFAULT_GENERATOR_RETRIES = 2
"""A trial whose generator fell short cannot pass (its unsent frames count as loss). It is
measured again (at most this many times) only when the shortfall looks like a transient of the
generator: an earlier trial of the search already offered at least this load, so the generator
can send it. A generator that never sent this much is at its limit, and measuring again would
only cost time (the reference MLRsearch never measures again). Nor is it measured again when the
DUT already lost more than the goal allows of what was offered: a fail at a load below the
intended one, so a fail at the intended load too. Every attempt stays in the log and counts in
trial seconds; the search judges the last one (still a fail if the generator was short again)."""


def _as_trial_result(item: Any) -> TrialResult:
    if isinstance(item, TrialResult):
        return item
    if isinstance(item, SearchTrial):
        return item.result
    if isinstance(item, dict):
        return TrialResult.from_dict(item.get("result", item))
    raise SearchError(f"cannot resume from {item!r}",
                      fix="pass TrialResult, SearchTrial or their to_dict() output")


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


class TrialLog:
    """Runs (or replays) trials for one search and keeps them in order."""

    def __init__(
        self,
        measurer: Measurer,
        resume: Iterable[Any] | None = None,
        on_trial: OnTrial | None = None,
        max_trials: int = DEFAULT_MAX_TRIALS,
        generator_retries: int = DEFAULT_GENERATOR_RETRIES,
    ) -> None:
        if not callable(getattr(measurer, "measure", None)):
            raise SearchError(f"{measurer!r} has no measure(duration_s, load_pps) method",
                              fix="pass an object implementing fwlab.search.Measurer")
        self.measurer = measurer
        self.on_trial = on_trial
        self.max_trials = max_trials
        self.generator_retries = max(0, generator_retries)
        self._recorded = [_as_trial_result(item) for item in (resume or ())]
        self.trials: list[SearchTrial] = []

    @property
    def replayed_count(self) -> int:
        return sum(1 for t in self.trials if t.replayed)

    @property
    def trial_seconds(self) -> float:
        return sum(t.result.duration_s for t in self.trials)

    def run(
        self,
        duration_s: float,
        load_pps: float,
        phase: str,
        judge: Callable[[TrialResult], bool],
        loss_ratio: float | None = None,
    ) -> SearchTrial:
        """Measure (or replay) one trial; `judge` says whether it passed the asking phase. A
        generator-short trial is measured again, up to `generator_retries` times, when an earlier
        trial offered this load and the DUT lost no more than the goal's `loss_ratio` of what was
        offered (see `DEFAULT_GENERATOR_RETRIES`); the last attempt is returned."""
        sent_before = max((t.result.offered_load_pps for t in self.trials), default=0.0)
        trial = self._run_once(duration_s, load_pps, phase, judge)
        for attempt in range(1, self.generator_retries + 1):
            r = trial.result
            if not r.generator_short or sent_before < load_pps * GENERATOR_SHORT_RATIO \
                    or (loss_ratio is not None and r.dut_loss_ratio > loss_ratio):
                break
            trial = self._run_once(duration_s, load_pps, f"{phase}{RETRY_MARK}{attempt}", judge)
        return trial

    def _run_once(self, duration_s: float, load_pps: float, phase: str,
                  judge: Callable[[TrialResult], bool]) -> SearchTrial:
        index = len(self.trials)
        if index >= self.max_trials:
            raise SearchError(f"search asked for more than {self.max_trials} trials",
                              fix="report this as a bug with the goals and the DUT used")
        if index < len(self._recorded):
            result = self._recorded[index]
            if not (_same(result.duration_s, duration_s)
                    and _same(result.intended_load_pps, load_pps)):
                raise SearchError(
                    f"resume mismatch at trial {index}: the record has "
                    f"{result.duration_s} s at {result.intended_load_pps} pps, the search asks "
                    f"for {duration_s} s at {load_pps} pps",
                    fix="resume only with the same search, goals and load limits, or start afresh",
                )
            replayed = True
        else:
            result = self.measurer.measure(duration_s, load_pps)
            self._check(result, duration_s, load_pps)
            replayed = False
        trial = SearchTrial(index=index, phase=phase, result=result,
                            passed=bool(judge(result)), replayed=replayed)
        self.trials.append(trial)
        if not replayed and self.on_trial is not None:
            self.on_trial(trial)
        return trial

    def _check(self, result: Any, duration_s: float, load_pps: float) -> None:
        if not isinstance(result, TrialResult):
            raise SearchError(f"measurer returned {result!r}, not a TrialResult",
                              fix="make Measurer.measure return fwlab.search.TrialResult")
        if not (math.isclose(result.duration_s, duration_s, rel_tol=1e-6)
                and math.isclose(result.intended_load_pps, load_pps, rel_tol=1e-6)):
            raise SearchError(
                f"measurer was asked for {duration_s} s at {load_pps} pps but reported {result!r}",
                fix="record the intended duration and load in TrialResult, not the achieved ones",
            )
