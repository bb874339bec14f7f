"""Seed 000 (Seral, netfilter vs OpenBSD PF, netperf): the stream throughput the text states,
beside fwlab's TCP (iperf3) and one-way UDP (fwlab-engine) figures per rule count.

Normalisation: % of the same configuration's 0-rule figure (the seed's smallest set is 1 rule;
its figures are plots, so only the numbers of its text are compared). Under attack (§3.3, Fig. 8:
no numbers printed, only the text's findings): TCP trials beside a UDP flood (record kind
``attack``, ``background.rate_pps``) as % of the same configuration without the flood (the
rate-0 trial of the same flood item), firewall off (backend none) and on.

PF (Figures 6, 7, 9): the figures its text states are transcribed (table ``text-3.2-3.3-pf``) and
shown beside netfilter's; PF runs only on a remote BSD DUT (backend ``command:pf``): without such
trials its fwlab column says so. PF trials never feed the netfilter findings.
"""

from __future__ import annotations

from fwlab.published.compare import (
    bound_verdict,
    decides,
    fmt_ci,
    range_verdict,
    ratio_ci,
    undecided_reason,
    INCONCLUSIVE,
    NOT_MEASURED,
    NOT_REPRODUCED,
    REPRODUCED,
    Finding,
    SideTable,
    StudyComparison,
    change,
    config_name,
    fmt,
    fmt_range,
    mean,
    no_effect_verdict,
    ratio_pct,
    register,
)
from fwlab.published.cost import cost_trials, slope_finding
from fwlab.published.model import Study
from fwlab.results.trial import TrialRecord

METRIC = "throughput_bps"
#: Ethernet frame size incl. FCS of fwlab-engine's UDP -> the UDP payload (netperf send size)
FRAME_TO_PAYLOAD = {110: 64, 558: 512, 1446: 1400}
PF_BACKENDS = ("pf", "command:pf")
PF_NOT_RUN = "published only, PF not run on this bed"
PF_TABLE = "text-3.2-3.3-pf"


def _is_pf(backend) -> bool:
    return backend in PF_BACKENDS


def _flood_rate(t: TrialRecord) -> float:
    return float((t.background or {}).get("rate_pps") or 0.0)


def _streams(trials):
    """Trials without a flood: plain stream trials and the rate-0 references of a flood item."""
    return [t for t in trials if t.kind in ("stream", "attack") and _flood_rate(t) == 0
            and t.traffic in ("tcp", "engine", "udp")]


def _tcp_flood(trials):
    """TCP trials of a UDP flood item, its rate-0 references included."""
    return [t for t in trials if t.kind == "attack" and t.traffic == "tcp"
            and (t.background or {}).get("kind") == "udp_flood"]


def _payload(t: TrialRecord) -> int | None:
    s = t.size_bytes
    return FRAME_TO_PAYLOAD.get(s, s) if t.traffic == "engine" else s


def _payload_bps(t: TrialRecord) -> float | None:
    """The trial's throughput in UDP/TCP payload bits per second, as netperf counts: fwlab-engine
    reports Ethernet frame bits incl. FCS, scaled here by payload / frame size."""
    m = (t.metrics or {}).get(METRIC)
    if m is None:
        return None
    s = t.size_bytes
    if t.traffic == "engine" and s in FRAME_TO_PAYLOAD:
        return float(m) * FRAME_TO_PAYLOAD[s] / s
    return float(m)


