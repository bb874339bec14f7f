"""Seed 001 (Park 2003, FreeBSD firewall on SmartBits): Table 1, zero-loss throughput per frame
size and rule count, beside fwlab's RFC 2544 throughput searches (named by their goal: only a
goal of loss 0 and exceed ratio 0 is "zero-loss").

The study's finding on the rule count (§3.3 and the conclusion): up to 5000 rules the rule count
hardly affects throughput; above 5000 it does. fwlab checks both halves: the largest rule count up
to 5000 against 0 rules, and the largest above 5000 against that.

Normalisation: the seed's % of line rate cannot compare with a veth bed (no line rate), so both
sides are compared as the throughput at the largest rule count relative to the smallest (the
seed: the last printed value over the first; fwlab: N rules over 0 rules, means over repetitions).

Fig. 7 (concurrent connections, bridge vs gateway mode): fwlab's ``conn_capacity`` searches
(record kind ``connections``) per mode, beside the published 600,000 / 500,000, compared as
bridge / gateway and as what stopped each search (the DUT's connection table or something else).
"""

from __future__ import annotations

from fwlab.published.compare import (
    LIMIT_FLAGS,
    limit_reason,
    bound_verdict,
    range_verdict,
    decides,
    fmt_ci,
    no_interval,
    ratio_ci,
    side,
    undecided_reason,
    within_noise,
    INCONCLUSIVE,
    NOT_MEASURED,
    NOT_TESTABLE,
    NOT_REPRODUCED,
    REPRODUCED,
    Finding,
    SideTable,
    StudyComparison,
    change,
    fmt,
    mean,
    pick,
    ratio_pct,
    register,
    values,
)
from fwlab.published.cost import added_finding, cost_trials
from fwlab.published.model import Study
from fwlab.stats.goal_label import result_label
from fwlab.results.trial import TrialRecord

METRIC = "throughput_pps"
FLAT_UP_TO = 5000
"""The study: up to 5000 rules the rule count hardly affects throughput; above 5000 it does."""
EFFECT_PCT = 2.0
"""'An effect' above 5000 rules: more than this % below the figure at 5000 (or fewer) rules (the
study's own largest drop, 128 B frames: 4.2 %)."""


CAP_METRIC = "capacity_connections"
MODE_NAMES = {"routed": "gateway", "bridge": "bridge"}


def _direction(t: TrialRecord) -> str:
    return str(_opt(t, "direction") or (t.metrics or {}).get("direction") or "up")


def _tp(trials):
    """The unidirectional throughput searches (Table 1, Fig. 5)."""
    return [t for t in trials if t.kind == "rfc2544" and t.traffic == "throughput" and _direction(t) != "bidir"]


def _tp_bidir(trials):
    """The bidirectional ones (§3.5): the load and the figure per direction."""
    return [t for t in trials if t.kind == "rfc2544" and t.traffic == "throughput" and _direction(t) == "bidir"]


def _cap(trials):
    return [t for t in trials if t.kind == "connections" and t.traffic == "conn_capacity"]


def _capped(t: TrialRecord) -> bool:
    """The search held every connection it asked for: the figure is a lower bound."""
    return t.has_flag("max-load-passed")


def _opt(t: TrialRecord, key: str):
    return (t.options or {}).get(key, ((t.extra or {}).get("options") or {}).get(key))


def _table_full(cause: str | None) -> bool:
    return bool(cause) and "connection table full" in cause


