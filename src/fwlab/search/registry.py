"""Search algorithms by name, and the single entry point `run_search`.

Owns: the name -> algorithm table (filled by the `@register` decorator in each algorithm module)
and the checks common to every search (load limits, resume, on_trial).
Never touches: traffic (only the measurer does), files, the CLI.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from fwlab.errors import SearchError
from fwlab.registry import Registry
from fwlab.search.measurer import Measurer
from fwlab.search.result import SearchResult
from fwlab.search.trial_log import DEFAULT_GENERATOR_RETRIES, DEFAULT_MAX_TRIALS, OnTrial, TrialLog


class SearchAlgorithm(Protocol):
    """What a registered algorithm is: goals parsing is its own business."""

    def __call__(self, log: TrialLog, max_load_pps: float, min_load_pps: float,
                 goals: Any) -> list[SearchResult]: ...


ALGORITHMS: Registry[SearchAlgorithm] = Registry("search algorithm", SearchError)
"""Registered search algorithms by name."""


def register(name: str) -> Callable[[SearchAlgorithm], SearchAlgorithm]:
    """Decorator: make `fn` available to `run_search` as `name`."""

    def add(fn: SearchAlgorithm) -> SearchAlgorithm:
        return ALGORITHMS.add(name, fn)

    return add


def run_search(
    name: str,
    measurer: Measurer,
    max_load_pps: float,
    min_load_pps: float,
    goals: Any = None,
    *,
    resume: Iterable[Any] | None = None,
    on_trial: OnTrial | None = None,
    max_trials: int = DEFAULT_MAX_TRIALS,
    generator_retries: int = DEFAULT_GENERATOR_RETRIES,
) -> list[SearchResult]:
    """Run the search `name` and return one `SearchResult` per goal.

    goals: algorithm specific. binary: a `BinaryGoal`, a dict of its fields, or None (defaults).
      mlr: a `SearchGoal`, a preset name ("rfc2544", "tst009", "csit", "csit-pdr"), a dict, or a
      list of those; None means ["csit", "csit-pdr"].
    resume: trials recorded by an interrupted run of the same search (TrialResult, SearchTrial
      or their dicts), replayed in order instead of measured again.
    on_trial: called with each newly measured `SearchTrial`, right after it is measured.
    generator_retries: how often a trial whose generator fell short is measured again.
    """
    algorithm = ALGORITHMS.get(name)
    for label, value in (("max_load_pps", max_load_pps), ("min_load_pps", min_load_pps)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value):
            raise SearchError(f"{label} must be a finite number, got {value!r}",
                              fix=f"set {label} in packets per second")
    if not 0 < min_load_pps < max_load_pps:
        raise SearchError(
            f"need 0 < min_load_pps < max_load_pps, got {min_load_pps} and {max_load_pps}",
            fix="set a positive minimum load below the maximum load",
        )
    log = TrialLog(measurer, resume=resume, on_trial=on_trial, max_trials=max_trials,
                   generator_retries=generator_retries)
    return algorithm(log, float(max_load_pps), float(min_load_pps), goals)
