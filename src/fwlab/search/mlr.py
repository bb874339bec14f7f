"""MLRsearch (draft-ietf-bmwg-mlrsearch, FD.io CSIT): several goals, short trials, robust bounds.

Owns: `SearchGoal`, the goal presets, load classification, relevant bounds, conditional
throughput and the load-selection logic. Never touches: traffic (only the measurer does).

Semantics, following the draft (our own code):
- A trial is *bad* for a goal when its loss ratio exceeds the goal's loss ratio, or its generator
  was short (such a trial never passes). Trials at least as long as the goal's final trial are
  *long*, others *short*.
- Load classification (draft appendix A). Per load the trials' durations are summed into good and
  bad, long and short. Short good trials may only cancel short bad ones:
      effective_bad = bad_long + max(0, bad_short - good_short * q / (1 - q))
      whole = max(duration_sum, good_long + effective_bad);   q = exceed_ratio
  The load is a *lower bound* when even all missing trials bad would keep the bad part within
  q * whole (whole - good_long <= q * whole, i.e. good_long >= (1 - q) * duration_sum once the
  sum is reached), an *upper bound* when even all missing trials good could not (effective_bad >
  q * whole), and *undecided* otherwise: it gets more trials.
- Relevant upper bound: the smallest upper bound. Relevant lower bound: the largest lower bound
  below it. A lower bound above the relevant upper bound (loss inversion) is ignored and flagged.
- Conditional throughput (draft appendix B): relevant lower bound x (1 - loss ratio of the
  long trial at the q quantile of the duration-sorted long trials); the reported throughput.

How loads are picked (the search's own strategy, CSIT-like):
- Each goal is reached through a chain of targets: `preceding_targets` coarse ones, then the goal
  itself. Going back from the goal, each coarser target has twice the width (in log space: the
  load ratio squared), and a duration sum shrinking geometrically from `duration_sum_s` down to
  `initial_trial_duration_s`; its trials last min(final trial duration, its duration sum).
- The first target starts from the maximum load, then the forwarding rate measured there.
- Within a target, strategies are tried in order, the first that wants a load gets it (CSIT's
  order): halve the previous target's interval first when it is one to two of this target's
  widths wide (its geometric middle, asked for until decided: one load at the longer trials
  instead of re-measuring both old bounds); refine the previous target's lower bound while
  undecided; extend down from the upper bound (external search: steps start at the target width
  and grow by `expansion_coefficient` per failing step; in the first target only, they never land
  above the highest forwarding rate measured at that bound -- the receive rate step of CSIT's first
  MLRsearch) while there is no lower bound; refine the previous upper bound; extend up likewise
  while there is no upper bound; then narrow the interval until the width is reached: step in from
  a trusted bound (carried from the previous target, or the forwarding rate at the maximum load)
  with the same expanding steps while that lands closer to it than the middle; else bisect at the
  geometric middle. An undecided load is asked for again until it is decided.
  (Measured against CSIT's reference on the simulated DUTs, `fwlab.search.comparison`: the
  forwarding rate is no guide once the first target is done -- on a DUT whose forwarding rate
  collapses under overload, or whose capacity is noisy, it steered fwlab's steps far below the
  result, costing up to 2.6x the reference's trial seconds and results up to 1 % low.)
- In a final target with exceed ratio 0, a load never measured before is first tried at the
  previous target's trial length: a bad trial of any length is an upper bound there, only a
  full-length one can be a lower bound, so failing loads cost a short trial, passing ones a short
  and a long one; a load below one that already passed such a short trial gets the long trial
  at once (the short one would pass and tell nothing).
- With several goals, every goal nominates a load; the shortest trial wins (ties: the lower load,
  then the earlier goal), so coarse phases of all goals run before long final trials, and all
  goals share every trial.
- The search is deterministic given the trial results, which is what makes `resume` replay work.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from fwlab.errors import SearchError
from fwlab.search.measurer import TrialResult
from fwlab.search.registry import register
from fwlab.search.result import IRREGULAR_FLAGS, SearchResult, generator_set_bound, relative_width
from fwlab.search.trial_log import TrialLog

_SLACK = 1e-9
LOWER, UPPER, UNDECIDED = "lower", "upper", "undecided"


@dataclass(frozen=True)
class SearchGoal:
    """One MLRsearch goal (draft "search goal")."""

    final_trial_duration_s: float = 1.0
    """Duration of the trials that can make a lower bound [s]."""
    duration_sum_s: float = 21.0
    """Trial seconds per load needed before a load is decided for sure [s]."""
    loss_ratio: float = 0.0
    """A trial with a higher loss ratio is bad [0..1): 0 for NDR, 0.005 for CSIT PDR."""
    exceed_ratio: float = 0.5
    """Share of the duration sum that may be bad for a lower bound [0..1): 0 = every trial must
    pass (RFC 2544), 0.5 = the median trial must pass."""
    relative_width: float = 0.005
    """Stop when (upper - lower) / upper is at most this (0..1)."""
    initial_trial_duration_s: float = 1.0
    """Trial duration of the first, coarsest target [s]; <= the final trial duration."""
    preceding_targets: int = 2
    """Number of coarse targets before the goal itself."""
    expansion_coefficient: float = 2.0
    """External search: each further step in the same direction is this many times wider (> 1)."""
    name: str = ""
    """Label for phases and reports, e.g. "csit-pdr"; empty means "goal<N>"."""

    def __post_init__(self) -> None:
        problems = []
        for key in ("final_trial_duration_s", "duration_sum_s", "initial_trial_duration_s"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value <= 0:
                problems.append(f"{key} must be a number > 0")
        if not problems:
            if self.initial_trial_duration_s > self.final_trial_duration_s:
                problems.append("initial_trial_duration_s must be <= final_trial_duration_s")
            if self.duration_sum_s < self.final_trial_duration_s:
                problems.append(f"duration_sum_s ({self.duration_sum_s:g}) must be >= final_trial_duration_s "
                                f"({self.final_trial_duration_s:g})")
        if not 0 <= self.loss_ratio < 1:
            problems.append("loss_ratio must be in [0, 1)")
        if not 0 <= self.exceed_ratio < 1:
            problems.append("exceed_ratio must be in [0, 1)")
        if not 0 < self.relative_width < 1:
            problems.append("relative_width must be in (0, 1)")
        if isinstance(self.preceding_targets, bool) or not isinstance(self.preceding_targets, int) \
                or self.preceding_targets < 0:
            problems.append("preceding_targets must be an int >= 0")
        elif self.preceding_targets == 0 and self.initial_trial_duration_s < self.duration_sum_s:
            problems.append("preceding_targets = 0 needs initial_trial_duration_s = duration_sum_s "
                            "(no coarse target to go from the initial to the final trials)")
        if not (isinstance(self.expansion_coefficient, (int, float)) and self.expansion_coefficient > 1):
            problems.append("expansion_coefficient must be > 1")
        if problems:
            raise SearchError(f"invalid search goal ({'; '.join(problems)}): {self!r}",
                              fix="correct the goal in the suite or start from a preset")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_any(cls, item: Any) -> SearchGoal:
        """A SearchGoal, a preset name, or a dict of fields (optionally with "preset": name)."""
        if isinstance(item, cls):
            return item
        if isinstance(item, str):
            return preset(item)
        if isinstance(item, dict):
            data = dict(item)
            base = preset(data.pop("preset")) if "preset" in data else cls()
            known = {f.name for f in fields(cls)}
            unknown = set(data) - known
            if unknown:
                raise SearchError(f"unknown search goal keys {sorted(unknown)}",
                                  fix=f"use only preset, {', '.join(sorted(known))}")
            merged = {**asdict(base), **data}
            return cls(**merged)
        raise SearchError(f"not a search goal: {item!r}",
                          fix="pass a SearchGoal, a preset name or a dict of goal fields")


PRESETS: dict[str, SearchGoal] = {
    "rfc2544": SearchGoal(final_trial_duration_s=60.0, duration_sum_s=60.0, loss_ratio=0.0,
                          exceed_ratio=0.0, name="rfc2544"),
    "tst009": SearchGoal(final_trial_duration_s=60.0, duration_sum_s=120.0, loss_ratio=0.0,
                         exceed_ratio=0.5, name="tst009"),
    "csit": SearchGoal(final_trial_duration_s=1.0, duration_sum_s=21.0, loss_ratio=0.0,
                       exceed_ratio=0.5, relative_width=0.005, name="csit"),
    "csit-pdr": SearchGoal(final_trial_duration_s=1.0, duration_sum_s=21.0, loss_ratio=0.005,
                           exceed_ratio=0.5, relative_width=0.005, name="csit-pdr"),
}
"""Goal presets from the draft and CSIT (all with relative width 0.5 %, initial trials 1 s)."""


def preset(name: str) -> SearchGoal:
    try:
        return PRESETS[name]
    except KeyError:
        raise SearchError(f"unknown search goal preset {name!r}",
                          fix=f"use one of {', '.join(PRESETS)}") from None


# Targets ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """One step on the way to a goal; the last target of a chain is the goal itself."""

    goal_index: int
    step: int
    """1-based position in its chain."""
    steps: int
    loss_ratio: float
    exceed_ratio: float
    width: float
    """Relative width (upper - lower) / upper to reach [0..1)."""
    trial_duration_s: float
    duration_sum_s: float
    label: str

    @property
    def final(self) -> bool:
        return self.step == self.steps

    def is_bad(self, trial: TrialResult) -> bool:
        return trial.generator_short or trial.loss_ratio > self.loss_ratio

    def is_long(self, trial: TrialResult) -> bool:
        return trial.duration_s >= self.trial_duration_s * (1 - _SLACK)

    def passes(self, trial: TrialResult) -> bool:
        return not self.is_bad(trial)


def _widen(width: float, factor: float) -> float:
    """Multiply a relative width in log space: 1 - (1 - w) ** factor."""
    if factor == 1:
        return width
    return 1.0 - (1.0 - width) ** factor


def build_targets(goal: SearchGoal, goal_index: int) -> list[Target]:
    """The goal's chain of targets, coarsest first, the goal itself last."""
    name = goal.name or f"goal{goal_index}"
    count = goal.preceding_targets
    steps = count + 1
    multiplier = (goal.initial_trial_duration_s / goal.duration_sum_s) ** (1.0 / count) \
        if count else 1.0
    chain = []
    for back in range(count, -1, -1):  # back = how many steps before the goal
        if back == 0:
            dur_sum = goal.duration_sum_s
        elif back == count:
            dur_sum = goal.initial_trial_duration_s
        else:
            dur_sum = goal.duration_sum_s * multiplier ** back
        step = steps - back
        chain.append(Target(
            goal_index=goal_index, step=step, steps=steps,
            loss_ratio=goal.loss_ratio, exceed_ratio=goal.exceed_ratio,
            width=_widen(goal.relative_width, 2.0 ** back),
            trial_duration_s=min(goal.final_trial_duration_s, dur_sum),
            duration_sum_s=dur_sum,
            label=f"{name}/{step}of{steps}",
        ))
    return chain