@register("seed-000")
def compare(study: Study, run: dict, trials: list[TrialRecord]) -> StudyComparison:
    out = StudyComparison(study)
    st = _streams(trials)
    pairs = int(((run.get("suite") or {}).get("parsed") or {}).get("pairs") or 1)
    out.scaling = [
        ("Two client and two server PCs through a gigabit switch and an Athlon firewall -> "
         + (f"{pairs} client and {pairs} server namespaces on veth, each client's TCP stream to its own server "
            "at once, through a switch namespace (a bridge) per side into the DUT's one veth per side; a trial's "
            "TCP figure is the pairs' sum (the engine's UDP drives pair 1)" if pairs > 1 else
            "one client, one DUT and one server namespace on veth (pairs = 1: one pair where the seed had two)")
         + " (direct mode = the seed's direct connection)."),
        "netfilter on Linux 2.6.22 -> iptables-legacy (and nftables in the full suite) with "
        "'established,related accept' first: the seed credits netfilter's stateful tracking for flat TCP.",
        "OpenBSD PF: cannot run in a Linux namespace; only on a remote OpenBSD/FreeBSD DUT (backend command:pf). "
        "Its published figures (Figs. 6, 7, 9) stand beside netfilter's.",
        "netperf TCP_STREAM -> iperf3 TCP with the same write sizes; netperf UDP_STREAM (one-way, never "
        "answered, so every packet is new to conntrack) -> fwlab-engine at its maximum rate with the same "
        "UDP payloads (frames of 110/558/1446 B).",
        "Figures are compared as % of the same configuration's 0-rule figure (the seed's smallest set: 1 rule).",
    ]
    out.scaling.append(
        "§3.3, under attack: pktgen's flood (60 B UDP from 65535 source addresses to the servers) -> fwlab-engine's "
        "AF_PACKET sender in an attacker namespace on the DUT's client side, 64 B frames (60 B on the wire) from "
        "65535 spoofed sources (10.200.0.0/16) to a closed UDP port of the server, started before and stopped after "
        "each TCP trial; firewall off = backend none (the DUT forwards the flood to the server). The text gives "
        "9500 pps and 46 Mbit/s, which disagree (9500 x 60 B is 4.6 Mbit/s; 46 Mbit/s is about 95000 pps): the "
        "presets run both. On veth the DUT's work on the flood runs on the attacker's CPU.")
    t = study.table("text-3.1-3.2")
    every_fw = sorted({(x.backend, x.layout, bool(x.stateful_shortcut)) for x in st
                       if x.backend != "none" and x.mode != "direct"})
    fw = [c for c in every_fw if not _is_pf(c[0])]     # the netfilter findings read netfilter only
    if not any(_is_pf(c[0]) for c in every_fw):
        out.missing = ["OpenBSD PF (Figures 6, 7, 9): not run on this bed (pf needs a remote BSD DUT, backend "
                       "command:pf); its published figures are shown beside netfilter's."]
    rules = sorted({x.rules for x in st if x.backend != "none"})

    def used(traffic, payload, cfg, *ns):
        be, lay, sc = cfg
        return [x for x in st if x.traffic == traffic and _payload(x) == payload and x.backend == be
                and x.layout == lay and bool(x.stateful_shortcut) == sc and x.rules in ns
                and not x.error and x.metrics and _payload_bps(x) is not None]

    def v(traffic, payload, cfg, n):
        """Payload bit/s of the matching trials (ratios are the same in frame or payload bits)."""
        return [_payload_bps(x) for x in used(traffic, payload, cfg, n)]

    rows = []
    for traffic, label in (("tcp", "TCP"), ("engine", "UDP one-way")):
        for cfg in every_fw:
            for size in sorted({_payload(x) for x in st if x.traffic == traffic}, key=lambda s: s or 0):
                z = v(traffic, size, cfg, 0)
                if not z:
                    continue
                rows.append((f"{label} {size} B", config_name(*cfg), fmt(mean(z) / 1e6, 0),
                             *[fmt(ratio_pct(v(traffic, size, cfg, n), z), 0) for n in rules if n > 0]))
    direct = {tr: [b for x in st if x.mode == "direct" and x.traffic == tr and not x.error
                   for b in [_payload_bps(x)] if b is not None] for tr in ("tcp", "engine")}
    out.tables.append(SideTable(
        title="fwlab: throughput as % of 0 rules (0-rule figure in payload Mbit/s)",
        header=("traffic (payload size)", "firewall", "0 rules [payload Mbit/s]",
                *[f"{n:,} rules [%]" for n in rules if n > 0]),
        rows=tuple(rows), left=2,
        note="Means over repetitions. Payload bits as netperf counts them: fwlab-engine's UDP frames (110/558/1446 B "
             "incl. FCS) are measured in frame bits and converted by payload / frame size; % of 0 rules is the same "
             "in either unit."))
    pub_rows = [(label, fmt(vals[0], 0)) for label, vals in t.rows]
    pub_rows += [("fwlab direct, TCP maximum over write sizes", fmt(max(direct["tcp"]) / 1e6 if direct["tcp"] else None, 0)),
                 ("fwlab direct, UDP one-way maximum over sizes", fmt(max(direct["engine"]) / 1e6 if direct["engine"] else None, 0))]
    out.tables.append(SideTable(title=f"{t.ref}: as published, and fwlab's direct figures",
                                header=("figure", "payload Mbit/s (netperf's unit)"),
                                rows=tuple(pub_rows),
                                note="Absolute rates do not compare (32-bit PCI NICs then, veth here)."))

    out.tables.append(_pf_table(study, st, every_fw, _tcp_flood(trials), used))

    # findings
    top = max(rules) if rules else 0
    for cfg in fw:
        name = config_name(*cfg)
        tcp_sizes = sorted({_payload(x) for x in st if x.traffic == "tcp"}, key=lambda s: s or 0)
        r = {s: ratio_pct(v("tcp", s, cfg, top), v("tcp", s, cfg, 0)) for s in tcp_sizes}
        r = {s: x for s, x in r.items() if x is not None}
        if top and r:
            verdict, why = no_effect_verdict([(v("tcp", s, cfg, 0), v("tcp", s, cfg, top)) for s in r], 90.0)
            out.findings.append(Finding.judge(
                id=f"seed-000/tcp-flat/{name}", used=[x for s in r for x in used("tcp", s, cfg, 0, top)], reason=why,
                claim="TCP throughput is the same at every rule count (stateful netfilter)",
                published="Fig. 4: the curves with and without rules 'coincide one to one'",
                fwlab=f"fwlab {name} at {top:,} rules: {fmt_range(list(r.values()))} of its 0-rule TCP throughput "
                      f"(write sizes {', '.join(str(s) for s in r)} B).",
                criterion="at least 90 % of 0 rules at every write size (inconclusive when a lower figure is "
                          "within the noise of the repetitions)",
                verdict=verdict))
        below = [n for n in rules if 0 < n <= 200]
        above = [n for n in rules if n >= 500]
        z = v("engine", 1400, cfg, 0)
        if z and below:
            n200 = max(below)
            p200 = ratio_pct(v("engine", 1400, cfg, n200), z)
            verdict, why = (NOT_MEASURED, "no 1400 B figure at 200 rules") if p200 is None else \
                no_effect_verdict([(z, v("engine", 1400, cfg, n200))], 90.0)
            out.findings.append(Finding.judge(
                id=f"seed-000/udp-flat-to-200/{name}", used=used("engine", 1400, cfg, 0, n200), reason=why,
                claim="One-way UDP of 1400 B is not slowed up to 200 rules",
                published=f"{t.value('netfilter, UDP_STREAM 1400 B, up to 200 rules (Fig. 5)', 'value'):.0f} Mbit/s up to 200 rules",
                fwlab=f"fwlab {name}: {fmt(p200, 0)} % of the 0-rule rate at {n200} rules.",
                criterion="at least 90 % of the 0-rule rate (inconclusive when lower but within the noise)",
                verdict=verdict))
        if z and below and above:
            n200 = max(below)
            ref = v("engine", 1400, cfg, n200)
            drops = {n: ratio_pct(v("engine", 1400, cfg, n), ref) for n in above}
            drops = {n: x for n, x in drops.items() if x is not None}
            pub = 100.0 * t.value("netfilter, UDP_STREAM, 500 and 1000 rules: below (Fig. 5)", "value") / \
                t.value("netfilter, UDP_STREAM 1400 B, up to 200 rules (Fig. 5)", "value")
            if drops:
                ivs = {n: ratio_ci(v("engine", 1400, cfg, n), ref) for n in drops}
                verdict, why = bound_verdict(list(ivs.values()), pub, at_least=False)
                out.findings.append(Finding.judge(
                    id=f"seed-000/udp-collapse/{name}", effect=True, reason=why,
                    used=used("engine", 1400, cfg, n200, *drops),
                    claim="One-way UDP collapses at 500 and 1000 rules (every packet walks the rule base)",
                    published=f"below 100 Mbit/s at 500 and 1000 rules, i.e. under {pub:.0f} % of the 200-rule rate",
                    fwlab=f"fwlab {name}, as % of its {n200}-rule rate: "
                          + ", ".join(f"{n:,} rules {fmt_ci(ivs[n], digits=0)}" for n in sorted(drops)) + " (95 % intervals).",
                    criterion=f"the 95 % interval under {pub:.0f} % of the {n200}-rule rate at every rule count >= 500",
                    verdict=verdict))
    _rule_walk_cost(out, trials, fw)
    if not out.findings:
        out.findings.append(Finding(id="seed-000/rule-count", claim="TCP flat, UDP collapsing with the rule count",
                                    published="Figs. 4 and 5", fwlab="no firewall configuration with 0 and more rules in this run.",
                                    criterion="–", verdict=NOT_MEASURED))
    _attack(out, trials)
    return out


