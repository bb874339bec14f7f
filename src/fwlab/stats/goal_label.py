"""What a rate search's result is called: "zero-loss" only for a goal with loss ratio 0 and exceed
ratio 0; any other goal is named by its numbers (e.g. "PDR 0.5 %, exceed 0.5").

Owns: reading the goal of an RFC 2544 throughput trial (``extra.rfc2544.results[0].goal``, else
``metrics.goal``) and naming it. Pure; reads trial records (``TrialRecord``).
"""

from __future__ import annotations

from collections.abc import Iterable

from fwlab.results.trial import TrialRecord, as_records

__all__ = ["goal_name", "trial_goal", "result_label"]


def goal_name(loss_ratio: float | None, exceed_ratio: float | None) -> str:
    """'zero-loss' (loss 0, exceed 0), 'NDR, exceed 0.5' (loss 0, exceed > 0) or
    'PDR 0.5 %, exceed 0.5' (loss > 0); 'unknown goal' when the loss ratio is unknown."""
    if loss_ratio is None:
        return "unknown goal"
    loss, exceed = float(loss_ratio), float(exceed_ratio or 0.0)
    if loss == 0.0 and exceed == 0.0:
        return "zero-loss"
    head = "NDR" if loss == 0.0 else f"PDR {100.0 * loss:g} %"
    return head + (f", exceed {exceed:g}" if exceed else "")


def trial_goal(trial: TrialRecord) -> tuple[float | None, float | None]:
    """(loss_ratio, exceed_ratio) of the trial's main search goal; a binary search without a goal
    table searched for zero loss, every trial counted: (0, 0)."""
    results = ((trial.extra.get("rfc2544") or {}).get("results") or [])
    if results:
        g = results[0].get("goal") or {}
        if "loss_ratio" in g:
            return g.get("loss_ratio"), g.get("exceed_ratio", 0.0)
        if results[0].get("algorithm") == "binary":
            return 0.0, 0.0
    if trial.metric("algorithm") == "binary":
        return 0.0, 0.0
    return None, None


def result_label(trials: Iterable[dict | TrialRecord], quantity: str = "throughput") -> str:
    """'zero-loss throughput', 'PDR 0.5 %, exceed 0.5 throughput', or, when the trials' goals
    differ or are unknown, 'search throughput (goals: ...)'."""
    names = sorted({goal_name(*trial_goal(t)) for t in as_records(trials)})
    if len(names) == 1 and names[0] != "unknown goal":
        return f"{names[0]} {quantity}"
    return f"search {quantity}" + (f" (goals: {', '.join(names)})" if names else "")