# Classification -----------------------------------------------------------------------------

def classify(trials: list[TrialResult], target: Target) -> str:
    """Draft appendix A: LOWER, UPPER or UNDECIDED for the trials of one load."""
    good_long = bad_long = good_short = bad_short = 0.0
    for trial in trials:
        long = target.is_long(trial)
        if target.is_bad(trial):
            if long:
                bad_long += trial.duration_s
            else:
                bad_short += trial.duration_s
        elif long:
            good_long += trial.duration_s
        else:
            good_short += trial.duration_s
    q = target.exceed_ratio
    balancing = good_short * q / (1.0 - q)
    effective_bad = bad_long + max(0.0, bad_short - balancing)
    whole = max(target.duration_sum_s, good_long + effective_bad)
    quantile_sum = whole * q
    optimistic = effective_bad <= quantile_sum * (1 + _SLACK)
    pessimistic = (whole - good_long) <= quantile_sum * (1 + _SLACK)
    if optimistic and pessimistic:
        return LOWER
    if not optimistic and not pessimistic:
        return UPPER
    return UNDECIDED


def _search_loss_ratio(trial: TrialResult) -> float:
    """Loss ratio as the search sees it: a generator-short trial counts as losing everything."""
    return 1.0 if trial.generator_short else trial.loss_ratio


