"""The in-kernel cost findings of a record, for the overview's headline and the "Time inside the
firewall" section: the cost trials grouped per bed (mode, backend, IP version), as
``fwlab.stats.kernel_cost`` points, and the sentences that state them.

Owns: grouping and wording. The numbers are fwlab.stats.kernel_cost's. Reads the record only.
"""

from __future__ import annotations

from fwlab.results.trial import TrialRecord, as_records
from fwlab.stats.kernel_cost import CostAgainstZero, CostPoint, PerRuleCost, cost_against_zero, per_rule_cost

#: the layout whose cost is stated as a slope per rule; the others against 0 rules at their largest count
SLOPE_LAYOUTS = ("linear",)


def cost_groups(trials: list[TrialRecord]) -> dict[tuple, list[TrialRecord]]:
    """(mode, backend, ip_version) -> its measured cost trials (one bed shares one reference)."""
    out: dict[tuple, list[TrialRecord]] = {}
    for t in as_records(trials):
        if t.kind == "cost" and t.metrics and t.backend != "none":
            out.setdefault((t.mode, t.backend, t.ip_version), []).append(t)
    return out


def points(trials: list[TrialRecord]) -> list[CostPoint]:
    return [CostPoint.from_metrics(t.layout, t.rules, t.repetition, t.metrics or {}) for t in trials]


def findings(trials: list[TrialRecord]) -> list[tuple[tuple, CostAgainstZero | None, PerRuleCost | None, str]]:
    """Per group and layout: (group key, cost against 0 at the layout's largest count (non-slope
    layouts), per-rule slope (slope layouts), layout)."""
    out = []
    for key, ts in sorted(cost_groups(trials).items(), key=str):
        pts = points(ts)
        for lay in sorted({p.layout for p in pts}):
            counts = sorted({p.rules for p in pts if p.layout == lay and p.rules > 0})
            if not counts:
                continue
            zl = lay if any(p.layout == lay and p.rules == 0 for p in pts) else None
            if zl is None:  # layouts load the same 0-rule set: use another layout's 0-rule trials
                zl = next((p.layout for p in pts if p.rules == 0), None)
            if lay in SLOPE_LAYOUTS:
                out.append((key, None, per_rule_cost(pts, lay), lay))
            elif zl is not None:
                out.append((key, cost_against_zero(pts, lay, counts[-1], zero_layout=zl), None, lay))
    return out


def _n(x: float | None, digits: int = 0) -> str:
    return "?" if x is None else f"{x:,.{digits}f}"


def sentences(trials: list[TrialRecord]) -> list[str]:
    """The headline's in-kernel sentences, e.g. 'nftables set at 10,000 entries: +21 ns/packet
    [15, 27] inside the firewall against 0 rules (...): cost'."""
    out = []
    for (mode, backend, ipv), az, slope, lay in findings(trials):
        where = f"IPv{ipv}, {mode}"
        if az is not None:
            what = "referenced" if az.referenced else "raw medians, no reference"
            iv = f"[{_n(az.low_ns)}, {_n(az.high_ns)}]" if az.low_ns is not None else "[no interval]"
            out.append(f"Time inside the firewall ({where}, in-kernel, {what}): {backend} {lay} at {az.rules:,} "
                       f"entries costs {az.added_ns:+,.0f} ns/packet {iv} against 0 rules ({az.how}; "
                       f"margin ±{az.margin_ns:g} ns): {az.verdict}.")
        if slope is not None:
            what = "referenced" if slope.referenced else "raw medians, no reference"
            iv = (f"[{_n(slope.low_ns, 2)}, {_n(slope.high_ns, 2)}]" if slope.low_ns is not None
                  else "[no interval: 2 points]")
            out.append(f"Time inside the firewall ({where}, in-kernel, {what}): {backend} {lay} costs "
                       f"{slope.per_rule_ns:,.2f} ns/rule {iv} per packet ({100 * slope.confidence:.0f} % t interval of "
                       f"the least-squares slope over {slope.n_points} trials at {slope.n_rule_counts} rule counts; "
                       f"margin ±{slope.margin_ns_per_rule:g} ns/rule): {slope.verdict}.")
    return out
