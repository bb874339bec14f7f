"""Seed 004 (NetAgent OnePointWall BLOCK, a bridge firewall): Table 2 (TCP throughput by rule set
and parallel streams, normalised to the cross connection) and Table 3 (single-stream probes).

Mapping: the cross connection is fwlab's direct mode; the firewall's rule sets are nftables
bridge rule sets of N rules (the seed publishes only the SoftEther set's size, 5 rules). The
streams are fwlab's ``parallel`` kind (1, 100, 500, 900 streams; above 128 several iperf3
processes). Every Table 2 figure is normalised to the direct (cross) figure at the same stream
count. Table 3: fwlab's recovery probes (single-stream iperf3 runs every ``interval_s``) as % of
the trial's single-stream baseline, beside the seed's probes as % of its single-stream figure
for the same rule set (Table 2). The seed probed *during* its 500-stream test; fwlab's probes do
so with ``during = true`` (the presets' 500-stream item): only then is the Table 3 finding
decided, on the probes that ended while the load still ran (``during_load``). Probes after the
load (``during = false``) make it "not testable here". Older records (kind ``stream``, traffic
``tcp``) are read too.
"""

from __future__ import annotations

from fwlab.linerate import LineRate
from fwlab.published.compare import (
    INCONCLUSIVE,
    NOT_MEASURED,
    NOT_TESTABLE,
    NOT_REPRODUCED,
    REPRODUCED,
    Finding,
    SideTable,
    StudyComparison,
    bound_verdict,
    fmt,
    fmt_ci,
    fmt_range,
    mean,
    no_effect_verdict,
    pick,
    ratio_of_ratios_ci,
    ratio_ci,
    ratio_pct,
    register,
    values,
    within_verdict,
)
from fwlab.published.model import Study
from fwlab.results.trial import TrialRecord

CROSS = "cross connection (no firewall)"
SMALL = "SoftEther rules only (5 rules)"
LARGE = ("P2P, VPN only (default)", "all but firewall and winny rules", "all but firewall rules")
METRIC = "throughput_bps"


T3_RULES = "all but firewall rules"
T3_STREAMS = 500
RECOVERY_WITHIN_S = 20.0
"""The seed: the probe started 20 s in was back near the single-stream rate (Table 3)."""
START_SLACK_S = 1.0
"""A probe's recorded start lags its schedule by the previous probe's tear-down."""


FALL_TO = 75.0
"""'Falls': the share of direct at the largest stream count is at most this % of the 1-stream share
(the seed's large sets: 21-44 %; the 5-rule set 78 %)."""
CROSS_SAME_PCT = 10.0
"""'Hardly matters': the cross connection at the largest stream count within +-10 % of 1 stream."""
OVERRUN = 2.0
"""The seed's large sets ran 1.9-4.9 x iperf's 10 s at 500 and 900 streams, the cross connection 1.1-1.2 x."""


def _link_rate(run: dict, trials: list[TrialRecord]) -> LineRate | None:
    """The emulated link rate the trials ran at (their own), else the suite's one ``link_rate``
    (trials recorded before they carried it); None when unshaped."""
    own = next((t.link_rate_bps for t in trials if t.link_rate_bps), None)
    rate = ((run.get("suite") or {}).get("parsed") or {}).get("link_rate")
    return own or (LineRate.parse(rate) if isinstance(rate, str) and rate != "none" else None)


def _tcp(trials):
    """Stream trials of the study: traffic ``parallel`` (this preset; a failed one is kind
    ``parallel`` too, ``stream`` in records written before failed trials kept their runner's kind)
    or plain TCP ``stream`` trials (older records), without a flood."""
    return [t for t in trials if not t.background and (
        t.traffic == "parallel" or (t.kind == "stream" and t.traffic == "tcp"))]


def _hung(t: TrialRecord) -> bool:
    """A multi-stream run whose iperf3 clients did not finish within the runner's timeout."""
    return bool(t.error) and "hung" in str(t.error)


