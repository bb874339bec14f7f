"""A rough wall-time estimate of a suite's plan, before anything runs.

Owns: per-trial overheads by traffic kind (tool start, connection set-up, counter reads), per
test bed and per rule-set load, measured roughly on this 2-CPU machine class; a load search
counts its expected trials. The estimate is for sizing (e.g. that a --quick variant stays under
10 minutes), not a promise: a loaded machine runs slower. Never touches the kernel.
"""

from __future__ import annotations

from fwlab.suites.plan import Plan
from fwlab.suites.schema import Suite

#: seconds added to each trial's duration, by traffic kind
TRIAL_OVERHEAD_S = {"tcp": 1.0, "udp": 1.0, "engine": 1.2, "http": 1.8, "ftp": 1.8, "mix": 2.5, "tcp_rr": 1.0, "tcp_crr": 1.0,
                    "frame_loss": 2.0, "back_to_back": 5.0}
BED_S = 3.0           #: building and tearing down one test bed
RULE_LOAD_S = 0.5     #: loading (and flushing) one rule set of up to 10000 rules
SEARCH_TRIALS = 12    #: trials of one throughput search, including the maximum-load trials
CONN_OPEN_CPS = 20000.0   #: connections a capacity trial opens per second (fwlab-engine conn-hold, rough)
CAPACITY_TRIALS = 6   #: trials of one capacity search (ramp, then binary search below its failure)


def _search_s(suite: Suite, options: dict) -> float:
    goal = options.get("goal")
    if options.get("algorithm") == "binary":
        g = goal if isinstance(goal, dict) else {}
        trial = float(g.get("trial_duration_s", suite.duration_s))
        final = float(g.get("final_trial_duration_s", trial))
        return (SEARCH_TRIALS - 1) * (trial + 0.5) + final + 2 * float(options.get("mrr_duration_s", 2.0))
    trial = suite.duration_s
    if isinstance(goal, dict):
        trial = float(goal.get("final_trial_duration_s", trial))
    lat = len(options.get("latency_at") or []) * float(options.get("latency_duration_s", 5.0))
    return SEARCH_TRIALS * (trial + 0.5) + lat + 2 * float(options.get("mrr_duration_s", 2.0))


def _probes_s(options: dict, duration_s: float = 0.0) -> float:
    """Kind parallel: the single-stream baseline and, at worst (no probe recovers), every probe;
    probes during the load add only the load's extra length (``load_s``) to the trial's."""
    probe = float(options.get("probe_s", 2.0))
    s = probe + 1.0 if options.get("baseline", True) else 0.0
    n = int(options.get("max_probes", 12))
    if options.get("during"):
        return s + max(0.0, float(options.get("load_s") or duration_s) - duration_s)
    if n:
        s += (n - 1) * float(options.get("interval_s", 10.0)) + probe + 1.0
    return s


def _capacity_s(options: dict) -> float:
    """Kind conn_capacity: each trial opens up to the target, holds, probes and closes."""
    none = options.get("search") == "none"
    top = float(options.get("count") if none else options.get("max_count", 500_000))
    per = top / CONN_OPEN_CPS + float(options.get("hold_s", 2.0)) + 3.0
    return per * (1 if none else CAPACITY_TRIALS)


def _flood_s(background: dict | None) -> float:
    """A flood beside a trial starts lead_s early and the trial waits for its tail_s."""
    if not background or not background.get("rate_pps"):
        return 0.0
    return float(background.get("lead_s", 1.0)) + float(background.get("tail_s", 2.0))


def estimate_s(suite: Suite, plan: Plan) -> float:
    """Estimated wall time of `plan` [s] (rough; see the module docstring)."""
    total = 0.0
    for t in plan.trials:
        if t.traffic == "throughput":
            total += _search_s(suite, t.options)
        elif t.traffic == "conn_capacity":
            total += _capacity_s(t.options) + suite.settle_s
        else:
            total += t.duration_s + suite.settle_s + TRIAL_OVERHEAD_S.get(t.traffic, 1.5)
            if t.streams > 16:
                total += 0.01 * t.streams   # connection set-up of many streams
            if t.traffic == "parallel":
                total += _probes_s(t.options, t.duration_s)
            total += _flood_s(t.background)
    beds = {t.bed_key for t in plan.trials}
    loads = {(t.bed_key, t.config_key, t.repetition) for t in plan.trials}
    return total + BED_S * len(beds) + RULE_LOAD_S * len(loads)