def _capacity(study: Study, out: StudyComparison, trials: list[TrialRecord]) -> None:
    """Fig. 7: the side table and the two findings on concurrent connections."""
    fig7 = study.table("fig7")
    pub = {m: fig7.value(MODE_NAMES[m], "concurrent sessions") for m in MODE_NAMES}
    cap = [t for t in _cap(trials) if t.metrics]
    by_mode = {m: [t for t in cap if t.mode == m and t.metric(CAP_METRIC) is not None] for m in MODE_NAMES}
    vals = {m: [float(t.metric(CAP_METRIC)) for t in ts] for m, ts in by_mode.items()}
    pub_ratio = pub["bridge"] / pub["routed"]
    claim = "Bridge mode holds more concurrent connections than gateway mode"
    published = f"bridge {pub['bridge']:,.0f}, gateway {pub['routed']:,.0f} sessions (bridge / gateway {pub_ratio:.2f})"
    if not cap:
        out.findings.append(Finding(id="seed-001/bridge-holds-more",
            claim=claim, published=published, fwlab="not measured: no connection-capacity search in this run.",
            criterion="bridge above gateway by more than the search's width", verdict=NOT_MEASURED))
        return
    rows = []
    for m in ("routed", "bridge"):
        ts = by_mode[m]
        causes = sorted({t.metric("limit_cause") for t in ts if t.metric("limit_cause")})
        ct = sorted({int(t.metric("conntrack_max")) for t in ts if t.metric("conntrack_max")})
        tops = sorted({int(_opt(t, "max_count")) for t in ts if _opt(t, "max_count")})
        capped = sum(1 for t in ts if _capped(t))
        v = mean(vals[m])
        stop = ("; ".join(causes) if causes else "–") + (f"; {capped} of {len(ts)} held every connection asked for "
                                                        f"(a lower bound)" if capped else "")
        rows.append((f"{MODE_NAMES[m]} ({m})", fmt(pub[m], 0), fmt(v, 0), str(len(ts)),
                     fmt(100.0 * v / pub[m], 1) if v is not None else "–",
                     ", ".join(f"{c:,}" for c in ct) or "–", ", ".join(f"{c:,}" for c in tops) or "–", stop))
    ratio = (mean(vals["bridge"]) / mean(vals["routed"])) if vals["bridge"] and vals["routed"] else None
    rows.append(("bridge / gateway", fmt(pub_ratio, 2), fmt(ratio, 3), "", "", "", "", ""))
    out.tables.append(SideTable(
        title=f"{fig7.ref}: concurrent connections, as published and fwlab",
        header=("mode", "as published [connections]", "fwlab [connections held]", "fwlab repetitions",
                "fwlab [% of published]", "fwlab: DUT nf_conntrack_max", "fwlab: search target", "fwlab: what stopped it"),
        rows=tuple(rows),
        note="fwlab: the largest number of TCP connections opened through the DUT (connection tracking on) and held "
             "with no failure, each echoing a probe byte after the hold; mean over repetitions. The DUT's table "
             "limit is the host's nf_conntrack_max (read-only inside a namespace), so absolute figures say more "
             "about this host's table than about the firewall."))

    crit = ("the 95 % interval of bridge / gateway above 1 + the search's width (entirely below -> not reproduced, "
            "across -> inconclusive); a mode whose search held every connection asked for gives a lower bound, "
            "which decides only the way it bounds")
    if not vals["routed"] or not vals["bridge"]:
        have = [MODE_NAMES[m] for m in MODE_NAMES if vals[m]]
        out.findings.append(Finding(id="seed-001/bridge-holds-more",
            claim=claim, published=published, fwlab=f"only {', '.join(have) or 'no'} mode has a capacity figure in this run.",
            criterion=crit, verdict=NOT_MEASURED))
    else:
        width = max(float(_opt(t, "relative_width") or 0.02) for t in cap)
        cap_r = any(_capped(t) for t in by_mode["routed"])
        cap_b = any(_capped(t) for t in by_mode["bridge"])
        b, r = mean(vals["bridge"]), mean(vals["routed"])
        text = (f"fwlab: bridge {b:,.0f}, gateway {r:,.0f} connections held (bridge / gateway {b / r:.3f})")
        causes = {m: sorted({str(t.metric("limit_cause")) for t in by_mode[m] if t.metric("limit_cause")})
                  for m in MODE_NAMES}
        why = "; ".join(f"{MODE_NAMES[m]} stopped by: {' / '.join(c)}" for m, c in causes.items() if c)
        reason = ""
        if cap_r and cap_b:
            verdict = NOT_MEASURED
            text += "; both searches held every connection they asked for, so neither mode's limit was found."
        elif cap_r and not cap_b:
            # gateway's figure is a lower bound: it refutes the claim only when even that bound leaves
            # bridge short of 1 + the width above it; else the gateway's search target was too low to tell
            if b < r * (1.0 + width):
                verdict = NOT_REPRODUCED
                text += "; gateway mode held every connection asked for, as many as bridge mode could or more."
            else:
                verdict = INCONCLUSIVE
                reason = (f"gateway mode held every connection asked for ({r:,.0f}, a lower bound), fewer than "
                          f"bridge's {b:,.0f} over the search's {100 * width:.0f} % width: its limit was not found")
                text += "; gateway mode held every connection asked for (a lower bound)."
        elif cap_b and not cap_r:
            # bridge's figure is a lower bound: it confirms the claim only when even that bound is beyond
            # 1 + the width over gateway's; it can never refute it
            if b > r * (1.0 + width):
                verdict = REPRODUCED
            else:
                verdict = INCONCLUSIVE
                reason = (f"bridge mode held every connection asked for ({b:,.0f}, a lower bound), not beyond "
                          f"gateway's {r:,.0f} by the search's {100 * width:.0f} % width: its limit was not found")
            text += "; bridge mode held every connection asked for (a lower bound)."
        else:
            above = b > r * (1.0 + width)
            # the whole 95 % interval of bridge / gateway beyond (or short of) 1 + the search's width
            iv = ratio_ci(vals["bridge"], vals["routed"])
            sd = side(iv, 100.0 * (1.0 + width))
            sig = sd == 1
            verdict = REPRODUCED if sd == 1 else NOT_REPRODUCED if sd == -1 else INCONCLUSIVE
            both_full = all(_table_full(t.metric("limit_cause")) for t in by_mode["routed"] + by_mode["bridge"])
            if verdict == INCONCLUSIVE:
                n = min(len(vals["routed"]), len(vals["bridge"]))
                reason = no_interval(n) if sd is None else within_noise(n)
            if verdict != REPRODUCED and both_full:
                # one host-wide table (nf_conntrack_max) stopped both modes: equal by construction
                limits = sorted({int(t.metric("conntrack_max")) for t in cap if t.metric("conntrack_max")})
                verdict = INCONCLUSIVE
                reason = ("the bed cannot reach the seed's regime: both modes stopped at the same host-wide connection "
                          f"table (nf_conntrack_max {', '.join(f'{x:,}' for x in limits) or '?'}), so they come out "
                          "equal whatever the mode costs")
            text += (f"; {'within' if not above else 'beyond'} the search's {100 * width:.0f} % width"
                     + (f" (bridge / gateway {fmt_ci(iv, scale=1.0, digits=3, unit='')}, 95 % interval)" if iv else "")
                     + (", not significantly beyond it over the repetitions" if above and not sig else "")
                     + ("; both stopped at the DUT's full connection table" if both_full else
                        (f" ({why})" if why else "")) + ".")
        # max-load-passed is weighed above: a held-every-connection search is read as a lower bound
        out.findings.append(Finding.judge(
            id="seed-001/bridge-holds-more", claim=claim, published=published, fwlab=text, criterion=crit,
            verdict=verdict, used=by_mode["routed"] + by_mode["bridge"], weighed=("max-load-passed",),
            reason="both searches held every connection they asked for: neither mode's limit was found"
            if verdict == NOT_MEASURED else reason))

    # §3.5: the concurrent session count is a matter of memory (the session table), not of the packet path.
    # On this bed the table's size is the host's nf_conntrack_max (read-only in a namespace, never
    # varied with memory): a search whose target lies above it can only stop at the table, so "set by
    # memory" cannot be confirmed here; it can be refuted (a search stopped by something else first).
    claim2 = "The number of concurrent sessions is set by the session table's memory, not by the packet path (§3.5)"
    pub2 = "§3.5: the concurrent session number depends on the system's RAM"
    crit2 = ("refuted when a search stops below the DUT's connection table for another cause; confirming it needs "
             "the table size varied with memory, which this bed cannot do")
    failed = [t for t in cap if not _capped(t) and t.metric(CAP_METRIC) is not None]
    if not failed:
        out.findings.append(Finding(id="seed-001/sessions-set-by-memory",
            claim=claim2, published=pub2,
            fwlab="not measured: no capacity search in this run found a limit (every connection asked for was held).",
            criterion=crit2, verdict=NOT_MEASURED))
    else:
        full = [t for t in failed if _table_full(t.metric("limit_cause"))]
        other = sorted({str(t.metric("limit_cause") or "no cause recorded") for t in failed if t not in full})
        text = (f"fwlab: {len(full)} of {len(failed)} capacity searches stopped at the DUT's full connection table "
                f"(nf_conntrack_count at nf_conntrack_max)")
        text += (f"; the others: {'; '.join(other)}." if other else ".")
        limits = sorted({int(t.metric("conntrack_max")) for t in failed if t.metric("conntrack_max")})
        why = (f"the DUT's connection table is the host's nf_conntrack_max ({', '.join(f'{x:,}' for x in limits) or '?'}), "
               "fixed and not derived from the DUT's memory here; a search whose target lies above it can only stop at "
               "the table, so stopping there does not show that memory sets the count")
        out.findings.append(Finding.judge(
            id="seed-001/sessions-set-by-memory", claim=claim2, published=pub2, fwlab=text, criterion=crit2,
            used=failed, verdict=NOT_TESTABLE if len(full) == len(failed) else NOT_REPRODUCED,
            reason=why if len(full) == len(failed) else ""))