def _overrun(t: TrialRecord) -> float | None:
    if t.metric("completion_s") is None or not t.duration_s:
        return None
    return float(t.metric("completion_s")) / float(t.duration_s)


def _probes(t: TrialRecord) -> list[dict]:
    return list((t.extra or {}).get("probes") or [])


def _probed_during(t: TrialRecord) -> bool:
    """Whether the trial's probes ran while its multi-stream load did (``extra.probe_plan.during``),
    as the seed's Table 3; fwlab's recovery probes start when the load has ended."""
    return bool(((t.extra or {}).get("probe_plan") or {}).get("during"))


def _during_load(p: dict) -> bool:
    """Whether a probe ended while the load still ran (rows of older records: as recorded)."""
    return bool(p.get("during_load", True))


def _probe_table(t3, t2, fw_trials: list[TrialRecord], label: str) -> SideTable:
    """Table 3 as published (Mbit/s and % of the rule set's single-stream figure in Table 2) beside
    fwlab's probes (% of the trial's single-stream baseline), by probe start time."""
    single = t2.value(T3_RULES, "1")
    pub = {}
    for name, vals in t3.rows:
        if name.endswith(" s"):
            pub[float(name[:-2])] = vals[0]
    # fwlab: probe k of every repetition, keyed by its scheduled start (k x interval_s)
    fw: dict[float, list[dict]] = {}
    for t in fw_trials:
        iv = float(((t.extra or {}).get("probe_plan") or (t.options or {})).get("interval_s") or 10.0)
        for p in _probes(t):
            fw.setdefault(round(p["probe"] * iv, 3), []).append(p)
    rows = []
    whole = t3.value("the 500-stream test itself", "throughput")
    fw_whole = [100.0 * t.metric("throughput_bps") / t.metric("baseline_bps") for t in fw_trials
                if t.metric("throughput_bps") and t.metric("baseline_bps")]
    comp = [t.metric("completion_s") for t in fw_trials if t.metric("completion_s")]
    rows.append(("the multi-stream test itself (all streams)", fmt(whole, 2), fmt(100.0 * whole / single, 1),
                 fmt(mean(fw_whole), 1), str(len(fw_whole)),
                 f"seed: 504 s with the probes; fwlab completion {fmt(mean(comp), 1)} s" if comp else "seed: 504 s"))
    for at in sorted(set(pub) | set(fw)):
        ps = fw.get(at, [])
        ratios = [100.0 * p["ratio_to_baseline"] for p in ps if p.get("ratio_to_baseline") is not None]
        rec = sum(1 for p in ps if p.get("recovered"))
        idle = sum(1 for p in ps if not _during_load(p))
        rows.append((f"probe at {at:g} s", fmt(pub.get(at), 1), fmt(100.0 * pub[at] / single, 1) if at in pub else "–",
                     fmt(mean(ratios), 1) if ratios else "–", str(len(ps)) if ps else "–",
                     (f"{rec} of {len(ps)} recovered" + (f"; {idle} ended after the load" if idle else ""))
                     if ps else "–"))
    during = all(_probed_during(t) for t in fw_trials)
    return SideTable(
        title=f"{t3.ref}: single-stream probes, as published and fwlab ({label})",
        header=("probe", "as published [Mbit/s]", f"as published [% of the {single:g} Mbit/s single stream]",
                "fwlab [% of the trial's single-stream baseline]", "fwlab repetitions", "fwlab"),
        rows=tuple(rows), left=1,
        note="The seed started its probes during the 500-stream test (which stalled and ran 504 s); fwlab's "
             + ("start with the multi-stream run and go on while it runs (during = true; a probe that ended after "
                "the load does not count as recovered), " if during else
                "start when the multi-stream run has ended (kind parallel, during = false), ")
             + "at the scheduled times shown. A repetition stops "
             "probing at its first probe within the tolerance of its baseline, so later rows have fewer repetitions. "
             "Means over repetitions; published % = probe / the rule set's single-stream figure in Table 2.")


