"""Seed findings about a rule set's per-packet cost, decided from the in-kernel clock.

Owns: picking a configuration's cost trials (record kind ``cost``, tool ``kernel-cost``,
docs/kernel-cost.md) out of a run, and turning ``fwlab.stats.kernel_cost``'s findings (the per-rule
slope, the time a rule count adds against a smaller one, each with its interval and a three-way
verdict on a margin) into a seed :class:`Finding`. A seed's claim that the rule count slows every
packet is a claim about the firewall's own time per packet; on a shared 2-CPU host the throughput
behind the same claim is mostly the host's noise, while the in-kernel time has intervals a few ns
wide. Throughput findings stay as they are; these stand beside them with ids of their own.

Verdicts: the stats verdict "cost" / "no cost" is the claim's reproduced / not reproduced (or the
other way round for a claim that the rule count costs nothing); "undecided" is inconclusive,
within the noise of the intervals. A limiting quality flag on a cost trial read (e.g. the
generator fell short of the light load) undoes a decided verdict (``Finding.judge``). Cost trials
that exist but carry no figure (the probe could not attach: ``fw_missing``) give *not measured*
with the probe's reason. A run without cost trials for the configuration gets no such finding.
"""

from __future__ import annotations

from dataclasses import dataclass

from fwlab.published.compare import INCONCLUSIVE, NOT_MEASURED, NOT_REPRODUCED, REPRODUCED, Finding
from fwlab.results.trial import TrialRecord, as_records
from fwlab.stats.kernel_cost import (COST, NO_COST, CostAgainstZero, CostPoint, PerRuleCost, cost_against_zero,
                                     per_rule_cost)

SOURCE = "in-kernel cost"
"""How a finding's claim names its quantity: the firewall's own time per packet, timed in the DUT's kernel."""


@dataclass(frozen=True)
class CostTrials:
    """One configuration's cost trials: those with a figure, and why the others have none."""

    measured: list[TrialRecord]
    missing: list[str]  #: the probe's reasons (``fw_missing``) or the trials' errors, distinct

    def points(self) -> list[CostPoint]:
        return [CostPoint.from_metrics(t.layout, t.rules, t.repetition, t.metrics or {}) for t in self.measured]

    def rules(self) -> list[int]:
        return sorted({t.rules for t in self.measured})


def cost_trials(trials, *, backend: str, layout: str, mode: str | None = None,
                stateful_shortcut: bool | None = None, ip_version: int | None = None) -> CostTrials | None:
    """The run's cost trials of one configuration; None when the run has none."""
    sel = [t for t in as_records(trials) if t.kind == "cost" and t.backend == backend and t.layout == layout
           and (mode is None or t.mode == mode)
           and (stateful_shortcut is None or bool(t.stateful_shortcut) == stateful_shortcut)
           and (ip_version is None or t.ip_version == ip_version)]
    if not sel:
        return None
    ok = [t for t in sel if not t.error and t.metrics and t.metric("fw_p50_ns") is not None
          and not t.metric("fw_missing")]
    why = [str(t.error or t.metric("fw_missing") or "no figure") for t in sel if t not in ok]
    return CostTrials(ok, list(dict.fromkeys(why)))


def _verdict(stats_verdict: str, claim_costs: bool) -> str:
    if stats_verdict == COST:
        return REPRODUCED if claim_costs else NOT_REPRODUCED
    if stats_verdict == NO_COST:
        return NOT_REPRODUCED if claim_costs else REPRODUCED
    return INCONCLUSIVE


def _iv(low: float | None, high: float | None, digits: int, unit: str) -> str:
    if low is None or high is None:
        return "[no interval]"
    return f"[{low:,.{digits}f}, {high:,.{digits}f}] {unit}"


def _undecided(low: float | None, high: float | None, margin: float, unit: str, digits: int) -> str:
    if low is None or high is None:
        return "no interval (a trial without a per-packet interval, or 2 points for a slope)"
    return (f"its interval {_iv(low, high, digits, unit)} reaches across the ±{margin:g} {unit} margin: "
            "within noise of the per-packet intervals and the repetitions")


def _not_measured(ct: CostTrials | None, what: str) -> str:
    if ct is not None and ct.missing:
        return f"no in-kernel figure for {what}: missing: {'; '.join(ct.missing)}"
    return f"no in-kernel cost trial for {what} in this run"