def conditional_throughput(load: float, trials: list[TrialResult], target: Target) -> float:
    """Draft appendix B: load x (1 - quantile loss ratio of the long trials)."""
    long_trials = sorted((t for t in trials if target.is_long(t)), key=_search_loss_ratio)
    good_long = sum(t.duration_s for t in long_trials if not target.is_bad(t))
    bad_long = sum(t.duration_s for t in long_trials if target.is_bad(t))
    remaining = max(target.duration_sum_s, good_long + bad_long) * (1.0 - target.exceed_ratio)
    quantile_loss: float | None = None
    for trial in long_trials:
        if quantile_loss is None or remaining > 0.0:
            quantile_loss = _search_loss_ratio(trial)
            remaining -= trial.duration_s
        else:
            break
    else:
        if remaining > 1e-9 or quantile_loss is None:
            quantile_loss = 1.0
    return load * (1.0 - quantile_loss)


class Database:
    """All trials of one search, by intended load."""

    def __init__(self) -> None:
        self.by_load: dict[float, list[TrialResult]] = {}

    def add(self, load: float, trial: TrialResult) -> None:
        self.by_load.setdefault(load, []).append(trial)

    def classify(self, load: float, target: Target) -> str:
        return classify(self.by_load.get(load, []), target)

    def classes(self, target: Target) -> dict[float, str]:
        return {load: classify(trials, target) for load, trials in self.by_load.items()}

    def bounds(self, target: Target) -> tuple[float | None, float | None]:
        """(relevant lower bound, relevant upper bound) for the target; None where missing."""
        classes = self.classes(target)
        uppers = [load for load, cls in classes.items() if cls == UPPER]
        chi = min(uppers) if uppers else None
        lowers = [load for load, cls in classes.items()
                  if cls == LOWER and (chi is None or load < chi)]
        return (max(lowers) if lowers else None), chi

    def loss_inversion(self, target: Target) -> bool:
        """True when some lower bound lies above the relevant upper bound (it is ignored)."""
        _, chi = self.bounds(target)
        return chi is not None and any(
            cls == LOWER and load > chi for load, cls in self.classes(target).items())