def _rule_walk_cost(out: StudyComparison, trials: list[TrialRecord], fw: list) -> None:
    """The mechanism behind §3.2's UDP collapse, from the in-kernel clock: one-way UDP stays 'new'
    to conntrack (no reply), so even with 'established,related accept' first every packet walks the
    rule base, and the firewall's own time per packet grows with the rule count. Decided on the
    per-rule slope of the cost trials (tool kernel-cost: one-way engine UDP at a light load) of each
    netfilter configuration, routed; the throughput findings above stay as they are."""
    cfgs = list(fw) or sorted({(t.backend, t.layout, bool(t.stateful_shortcut)) for t in trials
                               if t.kind == "cost" and t.backend != "none" and not _is_pf(t.backend)})
    for be, lay, sc in cfgs:
        name = config_name(be, lay, sc)
        f = slope_finding(
            cost_trials(trials, backend=be, layout=lay, stateful_shortcut=sc, mode="routed"), lay,
            id=f"seed-000/udp-rule-walk-cost/{name}", name=name,
            claim="Every one-way UDP packet walks the rule base: the firewall's own time per packet grows with "
                  "the rule count (in-kernel cost)",
            published="§3.2, Fig. 5: UDP_STREAM falls below 100 Mbit/s at 500 and 1000 rules, because each "
                      "packet is checked against the rule base")
        if f is not None:
            out.findings.append(f)