def _no_figure(tcp: list[dict], mode, n: int, s: int) -> str:
    ts = [t for t in tcp if t.mode == mode and t.rules == n and int(t.streams or 1) == s]
    hung = sum(1 for t in ts if _hung(t))
    if hung:
        return f"did not finish ({hung} of {len(ts)})"
    return "failed" if ts else "–"


def _overrun_part(out: StudyComparison, study: Study, tcp: list[dict], streams: list[int], rules: list[int],
                  fw_mode) -> Finding:
    """Table 2's transfer times beside fwlab's completion times (a table), and the finding on
    stalled runs (returned)."""
    tt = study.table("table2-time")
    cols = sorted({int(c) for c in tt.columns} | set(streams))
    rows = []
    for label, vals in tt.rows:
        pub = {int(c): v for c, v in zip(tt.columns, vals)}
        rows.append(("as published", label, *[f"{pub[c]:g} s ({pub[c] / 10:.1f} x)" if pub.get(c) is not None else "–"
                                              for c in cols]))
    cfgs = [("direct", 0, "direct (cross connection)")] + [(fw_mode, n, f"nftables {n:,} rules ({fw_mode})") for n in rules]
    ratio: dict[tuple, list[float]] = {}
    hung: dict[tuple, int] = {}
    for mode, n, label in cfgs:
        cells = []
        for s in cols:
            ts = [t for t in tcp if t.mode == mode and int(t.streams or 1) == s
                  and (mode == "direct" or t.rules == n)]
            r = [x for x in (_overrun(t) for t in ts) if x is not None]
            comp = [t.metric("completion_s") for t in ts if t.metric("completion_s") is not None]
            ratio[(mode, n, s)] = r
            hung[(mode, n, s)] = sum(1 for t in ts if _hung(t))
            cell = f"{fmt(mean(comp), 1)} s ({fmt(mean(r), 1)} x)" if r else "–"
            if hung[(mode, n, s)]:
                cell = (cell + ", " if r else "") + f"did not finish ({hung[(mode, n, s)]} of {len(ts)})"
            cells.append(cell)
        rows.append(("fwlab", label, *cells))
    out.tables.append(SideTable(
        title=f"{tt.ref}: how long the runs took (x the nominal length), as published and fwlab",
        header=("source", "rule set", *[f"{c} streams" for c in cols]), rows=tuple(rows), left=2,
        note="Published: iperf's transfer time for its default 10 s test. fwlab: completion_s (first client start "
             "to last client exit) and its ratio to the trial's nominal length, mean over repetitions; 'did not "
             "finish' as in the throughput table."))

    claim = "With large rule sets many streams stall: the run lasts far past its nominal length"
    pub_large = [v for label in LARGE for v in tt.row(label)[2:]]
    published = (f"the three large sets took {min(pub_large):g}-{max(pub_large):g} s at 500 and 900 streams for a 10 s "
                 f"test ({min(pub_large) / 10:.1f}-{max(pub_large) / 10:.1f} x), the cross connection "
                 f"{max(tt.row(CROSS)):g} s at most; the 500-stream test with the probes ran 504 s")
    crit = (f"at the largest rule count a run of 100 or more streams lasts at least {OVERRUN:g} x its nominal length "
            f"or does not finish, while every direct run stays below {OVERRUN:g} x (direct runs past it too -> "
            f"inconclusive)")
    many = [s for s in streams if s >= 100]
    big = max((n for n in rules if n > 0 and any(ratio.get((fw_mode, n, s)) or hung.get((fw_mode, n, s))
                                                for s in many)), default=None)
    direct = [x for s in streams for x in ratio.get(("direct", 0, s), [])]
    if big is None or not direct:
        return Finding(id="seed-004/many-streams-stall", claim=claim, published=published, criterion=crit, verdict=NOT_MEASURED,
                       fwlab="not measured: this run lacks multi-stream runs through rules or direct.")
    worst = max((max(ratio[(fw_mode, big, s)]) for s in many if ratio.get((fw_mode, big, s))), default=None)
    n_hung = sum(hung.get((fw_mode, big, s), 0) for s in many)
    n_all = sum(len(ratio.get((fw_mode, big, s), [])) + hung.get((fw_mode, big, s), 0) for s in many)
    stalled = n_hung > 0 or (worst is not None and worst >= OVERRUN)
    calm = max(direct) < OVERRUN
    text = (f"fwlab, nftables {big:,} rules ({fw_mode}), 100 or more streams: longest {fmt(worst, 1)} x the nominal "
            f"length; {n_hung} of {n_all} runs did not finish within the runner's timeout. Direct: at most "
            f"{max(direct):.1f} x.")
    used = [t for t in tcp if int(t.streams or 1) in many and (
        t.mode == "direct" or (t.mode == fw_mode and t.rules == big))]
    verdict, why = (REPRODUCED, "") if stalled and calm else (NOT_REPRODUCED, "")
    if stalled and not calm:
        # the cross connection overran too: the bed itself stalls many streams, so a stall through
        # the rule set says nothing about the rule set (the seed's cross connection took 1.1-1.2 x)
        verdict, why = INCONCLUSIVE, (f"the bed cannot reach the seed's regime: direct runs without a firewall "
                                      f"overran too (up to {max(direct):.1f} x, at least {OVERRUN:g} x), so the "
                                      f"stall is not the rule set's")
    return Finding.judge(id="seed-004/many-streams-stall", used=used, claim=claim, published=published, fwlab=text,
                         criterion=crit, verdict=verdict, reason=why)