# Selection ----------------------------------------------------------------------------------

class Selector:
    """Walks one goal through its targets, nominating one load at a time."""

    def __init__(self, goal: SearchGoal, goal_index: int, db: Database,
                 min_load: float, max_load: float) -> None:
        self.goal = goal
        self.targets = build_targets(goal, goal_index)
        self.index = 0
        self.db = db
        self.min_load = min_load
        self.max_load = max_load
        self.prev_lo: float | None = None
        self.prev_hi: float | None = max_load
        self.ext_width = self.targets[0].width
        self.pending: tuple[str, float] | None = None

    @property
    def target(self) -> Target:
        return self.targets[self.index]

    def _initial_lower(self) -> float | None:
        """First target only: the forwarding rate seen at the maximum load, if below it."""
        trials = self.db.by_load.get(self.max_load)
        if not trials:
            return None
        rate = trials[0].forwarded_pps
        if rate >= self.max_load:
            return None
        return max(self.min_load, rate)

    def _forwarded(self, load: float) -> float:
        """The highest forwarding rate of the trials at `load` [packets/s]: for a DUT with a
        fixed capacity below `load`, that capacity (CSIT's first MLRsearch stepped to the
        receive rate of a failed trial; the highest, as the lowest of a noisy DUT's trials steps
        too far). In the first target, stepping down from an upper bound never goes above it;
        a generator-short trial says nothing of the DUT and is left out."""
        rates = [t.forwarded_pps for t in self.db.by_load.get(load, []) if not t.generator_short]
        return max(rates, default=load)

    def nominate(self) -> tuple[str, float, float] | None:
        """(strategy, load, trial duration) the goal wants next, or None when it is reached."""
        while True:
            target = self.target
            clo, chi = self.db.bounds(target)
            self._settle(target, clo, chi)
            choice = self._choose(target, clo, chi)
            if choice is not None:
                return choice[0], choice[1], self._duration(target, choice[1])
            if target.final:
                return None
            self.prev_lo, self.prev_hi = clo, chi
            self.index += 1
            self.ext_width = self.target.width
            self.pending = None

    def _duration(self, target: Target, load: float) -> float:
        """Trial duration for `load`: the target's, except for a first look at a new load in a
        final target with exceed ratio 0. There one bad trial of any length makes an upper
        bound (nothing can balance it), while only a full-length trial can make a lower bound;
        so a load never measured before gets a trial of the previous target's length first, and
        the full-length trial only if that one passed (classification leaves it undecided)."""
        if (target.final and self.index > 0 and target.exceed_ratio == 0.0
                and not self.db.by_load.get(load)):
            short = self.targets[self.index - 1].trial_duration_s
            if not self._short_pass_above(load, short, target):
                return short
        return target.trial_duration_s

    def _short_pass_above(self, load: float, duration_s: float, target: Target) -> bool:
        """Did some load at or above `load` pass a trial at least `duration_s` long? Then a
        trial of that length at `load` would pass too (loss grows with load) and tells nothing:
        the full-length trial is measured at once."""
        return any(other >= load and any(t.duration_s >= duration_s * (1 - _SLACK) and target.passes(t)
                                         for t in trials)
                   for other, trials in self.db.by_load.items())

    def won(self, strategy: str, load: float) -> None:
        """The nominated load was measured; remember extensions to grow their step."""
        self.pending = (strategy, load) if strategy.startswith("extend") else None

    def _settle(self, target: Target, clo: float | None, chi: float | None) -> None:
        if self.pending is None:
            return
        strategy, load = self.pending
        cls = self.db.classify(load, target)
        if cls == UNDECIDED:
            return
        same_side = (strategy in ("extend_lo", "extend_lo_guided") and cls == UPPER) or \
                    (strategy == "extend_hi" and cls == LOWER)
        if same_side:
            self.ext_width = _widen(self.ext_width, self.goal.expansion_coefficient)
        else:
            self.ext_width = target.width
        self.pending = None

    def _halving_load(self, target: Target) -> float | None:
        """The geometric middle of the previous target's bounds when they lie more than one and
        at most two of this target's widths apart (CSIT's halving: one load to measure at this
        target's trials instead of both old bounds); None otherwise, and in the first target."""
        if self.index == 0 or self.prev_lo is None or self.prev_hi is None or self.prev_lo >= self.prev_hi:
            return None
        widths = math.log(self.prev_lo / self.prev_hi) / math.log(1.0 - target.width)
        if not 1.0 + 1e-6 < widths <= 2.0 + 1e-6:
            return None
        return math.sqrt(self.prev_lo * self.prev_hi)

    def _relevant_undecided(self, load: float | None, target: Target,
                            clo: float | None, chi: float | None) -> bool:
        return (load is not None
                and (clo is None or load > clo) and (chi is None or load < chi)
                and self.db.classify(load, target) == UNDECIDED)

    def _choose(self, target: Target, clo: float | None,
                chi: float | None) -> tuple[str, float] | None:
        prev_lo = self._initial_lower() if self.index == 0 else self.prev_lo
        middle = self._halving_load(target)
        if middle is not None and self._relevant_undecided(middle, target, clo, chi):
            return "halve", middle
        if self._relevant_undecided(prev_lo, target, clo, chi):
            return "refine_lo", prev_lo
        if chi is not None and clo is None:
            if chi <= self.min_load:
                return None  # the minimum load failed
            step, forwarded = chi * (1.0 - self.ext_width), self._forwarded(chi)
            if forwarded < step and self.index == 0:
                return "extend_lo_guided", max(self.min_load, forwarded)
            return "extend_lo", max(self.min_load, step)
        if self._relevant_undecided(self.prev_hi, target, clo, chi):
            return "refine_hi", self.prev_hi
        if clo is not None and chi is None:
            if clo >= self.max_load:
                return None  # the maximum load passed
            return "extend_hi", min(self.max_load, clo / (1.0 - self.ext_width))
        if clo is not None and chi is not None:
            if (chi - clo) / chi <= target.width * (1 + _SLACK):
                return None
            middle = math.sqrt(clo * chi)
            if not clo < middle < chi:
                return None
            # Narrowing from a trusted side (a bound carried over unchanged from the previous
            # target, or the forwarding rate at the maximum load) with the expanding step, while
            # that step is closer than the middle: results usually lie near such a bound. A
            # bound just found by this target's own external search is no better than the
            # other one, so then the interval is bisected.
            if self.index > 0 and chi == self.prev_hi:
                load = chi * (1.0 - self.ext_width)
                if middle < load < chi:
                    return "extend_lo", load
            if clo == prev_lo:
                load = clo / (1.0 - self.ext_width)
                if clo < load < middle:
                    return "extend_hi", load
            return "bisect", middle
        # Nothing is classified yet (e.g. the maximum load only has shorter trials).
        return "refine_hi", self.max_load