def _pf_table(study: Study, st: list[TrialRecord], every_fw: list, flood: list[TrialRecord], used) -> SideTable:
    """The figures the text states for netfilter and PF side by side, beside fwlab's for the same
    conditions (payload Mbit/s, means over repetitions): one column per netfilter configuration and
    one for PF, which says it was not run unless the record holds PF trials (remote BSD DUT)."""
    nf, pf = study.table("text-3.1-3.2"), study.table(PF_TABLE)
    nf_cfgs = [c for c in every_fw if not _is_pf(c[0])]
    pf_cfgs = [c for c in every_fw if _is_pf(c[0])]
    rules = sorted({x.rules for x in st if x.backend != "none"})
    flood_rates = sorted({_flood_rate(t) for t in flood if _flood_rate(t) > 0})

    def best(traffic, payload, cfg, ns) -> float | None:
        """The highest mean over rule counts ``ns`` (and payloads, when ``payload`` is None)."""
        sizes = {_payload(x) for x in st if x.traffic == traffic} if payload is None else {payload}
        means = [mean(v) for n in ns for s in sizes
                 for v in [[_payload_bps(x) for x in used(traffic, s, cfg, n)]] if v]
        return max(means) / 1e6 if means else None

    def under_flood(cfg, ns) -> float | None:
        if not flood_rates:
            return None
        be, lay, sc = cfg
        means = []
        for n in ns:
            v = [float(t.metrics["throughput_bps"]) for t in flood if t.backend == be
                 and t.layout == lay and bool(t.stateful_shortcut) == sc
                 and t.rules == n and _flood_rate(t) == max(flood_rates) and t.size_bytes == 1400
                 and not t.error and (t.metrics or {}).get("throughput_bps") is not None]
            if v:
                means.append(mean(v))
        return max(means) / 1e6 if means else None

    low = [n for n in rules if n <= 200]
    high = [n for n in rules if n >= 500]
    lines = [
        ("TCP_STREAM, maximum over rule counts and send sizes (Figs. 4, 6)",
         f"{nf.value('netfilter, TCP_STREAM, maximum at any rule count (Fig. 4)', 'value'):.0f}",
         f"{pf.value('PF, TCP_STREAM 1400 B, maximum (Fig. 6)', 'value'):.0f} (at 1400 B)",
         lambda c: best("tcp", None, c, rules)),
        ("UDP_STREAM 1400 B, up to 200 rules (Figs. 5, 7)",
         f"{nf.value('netfilter, UDP_STREAM 1400 B, up to 200 rules (Fig. 5)', 'value'):.0f}",
         f"~{pf.value('PF, UDP_STREAM, about, at every rule count (Fig. 7)', 'value'):.0f} (every rule count)",
         lambda c: best("engine", 1400, c, [max(low)] if low else [])),
        ("UDP_STREAM 1400 B, 500 and 1000 rules (Figs. 5, 7)",
         f"<{nf.value('netfilter, UDP_STREAM, 500 and 1000 rules: below (Fig. 5)', 'value'):.0f}",
         f"~{pf.value('PF, UDP_STREAM, about, at every rule count (Fig. 7)', 'value'):.0f} (every rule count)",
         lambda c: best("engine", 1400, c, high)),
        ("TCP_STREAM 1400 B under attack, 500 and 1000 rules (Figs. 8, 9)",
         "– (no figure printed)",
         f"~{pf.value('PF, TCP_STREAM under attack, 500 and 1000 rules: about (Fig. 9)', 'value'):.0f}",
         lambda c: under_flood(c, high)),
    ]
    rows = []
    for label, nf_pub, pf_pub, ours in lines:
        nf_cells = [fmt(ours(c), 0) for c in nf_cfgs]
        pf_cell = "; ".join(f"{config_name(*c)} {fmt(ours(c), 0)}" for c in pf_cfgs) if pf_cfgs else PF_NOT_RUN
        rows.append((label, nf_pub, pf_pub, *nf_cells, pf_cell))
    flood_note = (f" Under attack: fwlab's TCP at {max(flood_rates):,.0f} pps of flood, the highest rate run."
                  if flood_rates else " Under attack: no flood in this run.")
    return SideTable(
        title="Text to Figs. 4-9 (netfilter and OpenBSD PF): netfilter and PF as published, beside fwlab",
        header=("figure", "netfilter, published [payload Mbit/s]", "PF, published [payload Mbit/s]",
                *[f"fwlab {config_name(*c)} [payload Mbit/s]" for c in nf_cfgs], "fwlab PF [payload Mbit/s]"),
        rows=tuple(rows), left=3,
        note="Published figures are the numbers the text states (the figures are plots); '~' = 'about', '<' = "
             "'below'. fwlab: the highest mean over the rule counts of the row, in payload bits as netperf counts "
             "them. PF runs only on a remote OpenBSD/FreeBSD DUT (backend command:pf): without PF trials its "
             "column says it was not run." + flood_note + " Absolute rates do not compare (32-bit PCI NICs then, veth here).")