@register("seed-004")
def compare(study: Study, run: dict, trials: list[TrialRecord]) -> StudyComparison:
    out = StudyComparison(study)
    tcp_all = _tcp(trials)
    # Table 2 and its findings: runs without probes beside them (a load probed during its run carries
    # the probes' traffic and may run load_s, not the trial's length); Table 3 reads those
    tcp = [t for t in tcp_all if not (_probed_during(t) and _probes(t))]
    streams = sorted({int(t.streams or 1) for t in tcp})
    fw_mode = next((m for m in ("bridge", "routed") if any(t.mode == m for t in tcp_all)), None)
    rules = sorted({t.rules for t in tcp if t.mode == fw_mode and t.backend != "none"})
    probing_during = any(_probed_during(t) for t in tcp_all if _probes(t))
    out.scaling = [
        "Cross cable -> direct mode (client and server joined, no DUT); OnePointWall BLOCK -> the DUT in "
        f"{fw_mode or 'bridge'} mode with nftables rules (bridge family, checked per packet).",
        "Rule sets: the seed publishes only the SoftEther set's size (5 rules); the product's larger "
        "signature sets are stood in for by linear rule sets of 100 to 10000 rules.",
        "Parallel streams (iperf -P): fwlab's parallel kind, " + (", ".join(str(s) for s in streams) or "none")
        + " streams in this run; above 128 streams several iperf3 client processes run at once against "
        "several server ports (iperf3's -P limit) and are added up.",
        "Table 3: the seed started single-stream probes while its 500-stream test ran; fwlab's probes "
        "(a single-stream baseline before the run, then single-stream runs every interval_s, until one is "
        "within the tolerance of the baseline) "
        + ("start with the multi-stream run and run beside it (during = true) on an iperf3 server port of their own, "
           "until it ends" if probing_during else "start when the multi-stream run has ended (during = false)")
        + ". The seed's largest set ('all but firewall rules') -> fwlab's largest rule count.",
        "100 Mbit/s links -> unlimited veth: every figure is normalised to the direct figure at the same "
        "stream count, as the seed's cross connection.",
    ]
    if not probing_during:
        out.missing = ["Single-stream probes during the multi-stream test (the seed's Table 3 procedure): this "
                       "run's probes started after the multi-stream run had ended (parallel option during = true "
                       "probes during it, as the seed presets do)."]
    t2 = study.table("table2")
    pub_pct = {}
    for label, vals in t2.rows:
        cross = t2.row(CROSS)
        pub_pct[label] = [100.0 * v / c if v is not None and c else None for v, c in zip(vals, cross)]
    direct = {s: values(tcp, METRIC, mode="direct", streams=s) for s in streams}
    fw = {(n, s): values(tcp, METRIC, mode=fw_mode, rules=n, streams=s) for n in rules for s in streams}
    pct = {(n, s): ratio_pct(fw[(n, s)], direct[s]) for n in rules for s in streams}

    rows = [("as published", label, *[fmt(v, 1) for v in pub_pct[label]], *[""] * 0) for label, _ in t2.rows]
    header = ("source", "rule set", *[f"{c} streams [% of cross]" for c in t2.columns])
    out.tables.append(SideTable(
        title=f"{t2.ref}: TCP throughput as % of the cross connection, as published",
        header=header, rows=tuple(rows), left=2,
        note="Published Mbit/s divided by the cross connection's Mbit/s at the same stream count."))
    if streams:
        rows = [("fwlab", "direct (cross connection)", *[f"100 ({fmt(mean(direct[s]) and mean(direct[s]) / 1e9, 2)} Gbit/s)"
                                                       if direct[s] else "–" for s in streams])]
        for n in rules:
            rows.append(("fwlab", f"nftables {n:,} rules ({fw_mode})",
                         *[f"{fmt(pct[(n, s)], 1)} ({fmt(mean(fw[(n, s)]) and mean(fw[(n, s)]) / 1e9, 2)} Gbit/s)"
                           if fw[(n, s)] else _no_figure(tcp, fw_mode, n, s) for s in streams]))
        out.tables.append(SideTable(
            title="fwlab: TCP throughput as % of direct mode at the same stream count (absolute in brackets)",
            header=("source", "rule set", *[f"{s} streams [% of direct]" for s in streams]),
            rows=tuple(rows), left=2, note="Mean over repetitions. 'did not finish': the iperf3 clients were still "
                                           "running when the runner's timeout (trial length + 30 s + 2 s per client "
                                           "process) stopped them; the trial has no figure."))
        stall = _overrun_part(out, study, tcp, streams, rules, fw_mode)
    else:
        stall = Finding(id="seed-004/many-streams-stall", claim="With large rule sets many streams stall: the run lasts far past its nominal length",
                        published="表2 transfer times", fwlab="not measured: no stream trials in this run.",
                        criterion="–", verdict=NOT_MEASURED)

    # findings
    top_s = max(streams) if streams else None
    small_n = 5 if 5 in rules else (min((n for n in rules if n > 0), default=None))
    pub_small = pub_pct[SMALL]
    have_small = small_n is not None and all(pct.get((small_n, s)) is not None for s in (1, 100) if s in streams) \
        and 1 in streams
    if have_small:
        vals = [pct[(small_n, s)] for s in (1, 100) if s in streams]
        verdict, why = no_effect_verdict([(direct[s], fw[(small_n, s)]) for s in (1, 100) if s in streams], 90.0)
        zero = [pct.get((0, s)) for s in (1, 100) if s in streams]
        extra = (f" With 0 rules the {fw_mode} path itself gives {fmt_range(zero)} of direct."
                 if all(z is not None for z in zero) and 0 in rules else "")
        if verdict == NOT_REPRODUCED and extra and min(zero) < 90.0 and not _link_rate(run, trials):
            # the seed's 100 Mbit/s wire capped cross and firewall alike; on an unshaped veth bed
            # the DUT's hop itself costs, so a shortfall here is the bed's, not the rule set's
            verdict, why = INCONCLUSIVE, (f"the bed cannot reach the seed's regime: no link rate, and the "
                                          f"{fw_mode} path with 0 rules already gives {fmt_range(zero)} of direct "
                                          f"(the seed's wire capped both at 100 Mbit/s); run with link_rate")
        out.findings.append(Finding.judge(
            id="seed-004/small-set-keeps-cross", reason=why,
            used=[t for s in (1, 100) if s in streams for t in pick(tcp, METRIC, mode="direct", streams=s)
                  + pick(tcp, METRIC, mode=fw_mode, rules=small_n, streams=s)],
            claim="A small rule set (5 rules) keeps 1 and 100 streams at the cross connection's throughput",
            published=f"SoftEther set: {fmt(pub_small[0], 0)} % and {fmt(pub_small[1], 0)} % of cross at 1 and 100 streams",
            fwlab=f"fwlab, {small_n} rules: {fmt_range(vals)} of direct at 1 and 100 streams.{extra}",
            criterion="at least 90 % of direct at 1 and at 100 streams (inconclusive when lower but within the noise)",
            verdict=verdict))
    else:
        out.findings.append(Finding(id="seed-004/small-set-keeps-cross",
            claim="A small rule set (5 rules) keeps 1 and 100 streams at the cross connection's throughput",
            published=f"{fmt(pub_small[0], 0)} % and {fmt(pub_small[1], 0)} %", fwlab="not in this run.",
            criterion="at least 90 % of direct at 1 and at 100 streams", verdict=NOT_MEASURED))

    # the largest rule set with figures at 1 stream and at its largest stream count (a trial can be
    # missing, e.g. 128 streams through 10000 bridge rules not finishing in time)
    big = top_s = None
    for n in sorted((n for n in rules if n > 0), reverse=True):
        s_top = max((s for s in streams if s > 1 and pct.get((n, s)) is not None), default=None)
        if pct.get((n, 1)) is not None and s_top:
            big, top_s = n, s_top
            break
    keep_pub = [100.0 * pub_pct[r][3] / pub_pct[r][0] for r in LARGE]
    claim = "With large rule sets the aggregate throughput falls as parallel streams increase"
    crit = f"the share of direct at the largest stream count at most {FALL_TO:.0f} % of the share at 1 stream"
    published = (f"the three large sets keep {fmt_range(keep_pub)} of their 1-stream share of the cross connection at "
                 f"900 streams (e.g. {fmt(pub_pct[LARGE[2]][0], 0)} % -> {fmt(pub_pct[LARGE[2]][3], 0)} %)")
    if big:
        drop = pct[(big, 1)] - pct[(big, top_s)]
        # (fw at top / direct at top) / (fw at 1 / direct at 1), with its interval over all four
        keep = ratio_of_ratios_ci([fw[(big, top_s)], direct[1]], [direct[top_s], fw[(big, 1)]])
        verdict, why = bound_verdict([keep], FALL_TO, at_least=False)
        out.findings.append(Finding.judge(
            id="seed-004/large-sets-fall-with-streams", effect=True, reason=why,
            used=[t for s in (1, top_s) for t in pick(tcp, METRIC, mode="direct", streams=s)
                  + pick(tcp, METRIC, mode=fw_mode, rules=big, streams=s)],
            claim=claim, published=published,
            fwlab=f"fwlab, {big:,} rules: {fmt(pct[(big, 1)], 1)} % of direct at 1 stream, {fmt(pct[(big, top_s)], 1)} % "
                  f"at {top_s} streams ({fmt_ci(keep, digits=0)} of the 1-stream share, 95 % interval; "
                  f"{abs(drop):.1f} points {'lost' if drop >= 0 else 'gained'}).",
            criterion=crit + " (its whole 95 % interval; entirely above -> not reproduced, across -> inconclusive)",
            verdict=verdict))
    else:
        out.findings.append(Finding(id="seed-004/large-sets-fall-with-streams", claim=claim, published=published, fwlab="not in this run.", criterion=crit,
                                    verdict=NOT_MEASURED))
    out.findings.append(stall)

    cross = t2.row(CROSS)
    top_s = max((s for s in streams if s > 1 and direct.get(s)), default=None)
    if top_s and direct.get(1):
        ch = 100.0 * (mean(direct[top_s]) / mean(direct[1]) - 1)
        iv = ratio_ci(direct[top_s], direct[1])
        verdict, why = within_verdict(iv, CROSS_SAME_PCT)
        out.findings.append(Finding.judge(
            id="seed-004/cross-streams-hardly-matter", reason=why,
            used=[t for s in (1, top_s) for t in pick(tcp, METRIC, mode="direct", streams=s)],
            claim="Without the firewall the number of streams hardly matters",
            published=f"cross connection {cross[0]} Mbit/s at 1 stream, {cross[3]} Mbit/s at 900 ({100 * (cross[3] / cross[0] - 1):+.1f} %)",
            fwlab=f"fwlab direct: {fmt(mean(direct[1]) / 1e9, 2)} Gbit/s at 1 stream, {fmt(mean(direct[top_s]) / 1e9, 2)} Gbit/s "
                  f"at {top_s} ({ch:+.1f} %; {top_s} streams at {fmt_ci(iv)} of 1 stream, 95 % interval).",
            criterion=f"the 95 % interval of the {top_s}-stream figure over the 1-stream figure within "
                      f"±{CROSS_SAME_PCT:g} % (entirely outside -> not reproduced, across -> inconclusive)",
            verdict=verdict))
    t3 = study.table("table3")
    single = t2.value(T3_RULES, "1")
    pub_t3 = {lab: v[0] for lab, v in t3.rows}
    published = (f"probe at 0 s {pub_t3['0 s']:g} Mbit/s ({100 * pub_t3['0 s'] / single:.0f} % of the {single:g} Mbit/s "
                 f"single stream), 10 s {pub_t3['10 s']:g} ({100 * pub_t3['10 s'] / single:.0f} %), 20 s "
                 f"{pub_t3['20 s']:g} ({100 * pub_t3['20 s'] / single:.0f} %), later ~66.6; the 500 streams together "
                 f"{pub_t3['the 500-stream test itself']:g} Mbit/s")
    claim = "During a 500-stream test a new single stream recovers to its normal rate within about 20 s"
    # fwlab: the trials with probes at the stream count nearest 500, largest rule count, firewall mode
    probed = [t for t in tcp_all if t.mode == fw_mode and int(t.streams or 1) > 1 and _probes(t)
              and t.metric("baseline_bps")]
    if probed:
        s_t3 = min({int(t.streams) for t in probed}, key=lambda s: (abs(s - T3_STREAMS), -s))
        n_t3 = max(t.rules for t in probed if int(t.streams) == s_t3)
        sel = [t for t in probed if int(t.streams) == s_t3 and t.rules == n_t3]
        label = f"nftables {n_t3:,} rules, {fw_mode}, {s_t3} streams"
        out.tables.append(_probe_table(t3, t2, sel, label))
        tol = float((sel[0].extra.get("probe_plan") or sel[0].options or {}).get("tolerance") or 0.1)
        limit = RECOVERY_WITHIN_S + START_SLACK_S
        in_time = [t for t in sel if t.metric("recovered") and (t.metric("recovery_s") or 0) <= limit]
        # decided on the probes that ended while the load ran: a later one met an idle path
        late = [t for t in sel if t not in in_time and (t.metric("recovered") or max(
            (p["t_after_s"] for p in _probes(t) if _during_load(p)), default=0.0) >= RECOVERY_WITHIN_S)]
        first = [100.0 * p["ratio_to_baseline"] for t in sel for p in _probes(t)[:1] if p.get("ratio_to_baseline") is not None]
        rec_s = [t.metric("recovery_s") for t in in_time]
        when = "during the load" if all(_probed_during(t) for t in sel) else "after the run"
        text = (f"fwlab, {label}: first probe {when} at {fmt_range(first)} of the single-stream baseline; "
                f"within {100 * tol:.0f} % of it {'at ' + fmt_range(rec_s, 0, 's') if rec_s else 'never'} in "
                f"{len(in_time)} of {len(sel)} repetitions.")
        why = ""
        if not all(_probed_during(t) for t in sel):
            # probes after the load has ended meet an idle path: they recover at once whatever the
            # firewall did during the load, so this cannot come out negative here
            verdict = NOT_TESTABLE
            why = ("fwlab's probes start when the multi-stream run has ended (the seed probed during it): a probe "
                   "on the then idle path recovers whatever happened under the load, so no negative verdict is possible")
        elif len(in_time) == len(sel):
            verdict = REPRODUCED
        elif late:
            verdict = NOT_REPRODUCED
        else:
            verdict = INCONCLUSIVE
            why = _undecided_recovery(s_t3, [t for t in sel if t not in in_time])
        out.findings.append(Finding.judge(
            id="seed-004/probe-recovers-in-20s", used=sel, reason=why,
            claim=claim, published=published, fwlab=text,
            criterion=f"in every repetition a probe started during the {T3_STREAMS}-stream load comes within "
                      f"{100 * tol:.0f} % of the single-stream baseline at most {RECOVERY_WITHIN_S:g} s after the "
                      f"load began",
            verdict=verdict))
    else:
        out.findings.append(Finding(id="seed-004/probe-recovers-in-20s",
            claim=claim, published=published,
            fwlab="not measured: no multi-stream trial with recovery probes and a single-stream baseline in this run "
                  "(kind parallel with max_probes > 0 and baseline = true).",
            criterion=f"a probe within the tolerance of the single-stream baseline within {RECOVERY_WITHIN_S:g} s",
            verdict=NOT_MEASURED))
    return out


