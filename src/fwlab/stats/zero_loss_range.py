"""Where a DUT's zero-loss load at one trial length is a range, not one number.

Owns: pooling the trials of repeated searches (RFC 2544 binary search, MLRsearch) and finding the
loads where trials of the searches' full length both passed and failed. Never touches: traffic or
the record's files; callers hand it the trials (the report from the record, ``fwlab bench
search`` from its runs).

A search judges each load by one trial (or a few); on a DUT whose zero-loss load varies from
trial to trial (a shared CPU's stalls, a wandering capacity) the same load passes one time and
fails the next. Pooled over repetitions, the lowest full-length failure then lies below the
highest full-length pass: between them a trial may go either way. A result inside that range
depends on how many trials the search spent there and how it judged them (with exceed ratio 0
one failure is an upper bound, so each further trial can only lower it). Generator-short trials
say nothing of the DUT and are left out. "Passed" is the caller's judgement by the goal's loss
ratio, so for a goal that allows some loss the range is that goal's, not a zero-loss one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class JudgedTrial:
    """One search trial as far as this module needs it."""

    duration_s: float
    load_pps: float  #: the intended load
    passed: bool
    generator_short: bool = False
    source: str = ""  #: who measured it (e.g. the search algorithm), for the per-source counts


@dataclass(frozen=True)
class ZeroLossRange:
    duration_s: float  #: the full trial length the range holds for [s]
    low_pps: float  #: the lowest load a full-length trial failed at
    high_pps: float  #: the highest load a full-length trial passed at (> low_pps)
    trials: int  #: full-length trials at loads in [low_pps, high_pps]
    passed: int  #: of those, the ones that passed
    by_source: dict[str, int] = field(default_factory=dict)  #: trials in the range per source

    @property
    def relative_span(self) -> float:
        """(high - low) / high."""
        return (self.high_pps - self.low_pps) / self.high_pps

    def to_dict(self) -> dict:
        return {"duration_s": self.duration_s, "low_pps": self.low_pps, "high_pps": self.high_pps,
                "relative_span": self.relative_span, "trials": self.trials, "passed": self.passed,
                "by_source": dict(self.by_source)}


def zero_loss_range(trials: Iterable[JudgedTrial]) -> ZeroLossRange | None:
    """The range where full-length trials (the longest duration among ``trials``) passed and failed
    alike; None when every full-length failure lies above every full-length pass (one zero-loss
    load), or there is no full-length pass or no failure."""
    pool = [t for t in trials if not t.generator_short]
    longest = max((t.duration_s for t in pool), default=0.0)
    full = [t for t in pool if t.duration_s >= longest * (1 - 1e-9)]
    fails = [t.load_pps for t in full if not t.passed]
    passes = [t.load_pps for t in full if t.passed]
    if not fails or not passes or min(fails) >= max(passes):
        return None
    low, high = min(fails), max(passes)
    inside = [t for t in full if low <= t.load_pps <= high]
    by_source: dict[str, int] = {}
    for t in inside:
        by_source[t.source] = by_source.get(t.source, 0) + 1
    return ZeroLossRange(duration_s=longest, low_pps=low, high_pps=high, trials=len(inside),
                         passed=sum(1 for t in inside if t.passed), by_source=by_source)


__all__ = ["JudgedTrial", "ZeroLossRange", "zero_loss_range"]