@register("seed-001")
def compare(study: Study, run: dict, trials: list[TrialRecord]) -> StudyComparison:
    out = StudyComparison(study)
    tp = _tp(trials)
    t1 = study.table("table1")
    out.scaling = [
        "SmartBits 6000B at 1 Gbit/s -> fwlab-engine on veth; 100 % = the bed's measured maximum frame rate "
        "(no line rate), the DUT on its own CPU (device model napi) so overload shows as loss.",
        "FreeBSD 4.5 firewall, pass rule last -> nftables, N non-matching rules then the permit rule; the "
        "seed's '1-Rule' (pass only) is fwlab's 0 rules.",
        "Binary search with 60 s trials, 3 repetitions averaged -> the suite's search (the quick variant: "
        "MLRsearch with short trials, 3 repetitions).",
    ]
    caps = _cap(trials)
    if caps:
        tops = sorted({int(_opt(t, "max_count")) for t in caps if _opt(t, "max_count")})
        out.scaling.append(
            "Concurrent connection capacity (SmartBits WebSuite/Firewall, Fig. 7) -> fwlab-engine conn-hold: TCP "
            "connections opened through the DUT with connection tracking on (nftables with the stateful shortcut, "
            "0 rules), held, each echoing a probe byte; a ramp to the first failure, then a binary search below it; "
            f"search target {', '.join(f'{x:,}' for x in tops) or '–'} connections (the quick variant uses a smaller "
            "target than the full preset's 700,000). The DUT's connection-table limit is the host's nf_conntrack_max "
            "(read-only inside a namespace; fwlab does not change it for this preset).")
    out.missing = ["Windows 2000 / Linux 2.4 / FreeBSD comparison at 100 Mbit/s (Fig. 4): one kernel here."]
    if not _tp_bidir(trials):
        out.missing.append("Bi-directional full duplex (§3.5: about 50 % lower at small frames, no table): no "
                           "bidirectional search in this run (rfc2544 option direction = \"bidir\").")
    modes = sorted({t.mode for t in tp})
    gw = "routed" if "routed" in modes else (modes[0] if modes else None)
    layouts = sorted({t.layout for t in tp if t.mode == gw})
    rules = sorted({t.rules for t in tp if t.mode == gw})
    sizes = sorted({int(t.size_bytes or 0) for t in tp if t.mode == gw})
    top = max(rules) if rules else None

    def v(size, n, layout, mode=gw):
        return values(tp, METRIC, mode=mode, size_bytes=size, rules=n, layout=layout)

    def limits(size, n, layout, mode=gw) -> set[str]:
        """The limiting flags (`LIMIT_FLAGS`) on the searches behind one cell."""
        return {c for t in pick(tp, METRIC, mode=mode, size_bytes=size, rules=n, layout=layout)
                for c in t.flag_codes if c in LIMIT_FLAGS}

    label = result_label(tp) if tp else "throughput"
    rows = []
    pub_ratios = {}
    marked: set[str] = set()
    for lab, vals in t1.rows:
        first, last = vals[0], vals[-1]
        r = None if not first else 100.0 * last / first
        pub_ratios[int(lab)] = r
        cells = [lab, fmt(first, 2), fmt(last, 2), fmt(r, 1)]
        for lay in layouts:
            size = int(lab)
            if size in sizes and top:
                z, m = v(size, 0, lay), v(size, top, lay)
                fz, fm = limits(size, 0, lay), limits(size, top, lay)
                marked |= fz | fm
                cells += [_marked(fmt(mean(z) and mean(z) / 1e3, 1), fz), _marked(fmt(mean(m) and mean(m) / 1e3, 1), fm),
                          _marked(fmt(ratio_pct(m, z), 1), fz | fm, bound=False)]
            else:
                cells += ["not measured", "", ""]
        rows.append(tuple(cells))
    header = ["frame [B]", "as published: 1 rule [% of line rate]", "as published: largest [% of line rate]",
              "as published: largest / 1 rule [%]"]
    for lay in layouts:
        header += [f"fwlab {lay}: 0 rules [kpps]", f"fwlab {lay}: {top:,} rules [kpps]", f"fwlab {lay}: {top:,} / 0 rules [%]"]
    out.tables.append(SideTable(
        title=f"{t1.ref}, gateway mode: effect of the rule count", header=tuple(header), rows=tuple(rows),
        note="The seed's last printed value is 5000 or 10000 rules (one column is lost in the source); the seed: "
             f"zero-loss throughput; fwlab: {label} (frame sizes incl. FCS), mean over repetitions."
             + (" ⚑ marks a cell whose searches carry a limiting quality flag, named in the cell: "
                + "; ".join(f"{c}: {LIMIT_FLAGS[c]}" for c in sorted(marked))
                + (" (≥: the figure is a lower bound)" if "max-load-passed" in marked else "") + "."
                if marked else "")))
    if rules and len(rules) > 2:
        rows = []
        for lay in layouts:
            for size in sizes:
                z = v(size, 0, lay)
                rows.append((f"{lay}, {size} B frames", *[fmt(ratio_pct(v(size, n, lay), z), 1) for n in rules]))
        out.tables.append(SideTable(title=f"fwlab: {label} as % of 0 rules, per rule count",
                                    header=("configuration", *[f"{n:,} rules" for n in rules]), rows=tuple(rows)))

    pub_worst = min(r for r in pub_ratios.values() if r is not None)
    crit = pub_worst - 5.0
    flat_claim = f"Up to {FLAT_UP_TO:,} rules the rule count has almost no effect on throughput (§3.3)"
    more_claim = f"Above {FLAT_UP_TO:,} rules the rule count affects throughput (conclusion)"
    mid = max((n for n in rules if 0 < n <= FLAT_UP_TO), default=None)
    high = max((n for n in rules if n > FLAT_UP_TO), default=None)
    flat_crit = (f"at every frame size the 95 % interval at least {crit:.1f} % of 0 rules (the published worst case "
                 f"minus 5 points; one entirely below -> not reproduced, across -> inconclusive)")
    more_crit = (f"at some frame size the 95 % interval of the largest rule count above {FLAT_UP_TO:,} over the largest "
                 f"up to {FLAT_UP_TO:,} (0 rules when the run has none) entirely below {100 - EFFECT_PCT:g} % (every "
                 f"one at or above -> not reproduced, else inconclusive)")
    for lay in layouts:
        def used(*ns, lay=lay, only=None):
            return [t for s in (only or sizes) for n in ns
                    for t in pick(tp, METRIC, mode=gw, size_bytes=s, rules=n, layout=lay)]

        def measurable(*ns, lay=lay):
            """(sizes to decide on, a note on those left out): a frame size whose searches carry a
            limiting flag (the generator's maximum passed, ...) says nothing about the rule count; it
            is left out when another size remains (all limited: the finding says so itself)."""
            left = {s: limit_reason(used(*ns, lay=lay, only=[s])) for s in sizes}
            keep = [s for s in sizes if not left[s]]
            if not keep or len(keep) == len(sizes):
                return sizes, ""
            return keep, " Left out: " + "; ".join(f"{s} B ({why})" for s, why in left.items() if why) + "."
        if mid is not None:
            ok, note = measurable(0, mid)
            verdict, why, ratios = _judge(ok, lambda s: v(s, 0, lay), lambda s: v(s, mid, lay), crit, below_is_bad=True)
            out.findings.append(Finding.judge(
                id=f"seed-001/flat-up-to-{FLAT_UP_TO}/{lay}", used=used(0, mid, only=ok), reason=why, claim=flat_claim,
                published=f"Table 1 and §3.3: the rule count hardly affects throughput up to {FLAT_UP_TO:,} rules; "
                          f"largest printed rule count over 1 rule {pub_worst:.1f} % at worst (128 B)",
                fwlab=f"fwlab nftables {lay}, {mid:,} rules over 0: "
                      + ", ".join(f"{s} B {r:.1f} %" for s, r in sorted(ratios.items())) + "." + note,
                criterion=flat_crit, verdict=verdict))
        if high is not None:
            ref_n = mid if mid is not None else 0
            ok, note = measurable(ref_n, high)
            verdict, why, ratios = _judge(ok, lambda s: v(s, ref_n, lay), lambda s: v(s, high, lay),
                                          100.0 - EFFECT_PCT, below_is_bad=False)
            out.findings.append(Finding.judge(
                id=f"seed-001/effect-above-{FLAT_UP_TO}/{lay}", effect=True, used=used(ref_n, high, only=ok),
                reason=why,
                claim=more_claim,
                published=f"conclusion: above {FLAT_UP_TO:,} rules the rule count affects performance (a faster "
                          f"algorithm is needed); Table 1's last column is at most {100 - pub_worst:.1f} % below the first",
                fwlab=f"fwlab nftables {lay}, {high:,} rules over {ref_n:,}: "
                      + ", ".join(f"{s} B {r:.1f} %" for s, r in sorted(ratios.items())) + "." + note,
                criterion=more_crit, verdict=verdict))
    if not any(f.claim == flat_claim for f in out.findings):
        out.findings.append(Finding(id="seed-001/flat-up-to-5000/linear",
            claim=flat_claim, published=f"{pub_worst:.1f} % at worst",
            fwlab=f"no throughput search at 0 and at 1 to {FLAT_UP_TO:,} rules in this run.",
            criterion=flat_crit, verdict=NOT_MEASURED))
    if not any(f.claim == more_claim for f in out.findings):
        out.findings.append(Finding(id="seed-001/effect-above-5000/linear",
            claim=more_claim, published="conclusion, no figure above 5000 beyond Table 1's last column",
            fwlab=f"no throughput search above {FLAT_UP_TO:,} rules in this run.", criterion=more_crit,
            verdict=NOT_MEASURED))
    _effect_above_cost(out, trials, more_claim)
    if "bridge" in modes and "routed" in modes:
        lay = layouts[0]
        verdict, why, ratios = _above(sizes, lambda s: v(s, 0, lay, "routed"), lambda s: v(s, 0, lay, "bridge"))
        out.findings.append(Finding.judge(
            id="seed-001/bridge-above-gateway", reason=why,
            # only the sizes measured in both modes were compared: a size run in one mode (e.g. routed
            # 1518 B, capped by the generator) was never weighed and must not sway the verdict
            used=[t for s in sorted(ratios) for m in ("routed", "bridge") for t in pick(tp, METRIC, mode=m, size_bytes=s,
                                                                                        rules=0, layout=lay)],
            claim="Bridge mode forwards more than gateway mode",
            published="Fig. 5: bridge above gateway at every frame size (no numbers printed)",
            fwlab="fwlab, 0 rules, bridge as % of routed: " + ", ".join(f"{s} B {r:.0f} %" for s, r in sorted(ratios.items())) + ".",
            criterion="bridge above routed at every frame size, and the difference significant (Welch, alpha 0.05; one repetition: inconclusive)", verdict=verdict))
    else:
        out.findings.append(Finding(id="seed-001/bridge-above-gateway",
            claim="Bridge mode forwards more than gateway mode", published="Fig. 5 (no numbers printed)",
            fwlab="this run's throughput searches cover one mode only (the full seed-001 suite runs both).",
            criterion="bridge above routed at every frame size", verdict=NOT_MEASURED))
    _bidirectional(out, trials)
    _capacity(study, out, trials)
    return out