def _load_planned_s(t: TrialRecord) -> float:
    """How long the trial's multi-stream load was to run [s]: the probe plan's ``load_s``, else the
    trial's own duration."""
    plan = (t.extra or {}).get("probe_plan") or {}
    return float(plan.get("load_s") or t.duration_s or 0.0)


def _undecided_recovery(streams: int, undecided: list[TrialRecord]) -> str:
    """Why Table 3's repetitions whose probes during the load neither recovered within
    `RECOVERY_WITHIN_S` nor ran past it leave the finding undecided, each group with its own
    reason, joined: the load died before that time (when it ended, with the measured cause or the
    facts), the load was planned shorter than that, or the probes stopped earlier."""
    ended = {id(t): (t.extra or {}).get("load_ended_s") for t in undecided}
    # a load that died after RECOVERY_WITHIN_S did not stop the probes before it: not its reason
    died = [t for t in undecided if (t.extra or {}).get("load_error")
            and (ended[id(t)] is None or float(ended[id(t)]) < RECOVERY_WITHIN_S)]
    short = [t for t in undecided if t not in died and _load_planned_s(t) < RECOVERY_WITHIN_S]
    rest = [t for t in undecided if t not in died and t not in short]
    parts = []
    if rest:
        parts.append(f"the probes during the load of {len(rest)} repetition(s) ended before {RECOVERY_WITHIN_S:g} s "
                     "without recovering (the load ended, or max_probes was reached, earlier)")
    if short:
        planned = [_load_planned_s(t) for t in short]
        parts.append(f"the probes during the load of {len(short)} repetition(s) ended before {RECOVERY_WITHIN_S:g} s "
                     f"without recovering: the load was planned for {fmt_range(planned, 0, 's')} (probe_plan load_s, "
                     f"else the trial's duration), shorter than the {RECOVERY_WITHIN_S:g} s the finding allows")
    if died:
        ends = [float(ended[id(t)]) for t in died if ended[id(t)] is not None]
        unknown = len(died) - len(ends)
        when = (f" {fmt_range(ends, 1, 's')} after it began" if ends else "") + (
            f" ({'in ' + str(unknown) + ' of them ' if ends else ''}when it ended was not recorded)" if unknown else "")
        causes = sorted({str(t.extra["load_failure_cause"]) for t in died if t.extra.get("load_failure_cause")})
        facts = sorted({str(t.extra.get("load_failure_facts") or t.extra["load_error"])
                        for t in died if not t.extra.get("load_failure_cause")})
        parts.append(f"the {streams}-stream load died{when} in {len(died)} repetition(s)"
                     + (f", before {RECOVERY_WITHIN_S:g} s, so no probe could recover during it" if not unknown else "")
                     + (f"; measured cause: {'; '.join(causes)}" if causes else "")
                     + (f"; no cause measured: {'; '.join(facts)}" if facts else ""))
    return "; ".join(parts)
