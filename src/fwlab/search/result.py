"""What a search hands back: `SearchTrial` (one trial with its phase) and `SearchResult`.

Owns: the result dataclasses and their JSON round trip, and which attempts a search measured
again (`measured_again`) and whether a generator-short one may have set a result.
Never touches: traffic, the measurer, files (the caller's run record stores `to_dict()`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fwlab.errors import SearchError
from fwlab.search.measurer import TrialResult

IRREGULAR_FLAGS = (
    "max_load_passed",
    "min_load_failed",
    "generator_short_trials",
    "width_not_reached",
)
"""Flags a `SearchResult` may carry in `irregular`:

- max_load_passed: the maximum load itself passed; the real throughput may be higher.
- min_load_failed: even the minimum load failed; there is no lower bound.
- generator_short_trials: a trial the search judged (not one it measured again) had its
  generator send < 99 % of its intended count, or fail only by what it did not send, at a load at
  or below the upper bound the result stands on (`generator_set_bound`); unsent frames count as
  loss, so the result may describe the generator, not the DUT. One at a higher load changed nothing: a lower load had already
  failed for the DUT.
- width_not_reached: the search stopped before bounds were as close as the goal asked.
"""


@dataclass(frozen=True)
class SearchTrial:
    """One trial as the search used it."""

    index: int
    """Position in the search's trial sequence, from 0."""
    phase: str
    """Which part of the search asked for it, e.g. "rep1/step-down" or "csit/2of3"."""
    result: TrialResult
    """The measurer's result."""
    passed: bool
    """Did it pass the criterion of the phase that asked for it (loss ratio <= goal's loss ratio
    and generator not short)."""
    replayed: bool = False
    """True when it came from a resumed run's record instead of the measurer."""

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "phase": self.phase, "passed": self.passed,
                "replayed": self.replayed, "result": self.result.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SearchTrial:
        try:
            return cls(index=int(data["index"]), phase=str(data["phase"]),
                       passed=bool(data["passed"]), replayed=bool(data.get("replayed", False)),
                       result=TrialResult.from_dict(data["result"]))
        except KeyError as exc:
            raise SearchError(f"SearchTrial record misses {exc}: {data!r}",
                              fix="check the run record is complete") from None


RETRY_MARK = "/retry"
"""A generator-short trial's next attempt is the same phase + "/retry1", "/retry2", ...
(`fwlab.search.trial_log.TrialLog.run`)."""


def retry_of(phase: str) -> tuple[str, int]:
    """(the phase without its retry mark, the attempt's retry number: 0 for a first attempt)."""
    base, sep, n = phase.rpartition(RETRY_MARK)
    return (base, int(n)) if sep and n.isdigit() else (phase, 0)


def measured_again(attempts: Sequence[tuple[str, float, float]]) -> set[int]:
    """Positions of the attempts, each (phase, load [packets/s], duration [s]) in trial order,
    that the search measured again because the generator fell short: the next attempt is their
    retry (same phase with the next retry number, same load and duration). The search judges
    only the last attempt, so these neither pass nor fail the load."""
    out = set()
    for k in range(len(attempts) - 1):
        (phase, load, duration), (nphase, nload, nduration) = attempts[k], attempts[k + 1]
        base, n = retry_of(phase)
        if retry_of(nphase) == (base, n + 1) and nload == load and nduration == duration:
            out.add(k)
    return out


def generator_set_bound(trials: Sequence[SearchTrial], upper_bound_pps: float | None,
                        loss_ratio: float = 0.0) -> bool:
    """Whether the generator may have set a result: a trial the search judged (`measured_again`
    leaves out the attempts it replaced) at a load at or below the upper bound the result stands
    on (or anywhere when there is none) that was generator-short, or whose unsent frames made it
    exceed the goal's `loss_ratio` while the DUT's own loss stayed within it."""
    again = measured_again([(t.phase, t.result.intended_load_pps, t.result.duration_s) for t in trials])

    def generator_failed(r: TrialResult) -> bool:
        return r.generator_short or (r.unsent_count > 0 and r.dut_loss_ratio <= loss_ratio < r.loss_ratio)

    return any(generator_failed(t.result) and (upper_bound_pps is None
                                              or t.result.intended_load_pps <= upper_bound_pps * (1 + 1e-9))
               for k, t in enumerate(trials) if k not in again)