def _effect_above_cost(out: StudyComparison, trials: list[TrialRecord], more_claim: str) -> None:
    """The conclusion that rule counts above 5,000 affect the firewall, from the in-kernel clock:
    the time the largest rule count above 5,000 adds per packet against the largest up to 5,000
    (0 when the run has none), in gateway mode, per layout. The throughput finding stays as it is."""
    cost = [t for t in trials if t.kind == "cost" and t.backend == "nftables" and t.mode == "routed"]
    for lay in sorted({t.layout for t in cost}):
        for sc in sorted({bool(t.stateful_shortcut) for t in cost if t.layout == lay}):
            ct = cost_trials(trials, backend="nftables", layout=lay, mode="routed", stateful_shortcut=sc)
            rules = ct.rules() if ct is not None else []
            high = max((n for n in rules if n > FLAT_UP_TO), default=None)
            base = max((n for n in rules if n <= FLAT_UP_TO), default=0)
            name = f"nftables {lay}{' +established' if sc else ''}, gateway"
            fid = f"seed-001/effect-above-{FLAT_UP_TO}-cost/{lay}{'-established' if sc else ''}"
            claim = (f"Above {FLAT_UP_TO:,} rules the rule count affects the firewall: each packet's time inside "
                     "it grows (in-kernel cost)")
            published = (f"conclusion: above {FLAT_UP_TO:,} rules the rule count affects performance (a faster "
                         "algorithm is needed)")
            if high is None:
                f = Finding(id=fid, claim=claim, published=published, verdict=NOT_MEASURED, criterion="–",
                            fwlab=f"no in-kernel cost trial above {FLAT_UP_TO:,} rules in this run.")
            else:
                f = added_finding(ct, lay, high, base_rules=base, name=name, id=fid, claim=claim, published=published)
            if f is not None:
                out.findings.append(f)