def goals_of(goals: Any) -> list[SearchGoal]:
    """The goals a search was given, parsed (None: CSIT's NDR and PDR presets)."""
    if goals is None:
        goals = ["csit", "csit-pdr"]
    if isinstance(goals, (str, dict, SearchGoal)):
        goals = [goals]
    parsed = [SearchGoal.from_any(g) for g in goals]
    if not parsed:
        raise SearchError("mlr search needs at least one goal", fix="add a goal or a preset")
    return parsed


@register("mlr")
def mlr_search(log: TrialLog, max_load_pps: float, min_load_pps: float,
               goals: Any = None) -> list[SearchResult]:
    """MLRsearch (see the module docstring); one result per goal, in the order given."""
    parsed = goals_of(goals)
    db = Database()
    selectors = [Selector(g, i, db, min_load_pps, max_load_pps) for i, g in enumerate(parsed)]
    while True:
        nominations = []
        for position, selector in enumerate(selectors):
            choice = selector.nominate()
            if choice is not None:
                strategy, load, duration = choice
                nominations.append((duration, load, position, strategy))
        if not nominations:
            break
        duration, load, position, strategy = min(nominations)
        target = selectors[position].target
        trial = log.run(duration, load, target.label, target.passes, target.loss_ratio)
        db.add(load, trial.result)
        # Every goal that nominated the same trial got what it asked for.
        for d, other_load, other_position, other_strategy in nominations:
            if d == duration and other_load == load:
                selectors[other_position].won(other_strategy, load)
    return [_goal_result(sel, db, log, max_load_pps) for sel in selectors]


