"""Where a search's trial seconds went, for ``fwlab bench search``: each trial of a search
classified once (its MLRsearch phase, full length or not, failed after a shorter pass), the
phases' seconds, their shares of the binary search's seconds, and what keeps the ratio up.

Owns: pure reading of one search's recorded trace. Never runs a trial or reads a record file.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from fwlab.search.result import measured_again

MLR_PHASES = ("max_rate", "preceding_targets", "final_target_shorter", "final_at_lower_bound",
              "final_at_upper_bound", "final_failed_below_shorter_pass", "generator_short_retried", "final_other")
"""MLRsearch's trial seconds, taken apart (see :func:`phases`)."""


def _target_step(phase: str) -> tuple[int, int] | None:
    """(k, n) of an MLRsearch phase label such as "rfc2544-like/2of3" (retries included)."""
    for part in phase.split("/"):
        k, sep, n = part.partition("of")
        if sep and k.isdigit() and n.isdigit():
            return int(k), int(n)
    return None


FULL_LENGTH_PHASES = ("final_at_lower_bound", "final_at_upper_bound", "final_failed_below_shorter_pass",
                      "generator_short_retried", "final_other")
"""The phases made of full-length trials (the rest of MLR_PHASES are shorter trials)."""

def remeasured(trials: list[dict]) -> set[int]:
    """Indices of the trace's attempts the search measured again (`fwlab.search.result.measured_again`)."""
    return measured_again([(t.get("phase", ""), t["load_pps"], t["duration_s"]) for t in trials])


@dataclass(frozen=True)
class TrialClass:
    """Where one search trial's seconds go (:func:`classify`)."""

    phase: str  #: one of MLR_PHASES
    full_length: bool  #: the search's longest trial duration
    #: a full-length trial that failed where an earlier shorter trial had passed: "at" the same
    #: load, "below" (only a higher load had passed a shorter trial), None otherwise
    failed_after_shorter_pass: str | None


def classify(run: dict) -> list[TrialClass]:
    """Each trial of one search, classified once (phases and spending both derive from it):
    - ``max_rate``: its first trial, at the maximum load (its forwarding rate sets the first bounds);
    - ``preceding_targets``: the coarse targets' shorter trials;
    - ``final_target_shorter``: the final target's shorter pre-trials at new loads;
    - ``final_at_lower_bound`` / ``final_at_upper_bound``: full-length trials at the two loads the
      result stands on (the pass no schedule can avoid, and the fail when the upper bound needed one);
    - ``final_failed_below_shorter_pass``: other full-length trials that failed at or below a load
      that had passed a shorter trial: what the short trials' optimism costs on this DUT;
    - ``generator_short_retried``: full-length attempts whose generator fell short and that the
      search measured again ("<phase>/retryN" follows): the generator's cost, not the DUT's;
    - ``final_other``: the remaining full-length trials (narrowing passes).
    Shorter attempts measured again stay in their target's phase."""
    trials = run.get("trials") or []
    longest = max((t["duration_s"] for t in trials), default=0.0)
    lower, upper = run.get("lower_bound_pps"), run.get("upper_bound_pps")
    again = remeasured(trials)
    out = []
    for k, t in enumerate(trials):
        d, load = t["duration_s"], t["load_pps"]
        full = d >= longest
        after = None
        if full and not t["passed"] and k not in again:
            passed_short = [u["load_pps"] for i, u in enumerate(trials[:k])
                            if u["passed"] and u["duration_s"] < longest and i not in again]
            after = "at" if load in passed_short else "below" if any(x > load for x in passed_short) else None
        step = _target_step(t.get("phase", ""))
        final = step is not None and step[0] == step[1]
        if k == 0:
            key = "max_rate"
        elif not full:
            key = "final_target_shorter" if final else "preceding_targets"
        elif k in again:
            key = "generator_short_retried"
        elif lower is not None and load == round(lower) and t["passed"]:
            key = "final_at_lower_bound"
        elif upper is not None and load == round(upper) and not t["passed"]:
            key = "final_at_upper_bound"
        elif after is not None:
            key = "final_failed_below_shorter_pass"
        else:
            key = "final_other"
        out.append(TrialClass(key, full, after))
    return out


def phases(run: dict) -> dict[str, float]:
    """One search's trial seconds by phase (:func:`classify`)."""
    out = dict.fromkeys(MLR_PHASES, 0.0)
    for t, c in zip(run.get("trials") or [], classify(run)):
        out[c.phase] += t["duration_s"]
    return out


def phase_breakdown(runs: list[dict], binary_seconds_per_search: float | None) -> dict | None:
    """MLRsearch's trial seconds by phase (:func:`phases`), per search on average and as a share of
    the binary search's mean trial seconds: the parts add up to ``mlr_vs_binary``."""
    ok = [r for r in runs if r["algorithm"] == "mlr" and r.get("trial_seconds") is not None]
    if not ok or not binary_seconds_per_search:
        return None
    each = [phases(r) for r in ok]
    per = {key: statistics.fmean(p[key] for p in each) for key in MLR_PHASES}
    out = {key: {"seconds_per_search": sec, "of_binary": sec / binary_seconds_per_search}
           for key, sec in per.items()}
    # the coarse targets one by one ("1of3 0.5 s": the first target's trials after the max-rate one)
    steps: dict[str, float] = {}
    for r in ok:
        for k, t in enumerate(r.get("trials") or []):
            step = _target_step(t["phase"])
            if k and step is not None and step[0] < step[1]:
                key = f"{step[0]}of{step[1]} {t['duration_s']:g} s"
                steps[key] = steps.get(key, 0.0) + t["duration_s"] / len(ok)
    out["preceding_targets"]["by_target"] = dict(sorted(steps.items()))
    return out


def what_stops_it(ratio: float | None, parts: dict | None) -> str | None:
    """Which measured parts keep ``ratio`` up, in one sentence (:func:`compare` gives it when the
    goal was not shown reached); None when nothing was measured."""
    if ratio is None or parts is None:
        return None
    share = {key: v["of_binary"] for key, v in parts.items()}
    final = sum(share[key] for key in FULL_LENGTH_PHASES)
    biggest = max(share, key=share.get)
    return (f"full-length trials alone are {final:.2f} of the binary search's trial seconds "
            f"(at the two bounds {share['final_at_lower_bound'] + share['final_at_upper_bound']:.2f}, failed at or "
            f"below a load a shorter trial had passed {share['final_failed_below_shorter_pass']:.2f}, "
            f"generator fell short and measured again {share['generator_short_retried']:.2f}), shorter "
            f"trials {share['max_rate'] + share['preceding_targets'] + share['final_target_shorter']:.2f}; "
            f"the largest part is {biggest} ({share[biggest]:.2f}); without the failures after a shorter pass "
            f"the ratio would be {ratio - share['final_failed_below_shorter_pass']:.2f}")