def _marked(cell: str, codes: set[str], *, bound: bool = True) -> str:
    """A figure's cell with the limiting flags of its searches: '≥ 47.1 ⚑ max-load-passed' (a
    search that passed its largest load gives a lower bound; `bound` False for a ratio, which
    such a figure makes neither bound), as the report's main table flags its cells."""
    if not codes or cell in ("–", ""):
        return cell
    low = "≥ " if bound and "max-load-passed" in codes else ""
    return f"{low}{cell} ⚑ {', '.join(sorted(codes))}"


BIDIR_PUB_PCT = 50.0
"""§3.5: bidirectional full duplex was 'about 50 % lower' at small frames than unidirectional."""
BIDIR_BAND_PCT = 15.0
"""'About': fwlab counts a per-direction figure within 50 ± 15 % of the unidirectional one as that."""


def _final_trial_s(t: TrialRecord) -> float | None:
    """How long the search's final trials lasted [s] (its goal's ``final_trial_duration_s``, as
    the record's search result stores it, else as the options give it). A search's figure depends
    on it (a longer trial meets more loss), so two searches' figures are compared only at like
    trial lengths. None when the record does not say."""
    results = ((t.extra or {}).get("rfc2544") or {}).get("results") or []
    goal = results[0].get("goal") if results and isinstance(results[0], dict) else None
    for g in (goal, _opt(t, "goal")):
        if isinstance(g, dict) and g.get("final_trial_duration_s") is not None:
            return float(g["final_trial_duration_s"])
    return None


