"""A search followed trial by trial, for a progress display.

Owns: `SearchWatch`, an ``on_trial`` hook for `run_search` that turns each newly measured trial
into one line of text — the load just tried, its duration, loss and verdict, and the bounds so
far — and hands it on. With the search's goal, the bounds are the goal's relevant lower and
upper bound at its final target, as the report's search trace draws them
(`fwlab.search.mlr.bounds_after_each_trial`: a binary search is the goal with exceed ratio 0 at
its final trial length); without one, per trial duration the highest load that passed and the
lowest that failed.
Never touches: traffic, the terminal or files (the caller decides where the text goes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fwlab.errors import SearchError
from fwlab.search.measurer import TrialResult
from fwlab.search.mlr import SearchGoal, bounds_after_each_trial
from fwlab.search.result import SearchTrial


def load_text(value: float, unit: str = "pps") -> str:
    """A load for the display: 812.3 kpps, 1.234 Mpps; other units as whole numbers."""
    if unit == "pps":
        if value >= 1e6:
            return f"{value / 1e6:.3f} Mpps"
        if value >= 1e3:
            return f"{value / 1e3:.1f} kpps"
        return f"{value:.0f} pps"
    return f"{value:,.0f} {unit}"


@dataclass
class SearchWatch:
    """Call it with each `SearchTrial` (``run_search(..., on_trial=watch)``); it calls ``show``
    with one line per trial."""

    show: Callable[[str], None]
    label: str = "search"
    unit: str = "pps"
    #: the goal whose relevant bounds are shown; None: highest passed / lowest failed per duration
    goal: SearchGoal | None = None
    trials: int = 0
    #: per trial duration [s]: (highest load passed, lowest load failed) so far, None for neither
    bounds: dict[float, tuple[float | None, float | None]] = field(default_factory=dict)
    results: list[TrialResult] = field(default_factory=list)

    def __call__(self, trial: SearchTrial) -> None:
        self.trials += 1
        r = trial.result
        self.results.append(r)
        load = r.intended_load_pps
        lo, hi = self.bounds.get(r.duration_s, (None, None))
        if trial.passed:
            lo = load if lo is None else max(lo, load)
        else:
            hi = load if hi is None else min(hi, load)
        self.bounds[r.duration_s] = (lo, hi)
        self.show(self.text(trial))

    def text(self, trial: SearchTrial) -> str:
        r = trial.result
        verdict = "passed" if trial.passed else "failed"
        head = (f"{self.label} trial {self.trials} ({trial.phase}): {load_text(r.intended_load_pps, self.unit)} "
                f"for {r.duration_s:g} s, loss {100 * r.loss_ratio:.3g} %, {verdict}; ")
        if (bounds := self.goal_bounds()) is not None:
            lo, hi = bounds
            return head + (f"bounds {self._or_dash(lo)} .. {self._or_dash(hi)}"
                           f"{f' ({self.goal.name})' if self.goal.name else ''}")
        lo, hi = self.bounds.get(r.duration_s, (None, None))
        return head + f"at {r.duration_s:g} s passed up to {self._or_dash(lo)}, failed from {self._or_dash(hi)}"

    def goal_bounds(self) -> tuple[float | None, float | None] | None:
        """The goal's (lower, upper) bounds after the trials so far; None without a goal (or one
        the trials cannot be judged by)."""
        if self.goal is None or not self.results:
            return None
        try:
            return bounds_after_each_trial(self.results, self.goal)[-1]
        except SearchError:
            return None

    def _or_dash(self, value: float | None) -> str:
        return "-" if value is None else load_text(value, self.unit)
