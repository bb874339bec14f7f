"""A rough wall-time estimate of a suite's plan, before anything runs.

Owns: the sum over a plan: each trial's own estimate from its runner (``Runner.estimate_s``: the
duration as given plus the tool's overhead; a search, probes or a capacity ramp from their
options' models), settling, floods, per test bed and per rule-set load, measured roughly on this
2-CPU machine class. The estimate is for sizing (e.g. that a --quick variant stays under
10 minutes), not a promise: a loaded machine runs slower. Never touches the kernel.
"""

from __future__ import annotations

from fwlab.suites.background import FloodSpec
from fwlab.runners import get_runner
from fwlab.run.plan import Plan
from fwlab.suites.schema import Suite

BED_S = 3.0           #: building and tearing down one test bed
RULE_LOAD_S = 0.5     #: loading (and flushing) one rule set of up to 10000 rules
#: per entry on top: generating, loading and reading back large rule sets (rule-scaling-large
#: here: a 1M-element nft set ~30 s, ipset restore of 1M ~45 s, 100k linear nft rules ~45 s)
RULE_LOAD_S_PER_ENTRY = 6e-5


def _flood_s(background: dict | None) -> float:
    """A flood beside a trial starts lead_s early and the trial waits for its tail_s."""
    if not background:
        return 0.0
    f = FloodSpec.from_dict(dict(background))
    return f.lead_s + f.tail_s if f.rate_pps else 0.0


def estimate_s(suite: Suite, plan: Plan) -> float:
    """Estimated wall time of `plan` [s] (rough; see the module docstring): each trial's runner
    estimates its own trial from its options (``Runner.estimate_s``), plus settling, floods,
    beds and rule loads."""
    total = 0.0
    for t in plan.trials:
        total += get_runner(t.tool).estimate_s(t.traffic, t.duration_s, t.streams, t.options)
        total += suite.settle_s + _flood_s(t.background)
    beds = {t.bed_key for t in plan.trials}
    loads = {(t.bed_key, t.config_key, t.repetition, t.rules) for t in plan.trials}
    return total + BED_S * len(beds) + sum(RULE_LOAD_S + RULE_LOAD_S_PER_ENTRY * n for *_, n in loads)