def _goal_result(selector: Selector, db: Database, log: TrialLog,
                 max_load: float) -> SearchResult:
    target = selector.targets[-1]
    clo, chi = db.bounds(target)
    flags = set()
    if clo is None:
        flags.add("min_load_failed")
    elif clo >= max_load:
        flags.add("max_load_passed")
    if generator_set_bound(log.trials, chi, selector.goal.loss_ratio):
        flags.add("generator_short_trials")
    width = relative_width(clo, chi)
    width_reached = width is not None and width <= target.width * (1 + _SLACK)
    if width is not None and not width_reached:
        flags.add("width_not_reached")
    throughput = None if clo is None else conditional_throughput(clo, db.by_load[clo], target)
    trials = tuple(log.trials)
    return SearchResult(
        algorithm="mlr",
        goal=selector.goal.to_dict(),
        lower_bound_pps=clo,
        upper_bound_pps=chi,
        throughput_pps=throughput,
        trials=trials,
        trial_count=len(trials),
        trial_seconds=sum(t.result.duration_s for t in trials),
        width_reached=width_reached,
        relative_width=width,
        irregular=tuple(f for f in IRREGULAR_FLAGS if f in flags),
        loss_inversion=db.loss_inversion(target),
    )


def bounds_after_each_trial(trials: list[TrialResult], goal: SearchGoal) -> list[tuple[float | None, float | None]]:
    """The goal's relevant (lower, upper) bounds [packets/s] as they stood after each trial of a
    search, by the draft's classification at the goal's final target (None where a bound is
    missing): the search's trace narrowing. Any search's trials can be judged so: a binary search
    is the goal with exceed ratio 0 and its final trial length."""
    target = build_targets(goal, 0)[-1]
    db = Database()
    out = []
    for trial in trials:
        db.add(trial.intended_load_pps, trial)
        out.append(db.bounds(target))
    return out