def _secs(d: float | None) -> str:
    return "not recorded" if d is None else f"{d:g} s"


def _bidirectional(out: StudyComparison, trials: list[TrialRecord]) -> None:
    """§3.5: bidirectional (two senders at once, one each way) against unidirectional throughput,
    per direction, at every frame size measured both ways with the same mode, rules, wire and
    final trial length (a search's figure depends on its trial length, so a 1 s bidirectional
    search is never set beside a 0.5 s unidirectional one). Every such pair is judged: the claim
    holds at every small frame the run measured both ways (the presets run 64 and 128 B)."""
    claim = "Bidirectional full duplex forwards about 50 % less than unidirectional at small frames (§3.5)"
    published = "§3.5: bidirectional full duplex about 50 % lower at small frame sizes (no table)"
    lo, hi = BIDIR_PUB_PCT - BIDIR_BAND_PCT, BIDIR_PUB_PCT + BIDIR_BAND_PCT
    crit = (f"at every frame size measured both ways, the 95 % interval of the bidirectional throughput per "
            f"direction over the unidirectional one (same mode, rules, frame size, wire and final trial length) "
            f"within {lo:g}-{hi:g} % (one entirely outside -> not reproduced, one across -> inconclusive)")
    bi, uni = _tp_bidir(trials), _tp(trials)

    def key(t):
        return (t.mode, t.rules, int(t.size_bytes or 0), t.layout, t.link_rate_bps or 0)

    keys = sorted({(*key(t), _final_trial_s(t)) for t in bi},
                  key=lambda k: (k[2], k[1], k[0] != "routed", k[5] or 0.0))
    pairs, unlike = [], []
    for k in keys:
        b = [t for t in bi if key(t) == k[:5] and _final_trial_s(t) == k[5] and t.metric(METRIC) is not None]
        same = [t for t in uni if key(t) == k[:5] and t.metric(METRIC) is not None]
        u = [t for t in same if _final_trial_s(t) == k[5]]
        if b and u:
            pairs.append((k, b, u))
        elif b and same:
            unlike.append((k, sorted({_final_trial_s(t) for t in same}, key=lambda d: d or 0.0)))

    def where(k):
        mode, n, size = k[:3]
        return f"{MODE_NAMES.get(mode, mode)} mode, {n:,} rules, {size} B frames"

    skipped = "; ".join(f"{where(k)}: bidirectional final trials {_secs(k[5])}, unidirectional "
                        f"{', '.join(_secs(d) for d in ds)}" for k, ds in unlike)
    if not pairs:
        if unlike:
            text = ("not measured: the bidirectional and unidirectional searches ran with unlike final trial lengths "
                    f"({skipped}); a search's figure depends on its trial length, so they are not compared.")
        else:
            text = ("not measured: no bidirectional throughput search beside a unidirectional one at the same "
                    "mode, rules and frame size in this run.")
        out.findings.append(Finding(id="seed-001/bidir-half-at-small-frames", claim=claim, published=published,
                                    fwlab=text, criterion=crit, verdict=NOT_MEASURED))
        return
    ivs, parts, used = [], [], []
    for k, b, u in pairs:
        bv, uv = [float(t.metric(METRIC)) for t in b], [float(t.metric(METRIC)) for t in u]
        iv = ratio_ci(bv, uv)
        ivs.append(iv)
        used += b + u
        skews = [t.metric("start_skew_max_s") for t in b if t.metric("start_skew_max_s") is not None]
        parts.append(f"{where(k)}" + (f", {k[5]:g} s final trials" if k[5] is not None else "")
                     + f": bidirectional {fmt(mean(bv) / 1e3, 1)} kpps per direction ({fmt(2 * mean(bv) / 1e3, 1)} "
                     f"kpps both ways), unidirectional {fmt(mean(uv) / 1e3, 1)} kpps; per direction "
                     f"{fmt_ci(iv) if iv else '–'} of unidirectional (95 % interval; {len(bv)} and {len(uv)} "
                     "repetitions)"
                     + (f"; the two senders started at most {1e3 * max(skews):.1f} ms apart" if skews else ""))
    verdict, why = range_verdict(ivs, lo, hi)
    text = ("fwlab, " + "; ".join(parts) + "."
            + (f" Not compared (unlike final trial lengths): {skipped}." if unlike else ""))
    out.findings.append(Finding.judge(
        id="seed-001/bidir-half-at-small-frames", claim=claim, published=published, fwlab=text, criterion=crit,
        verdict=verdict, reason=why, used=used))