def slope_finding(ct: CostTrials | None, layout: str, *, id: str, claim: str, published: str, name: str,
                  claim_costs: bool = True) -> Finding | None:
    """A finding on the per-rule slope of the configuration's in-kernel time (reproduced when the
    slope's interval lies above the margin and the claim is that every rule costs; a claim that
    rules cost nothing the other way round). None without cost trials at all; not measured with
    fewer than two measured rule counts."""
    if ct is None:
        return None
    crit = ("the 95 % t interval of the least-squares slope of the in-kernel time per packet over the rule "
            "counts (every repetition a point) entirely above the margin of "
            f"{'+' if claim_costs else '±'}0.1 ns/rule (entirely inside ±0.1 -> "
            f"{'not reproduced' if claim_costs else 'reproduced'}; across -> inconclusive)")
    s: PerRuleCost | None = per_rule_cost(ct.points(), layout) if len(ct.rules()) >= 2 else None
    if s is None:
        miss = ct.missing or [f"fewer than two rule counts measured ({', '.join(f'{n:,}' for n in ct.rules())})"]
        return Finding(id=id, claim=claim, published=published, criterion=crit, verdict=NOT_MEASURED,
                       fwlab=_not_measured(CostTrials([], miss), name))
    what = "referenced" if s.referenced else "raw medians, no reference"
    verdict = _verdict(s.verdict, claim_costs)
    why = _undecided(s.low_ns, s.high_ns, s.margin_ns_per_rule, "ns/rule", 2) if verdict == INCONCLUSIVE else ""
    return Finding.judge(
        id=id, claim=claim, published=published, criterion=crit, verdict=verdict, reason=why, used=ct.measured,
        fwlab=f"fwlab {name}, {SOURCE} ({what}): {s.per_rule_ns:,.2f} ns/rule per packet "
              f"{_iv(s.low_ns, s.high_ns, 2, 'ns/rule')} (95 % t interval) over {s.n_points} trials at {s.n_rule_counts} rule counts "
              f"({', '.join(f'{n:,}' for n in ct.rules())}).")


def added_finding(ct: CostTrials | None, layout: str, rules: int, *, base_rules: int = 0, id: str, claim: str,
                  published: str, name: str, claim_costs: bool = True) -> Finding | None:
    """A finding on the time ``rules`` add per packet against ``base_rules`` (reproduced when the
    interval lies above the margin and the claim is that they cost; the other way round for a
    claim that they cost nothing). None without cost trials at all."""
    if ct is None:
        return None
    c: CostAgainstZero | None = None
    if rules > base_rules:
        c = cost_against_zero(ct.points(), layout, rules, base_rules=base_rules)
    margin = c.margin_ns if c is not None else 20.0
    crit = (f"the interval of the in-kernel time {rules:,} rules add per packet against {base_rules:,} rules "
            f"(per-packet 95 % intervals of each trial's median, over the repetitions) entirely "
            + (f"above +{margin:g} ns (entirely inside ±{margin:g} ns -> not reproduced"
               if claim_costs else f"inside ±{margin:g} ns (entirely above +{margin:g} ns -> not reproduced")
            + "; across -> inconclusive)")
    if c is None:
        miss = ct.missing or [f"no repetition measured both {base_rules:,} and {rules:,} rules"]
        return Finding(id=id, claim=claim, published=published, criterion=crit, verdict=NOT_MEASURED,
                       fwlab=_not_measured(CostTrials([], miss), name))
    what = "referenced" if c.referenced else "raw medians, no reference"
    verdict = _verdict(c.verdict, claim_costs)
    why = _undecided(c.low_ns, c.high_ns, c.margin_ns, "ns", 0) if verdict == INCONCLUSIVE else ""
    used = [t for t in ct.measured if t.rules in (rules, base_rules)]
    return Finding.judge(
        id=id, claim=claim, published=published, criterion=crit, verdict=verdict, reason=why, used=used,
        fwlab=f"fwlab {name}, {SOURCE} ({what}): {rules:,} rules add {c.added_ns:+,.0f} ns/packet "
              f"{_iv(c.low_ns, c.high_ns, 0, 'ns')} against {base_rules:,} rules ({c.how}).")