@dataclass(frozen=True)
class SearchResult:
    """The outcome of one search goal.

    `throughput_pps` is the value to report:
    - binary: the last passing load (the highest load that passed, final trial at full length),
      averaged over repetitions when there are several;
    - mlr: the draft's *conditional throughput*: relevant lower bound x (1 - the loss ratio at
      the goal's exceed-ratio quantile of its full-length trials). With a 0 % loss goal it equals
      the relevant lower bound.
    """

    algorithm: str
    """Registry name of the search ("binary", "mlr")."""
    goal: dict[str, Any]
    """The goal or options this result answers, as a plain dict."""
    lower_bound_pps: float | None
    """Highest load that passed (binary) / relevant lower bound (mlr) [packets/s]; None if none."""
    upper_bound_pps: float | None
    """Lowest load that failed above the lower bound (binary) / relevant upper bound (mlr)
    [packets/s]; None when the maximum load passed."""
    throughput_pps: float | None
    """The reported value, see the class docstring [packets/s]; None if nothing passed."""
    trials: tuple[SearchTrial, ...]
    """Every trial of the search in order (mlr goals share one trial sequence)."""
    trial_count: int
    """len(trials)."""
    trial_seconds: float
    """Sum of the trials' durations [s] (the traffic time the search cost)."""
    width_reached: bool
    """Both bounds exist and (upper - lower) / upper is within the goal's width."""
    relative_width: float | None
    """Achieved (upper - lower) / upper [0..1]; None without both bounds."""
    irregular: tuple[str, ...] = ()
    """Flags from `IRREGULAR_FLAGS`; empty for a regular result."""
    loss_inversion: bool = False
    """A load above the lower bound passed while a lower load failed (reported, tolerated)."""
    repetitions: tuple[SearchResult, ...] = ()
    """Binary search run several times: each run's own result (this one holds the averages)."""

    @property
    def regular(self) -> bool:
        return not self.irregular

    def forwarded_at_loss_pps(self, min_duration_s: float = 1.0) -> float | None:
        """The highest forwarding rate [packets/s] among this search's trials that lost frames,
        leaving out trials whose generator fell short and trials shorter than `min_duration_s`
        [s] or, when the search's longest trial is shorter, than that one (a short trial's rate
        includes its receive ring emptying); None when none is left.
        What the DUT forwarded while overloaded: a DUT whose loss comes from its per-packet cost
        alone passes up to about this rate, so a loss-based result far below it was set by
        something else (stalls, bursts into a small ring). Conservative: it only knows the loads
        the search tried; a search that ran no full trial well above its result (MLRsearch's
        overload trials are short) compares its result with the mild overloads near it."""
        if not self.trials:
            return None
        shortest = min(min_duration_s, max(t.result.duration_s for t in self.trials))
        rates = [t.result.forwarded_pps for t in self.trials
                 if t.result.loss_count > 0 and not t.result.generator_short
                 and t.result.duration_s >= shortest]
        return max(rates) if rates else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm,
            "goal": dict(self.goal),
            "lower_bound_pps": self.lower_bound_pps,
            "upper_bound_pps": self.upper_bound_pps,
            "throughput_pps": self.throughput_pps,
            "trials": [t.to_dict() for t in self.trials],
            "trial_count": self.trial_count,
            "trial_seconds": self.trial_seconds,
            "width_reached": self.width_reached,
            "relative_width": self.relative_width,
            "irregular": list(self.irregular),
            "loss_inversion": self.loss_inversion,
            "repetitions": [r.to_dict() for r in self.repetitions],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SearchResult:
        def opt(key: str) -> float | None:
            value = data.get(key)
            return None if value is None else float(value)

        try:
            return cls(
                algorithm=str(data["algorithm"]),
                goal=dict(data["goal"]),
                lower_bound_pps=opt("lower_bound_pps"),
                upper_bound_pps=opt("upper_bound_pps"),
                throughput_pps=opt("throughput_pps"),
                trials=tuple(SearchTrial.from_dict(t) for t in data["trials"]),
                trial_count=int(data["trial_count"]),
                trial_seconds=float(data["trial_seconds"]),
                width_reached=bool(data["width_reached"]),
                relative_width=opt("relative_width"),
                irregular=tuple(data.get("irregular", ())),
                loss_inversion=bool(data.get("loss_inversion", False)),
                repetitions=tuple(cls.from_dict(r) for r in data.get("repetitions", ())),
            )
        except KeyError as exc:
            raise SearchError(f"SearchResult record misses {exc}",
                              fix="check the run record is complete") from None


def relative_width(lower: float | None, upper: float | None) -> float | None:
    """(upper - lower) / upper, the width measure of both searches; None without both bounds."""
    if lower is None or upper is None or upper <= 0:
        return None
    return (upper - lower) / upper