def _above(sizes, ref_of, other_of):
    """(verdict, reason, {size: other as % of ref}): reproduced when `other` is significantly
    above `ref` at every size; not reproduced when it is significantly at or below at some size;
    else inconclusive (within the noise, or one repetition: no interval; `DECISION_RULE`)."""
    ratios, wrong, noisy = {}, False, []
    for s in sizes:
        a, b = ref_of(s), other_of(s)
        r = ratio_pct(b, a)
        if r is None:
            continue
        ratios[s] = r
        c = change(a, b)
        if not decides(c):
            noisy.append(undecided_reason(c))
        elif r <= 100.0:
            wrong = True
    if not ratios:
        return NOT_MEASURED, "no frame size measured in both modes", ratios
    if wrong:
        return NOT_REPRODUCED, "", ratios
    if noisy:
        return INCONCLUSIVE, "; ".join(dict.fromkeys(noisy)), ratios
    return REPRODUCED, "", ratios


def _judge(sizes, ref_of, other_of, floor_pct: float, *, below_is_bad: bool):
    """(verdict, reason, {size: other as % of ref}) over frame sizes, each decided on the 95 %
    interval of other / ref (Fieller; `DECISION_RULE`).

    below_is_bad (a 'no effect' claim): reproduced when every size's interval lies at or above
    `floor_pct`, not reproduced when one lies entirely below it. Otherwise (an 'effect' claim):
    reproduced when some size's interval lies entirely below `floor_pct`, not reproduced when
    every one lies at or above it. Else inconclusive (an interval across the floor, or one
    repetition: no interval).
    """
    ratios, ivs = {}, []
    for s in sizes:
        a, b = ref_of(s), other_of(s)
        iv = ratio_ci(b, a)
        if iv is None:
            continue
        ratios[s] = 100.0 * iv.ratio
        ivs.append(iv)
    if not ratios:
        return NOT_MEASURED, "no frame size measured at both rule counts", ratios
    if below_is_bad:
        verdict, why = bound_verdict(ivs, floor_pct, at_least=True)
        return verdict, why, ratios
    sides = [side(iv, floor_pct) for iv in ivs]
    if -1 in sides:
        return REPRODUCED, "", ratios
    if all(sd == 1 for sd in sides):
        return NOT_REPRODUCED, "", ratios
    _, why = bound_verdict([iv for iv, sd in zip(ivs, sides, strict=True) if sd != 1], floor_pct, at_least=True)
    return INCONCLUSIVE, why, ratios
