"""Seed 001 (Park 2003, FreeBSD firewall on SmartBits): Table 1, zero-loss throughput per frame
size and rule count, beside fwlab's RFC 2544 throughput searches.

Normalisation: the seed's % of line rate cannot compare with a veth bed (no line rate), so both
sides are compared as the throughput at the largest rule count relative to the smallest (the
seed: the last printed value over the first; fwlab: N rules over 0 rules, means over repetitions).
"""

from __future__ import annotations

from fwlab.published.compare import (
    NOT_MEASURED,
    NOT_REPRODUCED,
    REPRODUCED,
    Finding,
    SideTable,
    StudyComparison,
    fmt,
    mean,
    ratio_pct,
    register,
    values,
)
from fwlab.published.model import Study

METRIC = "throughput_pps"


def _tp(trials):
    return [t for t in trials if t.get("kind") == "rfc2544" and t.get("traffic") == "throughput"]


@register("seed-001")
def compare(study: Study, run: dict, trials: list[dict]) -> StudyComparison:
    out = StudyComparison(study)
    tp = _tp(trials)
    t1 = study.table("table1")
    out.scaling = [
        "SmartBits 6000B at 1 Gbit/s -> fwlab-engine on veth; 100 % = the bed's measured maximum frame rate "
        "(no line rate), the DUT on its own CPU (device model napi) so overload shows as loss.",
        "FreeBSD 4.5 firewall, pass rule last -> nftables, N non-matching rules then the permit rule; the "
        "seed's '1-Rule' (pass only) is fwlab's 0 rules.",
        "Binary search with 60 s trials, 3 repetitions averaged -> the suite's search (the quick variant: "
        "MLRsearch with short trials, 1 repetition).",
    ]
    out.missing = ["Concurrent connection capacity in bridge and gateway mode (Fig. 7: 600,000 and 500,000 "
                   "sessions): needs the connection-capacity kind (issue 5).",
                   "Windows 2000 / Linux 2.4 / FreeBSD comparison at 100 Mbit/s (Fig. 4): one kernel here."]
    modes = sorted({t.get("mode") for t in tp})
    gw = "routed" if "routed" in modes else (modes[0] if modes else None)
    layouts = sorted({t.get("layout") for t in tp if t.get("mode") == gw})
    rules = sorted({int(t.get("rules") or 0) for t in tp if t.get("mode") == gw})
    sizes = sorted({int(t.get("size_bytes") or 0) for t in tp if t.get("mode") == gw})
    top = max(rules) if rules else None

    def v(size, n, layout, mode=gw):
        return values(tp, METRIC, mode=mode, size_bytes=size, rules=n, layout=layout)

    rows = []
    pub_ratios = {}
    for label, vals in t1.rows:
        first, last = vals[0], vals[-1]
        r = None if not first else 100.0 * last / first
        pub_ratios[int(label)] = r
        cells = [label, fmt(first, 2), fmt(last, 2), fmt(r, 1)]
        for lay in layouts:
            size = int(label)
            if size in sizes and top:
                z, m = v(size, 0, lay), v(size, top, lay)
                cells += [fmt(mean(z) and mean(z) / 1e3, 1), fmt(mean(m) and mean(m) / 1e3, 1), fmt(ratio_pct(m, z), 1)]
            else:
                cells += ["not measured", "", ""]
        rows.append(tuple(cells))
    header = ["frame [B]", "as published: 1 rule [% of line rate]", "as published: largest [% of line rate]",
              "as published: largest / 1 rule [%]"]
    for lay in layouts:
        header += [f"fwlab {lay}: 0 rules [kpps]", f"fwlab {lay}: {top:,} rules [kpps]", f"fwlab {lay}: {top:,} / 0 rules [%]"]
    out.tables.append(SideTable(
        title=f"{t1.ref}, gateway mode: effect of the rule count", header=tuple(header), rows=tuple(rows),
        note="The seed's last printed value is 5000 or 10000 rules (one column is lost in the source); fwlab: "
             "zero-loss throughput, mean over repetitions."))
    if rules and len(rules) > 2:
        rows = []
        for lay in layouts:
            for size in sizes:
                z = v(size, 0, lay)
                rows.append((f"{lay}, {size} B", *[fmt(ratio_pct(v(size, n, lay), z), 1) for n in rules]))
        out.tables.append(SideTable(title="fwlab: zero-loss throughput as % of 0 rules, per rule count",
                                    header=("configuration", *[f"{n:,} rules" for n in rules]), rows=tuple(rows)))

    pub_worst = min(r for r in pub_ratios.values() if r is not None)
    for lay in layouts:
        ratios = {s: ratio_pct(v(s, top, lay), v(s, 0, lay)) for s in sizes} if top else {}
        ratios = {s: r for s, r in ratios.items() if r is not None}
        if not ratios:
            continue
        worst = min(ratios.values())
        crit = pub_worst - 5.0
        out.findings.append(Finding(
            claim="Up to 10000 rules the rule count has almost no effect on throughput",
            published=f"largest rule count over 1 rule: {pub_worst:.1f} % at worst (128 B), 100 % at 64 B and 512-1518 B",
            fwlab=f"fwlab nftables {lay}, {top:,} rules over 0: " + ", ".join(f"{s} B {r:.1f} %" for s, r in sorted(ratios.items())) + ".",
            criterion=f"at every frame size at least {crit:.1f} % (the published worst case minus 5 points)",
            verdict=REPRODUCED if worst >= crit else NOT_REPRODUCED))
    if not out.findings:
        out.findings.append(Finding(
            claim="Up to 10000 rules the rule count has almost no effect on throughput",
            published=f"{pub_worst:.1f} % at worst", fwlab="no throughput search with 0 and more rules in this run.",
            criterion="at least the published worst case minus 5 points", verdict=NOT_MEASURED))
    if "bridge" in modes and "routed" in modes:
        lay = layouts[0]
        ratios = {s: ratio_pct(v(s, 0, lay, "bridge"), v(s, 0, lay, "routed")) for s in sizes}
        ratios = {s: r for s, r in ratios.items() if r is not None}
        ok = bool(ratios) and all(r > 100.0 for r in ratios.values())
        out.findings.append(Finding(
            claim="Bridge mode forwards more than gateway mode",
            published="Fig. 5: bridge above gateway at every frame size (no numbers printed)",
            fwlab="fwlab, 0 rules, bridge as % of routed: " + ", ".join(f"{s} B {r:.0f} %" for s, r in sorted(ratios.items())) + ".",
            criterion="bridge above routed at every frame size", verdict=REPRODUCED if ok else NOT_REPRODUCED))
    else:
        out.findings.append(Finding(
            claim="Bridge mode forwards more than gateway mode", published="Fig. 5 (no numbers printed)",
            fwlab="this run has one mode only (the full seed-001 suite runs both).",
            criterion="bridge above routed at every frame size", verdict=NOT_MEASURED))
    return out