ATTACK_IDS: dict[str, str] = {}
"""Finding id of each §3.3 claim (filled where the claims are defined)."""
HALF_RANGE = (30.0, 70.0)
"""'About half' ('yarı yarıya'): fwlab counts 30-70 % of the no-flood figure as half."""
LOW_RULES = 200
"""The seed: netfilter helps under attack up to 200 rules; 500 and 1000 rules make it worse."""


def _attack(out: StudyComparison, trials: list[TrialRecord]) -> None:
    """§3.3 (Fig. 8, no numbers printed): TCP under the UDP flood, firewall off and netfilter."""
    at = [t for t in _tcp_flood(trials) if t.metrics and not t.error]
    rates = sorted({_flood_rate(t) for t in at if _flood_rate(t) > 0})
    c_half = "Under the flood, netfilter (up to 200 rules) keeps forwarding TCP at about half its no-attack throughput"
    c_off = "Under the flood, TCP without the firewall is lower than through netfilter with up to 200 rules"
    c_many = "Under the flood, 500 and 1000 rules make netfilter's TCP throughput worse than up to 200 rules"
    ATTACK_IDS.update({c_half: "seed-000/attack-about-half", c_off: "seed-000/attack-firewall-off-lower",
                       c_many: "seed-000/attack-many-rules-worse"})
    if not rates:
        for claim in (c_half, c_off, c_many):
            out.findings.append(Finding(id=ATTACK_IDS[claim], claim=claim, published="Fig. 8, §3.3 text (no numbers printed)",
                                        fwlab="not measured: no TCP trial beside a UDP flood in this run.",
                                        criterion="–", verdict=NOT_MEASURED))
        return
    confs = sorted({(t.backend, t.layout, bool(t.stateful_shortcut)) for t in at},
                   key=lambda c: (c[0] != "none", c))
    sizes = sorted({t.size_bytes for t in at}, key=lambda s: s or 0)

    def tp_trials(cfg, n, size, rate):
        be, lay, sc = cfg
        return [t for t in at if t.backend == be and t.layout == lay
                and bool(t.stateful_shortcut) == sc and t.rules == n
                and t.size_bytes == size and _flood_rate(t) == rate
                and t.metric("throughput_bps") is not None]

    def tp(cfg, n, size, rate):
        return [float(t.metric("throughput_bps")) for t in tp_trials(cfg, n, size, rate)]

    def offered(cfg, n, rate):
        be, lay, sc = cfg
        return [float(t.metric("flood_offered_pps")) for t in at if t.backend == be
                and t.layout == lay and t.rules == n and _flood_rate(t) == rate
                and t.metric("flood_offered_pps") is not None]

    rows = []
    for cfg in confs:
        for n in sorted({t.rules for t in at if (t.backend, t.layout,
                                                                  bool(t.stateful_shortcut)) == cfg}):
            pub = ("very low ('çok düşük')" if cfg[0] == "none" else
                   "about half of no attack" if n <= LOW_RULES else "worse than up to 200 rules")
            for size in sizes:
                base = tp(cfg, n, size, 0.0)
                if not base:
                    continue
                cells = []
                for r in rates:
                    off = mean(offered(cfg, n, r))
                    pct = ratio_pct(tp(cfg, n, size, r), base)
                    cells.append(f"{fmt(pct, 0)} (offered {fmt(off and off / 1e3, 1)} kpps)" if pct is not None else "–")
                rows.append((config_name(*cfg), f"{n:,}", f"{size or 'default'} B", pub, fmt(mean(base) / 1e6, 0), *cells))
    out.tables.append(SideTable(
        title="§3.3 / Fig. 8: TCP throughput under a UDP flood (65535 spoofed sources, 60 B), as % of no flood",
        header=("firewall", "rules", "write size", "as published (Fig. 8, text)", "no flood [Mbit/s]",
                *[f"flood {r:,.0f} pps [% of no flood]" for r in rates]),
        rows=tuple(rows), left=4,
        note="Means over repetitions; the no-flood figure is the same trial without a flood (rate 0), measured in "
             "the same rule set. 'offered' is the flood rate the engine achieved (below the intended rate when the "
             "attacker's CPU, which also does the DUT's work on veth, could not keep up)."))

    top = max(rates)
    fw = [c for c in confs if c[0] != "none" and not _is_pf(c[0])]
    rules_fw = sorted({t.rules for t in at if t.backend != "none" and not _is_pf(t.backend)})
    low = [n for n in rules_fw if n <= LOW_RULES]
    high = [n for n in rules_fw if n >= 500]
    where = f"at {top:,.0f} pps"

    def against(ref, ref_n, cands, higher: bool) -> tuple[str, str, list[str], list[dict]]:
        """Each candidate (config, rules) against the reference under the top flood, per write
        size: the verdict (reproduced when every one moved the expected way significantly, not
        reproduced when one moved the other way significantly, else inconclusive: within the noise
        or one repetition),
        its reason, one "<size> B <n> rules <pct> %" cell each and the trials used."""
        wrong, noisy, cells, used = False, [], [], []
        for s in sizes:
            a = tp(ref, ref_n, s, top)
            for cfg, n in cands:
                b = tp(cfg, n, s, top)
                if not a or not b:
                    continue
                used += tp_trials(ref, ref_n, s, top) + tp_trials(cfg, n, s, top)
                c = change(a, b)
                moved = mean(b) > mean(a) if higher else mean(b) < mean(a)
                if not decides(c):    # within the noise, or one repetition: no interval (DECISION_RULE)
                    noisy.append(undecided_reason(c))
                elif not moved:       # significantly the other way
                    wrong = True
                cells.append(f"{s} B {n:,} rules {100.0 * mean(b) / mean(a):.0f} %")
        if wrong:
            return NOT_REPRODUCED, "", cells, used
        if noisy:
            return INCONCLUSIVE, "; ".join(dict.fromkeys(noisy)), cells, used
        return REPRODUCED, "", cells, used

    # 1: about half, still forwarding
    pairs = [(cfg, n, s, tp(cfg, n, s, 0.0), tp(cfg, n, s, top)) for cfg in fw for n in low for s in sizes]
    pairs = [p for p in pairs if p[3] and p[4]]
    if pairs:
        pcts = [ratio_pct(p[4], p[3]) for p in pairs]
        ivs = [ratio_ci(p[4], p[3]) for p in pairs]
        verdict, why = range_verdict(ivs, *HALF_RANGE)
        if any(min(p[4]) <= 0 for p in pairs):
            verdict, why = NOT_REPRODUCED, ""      # a repetition that forwarded nothing: not 'still forwarding'
        out.findings.append(Finding.judge(
            id="seed-000/attack-about-half", reason=why,
            used=[t for cfg, n, s, _, _ in pairs for r in (0.0, top) for t in tp_trials(cfg, n, s, r)],
            claim=c_half, published="Fig. 8 text: with the firewall on, performance fell to about half of the "
                                    "no-attack tests ('yarı yarıya'); both firewalls kept working (§4)",
            fwlab=f"fwlab {', '.join(config_name(*c) for c in fw)}, {', '.join(str(n) for n in low)} rules, {where}: "
                  f"{fmt_range(pcts)} of the same trial without the flood (write sizes "
                  f"{', '.join(str(s) for s in sizes)} B; 95 % intervals "
                  f"{', '.join(fmt_ci(iv, digits=0) for iv in ivs)}).",
            criterion=f"the 95 % interval of every rule count up to {LOW_RULES} and write size inside "
                      f"{HALF_RANGE[0]:.0f}-{HALF_RANGE[1]:.0f} % of no flood (one entirely outside -> not reproduced, "
                      f"across a limit -> inconclusive), and no repetition at 0",
            verdict=verdict))
    else:
        out.findings.append(Finding(id="seed-000/attack-about-half", claim=c_half, published="Fig. 8 text: about half", criterion="–",
                                    fwlab="not measured: no netfilter trial up to 200 rules with and without the flood.",
                                    verdict=NOT_MEASURED))

    # 2: firewall off is worse under the flood
    off = next((c for c in confs if c[0] == "none"), None)
    if off and fw and low:
        verdict, why, cells, used = against(off, 0, [(fw[0], n) for n in low], higher=True)  # netfilter vs none
        if cells:
            out.findings.append(Finding.judge(
                id="seed-000/attack-firewall-off-lower", used=used, reason=why,
                claim=c_off, published="Fig. 8 text: without the firewall the transfer rate was very low under attack; "
                                       "netfilter helped up to 200 rules",
                fwlab=f"fwlab {where}, netfilter as % of no firewall: " + ", ".join(cells) + ".",
                criterion="netfilter above no firewall under the same flood at every write size and rule count up to "
                          f"{LOW_RULES}, and the difference significant (Welch, alpha 0.05; one repetition: inconclusive)",
                verdict=verdict))
    if not any(f.claim == c_off for f in out.findings):
        out.findings.append(Finding(id="seed-000/attack-firewall-off-lower", claim=c_off, published="Fig. 8 text: very low without the firewall", criterion="–",
                                    fwlab="not measured: this run lacks the flood beside no firewall or beside netfilter "
                                          "up to 200 rules.", verdict=NOT_MEASURED))

    # 3: 500/1000 rules worse than up to 200 under the flood
    if fw and low and high:
        n_low = max(low)
        verdict, why, cells, used = against(fw[0], n_low, [(fw[0], n) for n in high], higher=False)
        if cells:
            out.findings.append(Finding.judge(
                id="seed-000/attack-many-rules-worse", effect=True, used=used, reason=why,
                claim=c_many, published="Fig. 8 text: netfilter helped under attack up to 200 rules; at 500 or 1000 "
                                        "rules it had a negative effect",
                fwlab=f"fwlab {config_name(*fw[0])} {where}, as % of {n_low} rules under the same flood: "
                      + ", ".join(cells) + ".",
                criterion=f"below {n_low} rules under the same flood at every rule count >= 500 and write size, "
                          "and the difference significant (Welch, alpha 0.05; one repetition: inconclusive)",
                verdict=verdict))
    if not any(f.claim == c_many for f in out.findings):
        out.findings.append(Finding(id="seed-000/attack-many-rules-worse", claim=c_many, published="Fig. 8 text: worse at 500 and 1000 rules", criterion="–",
                                    fwlab="not measured: this run lacks netfilter under the flood at up to 200 and at "
                                          "500 or more rules.", verdict=NOT_MEASURED))
