"""Seed 000 (Seral, netfilter vs OpenBSD PF, netperf): the stream throughput the text states,
beside fwlab's TCP (iperf3) and one-way UDP (fwlab-engine) figures per rule count.

Normalisation: % of the same configuration's 0-rule figure (the seed's smallest set is 1 rule;
its figures are plots, so only the numbers of its text are compared).
"""

from __future__ import annotations

from fwlab.published.compare import (
    NOT_MEASURED,
    NOT_REPRODUCED,
    REPRODUCED,
    Finding,
    SideTable,
    StudyComparison,
    config_name,
    fmt,
    fmt_range,
    mean,
    no_effect_verdict,
    ratio_pct,
    register,
    values,
)
from fwlab.published.model import Study

METRIC = "throughput_bps"
#: Ethernet frame size incl. FCS of fwlab-engine's UDP -> the UDP payload (netperf send size)
FRAME_TO_PAYLOAD = {110: 64, 558: 512, 1446: 1400}


def _streams(trials):
    return [t for t in trials if t.get("kind") == "stream" and t.get("traffic") in ("tcp", "engine", "udp")]


def _payload(t: dict) -> int | None:
    s = t.get("size_bytes")
    return FRAME_TO_PAYLOAD.get(s, s) if t.get("traffic") == "engine" else s


@register("seed-000")
def compare(study: Study, run: dict, trials: list[dict]) -> StudyComparison:
    out = StudyComparison(study)
    st = _streams(trials)
    out.scaling = [
        "Two PCs through a gigabit switch and an Athlon firewall -> client, DUT and server namespaces on veth "
        "(direct mode = the seed's direct connection).",
        "netfilter on Linux 2.6.22 -> iptables-legacy (and nftables in the full suite) with "
        "'established,related accept' first: the seed credits netfilter's stateful tracking for flat TCP.",
        "OpenBSD PF: cannot run on Linux; not measured.",
        "netperf TCP_STREAM -> iperf3 TCP with the same write sizes; netperf UDP_STREAM (one-way, never "
        "answered, so every packet is new to conntrack) -> fwlab-engine at its maximum rate with the same "
        "UDP payloads (frames of 110/558/1446 B).",
        "Figures are compared as % of the same configuration's 0-rule figure (the seed's smallest set: 1 rule).",
    ]
    out.missing = ["§3.3, TCP under attack (pktgen, 9500 pps of 60 B UDP from 65535 source addresses, 1-1000 "
                   "rules): needs floods from an attacker namespace (issue 6).",
                   "OpenBSD PF (Figures 6, 7, 9): not available on Linux."]
    t = study.table("text-3.1-3.2")
    fw = sorted({(x.get("backend"), x.get("layout"), bool(x.get("stateful_shortcut"))) for x in st
                 if x.get("backend") != "none" and x.get("mode") != "direct"})
    rules = sorted({int(x.get("rules") or 0) for x in st if x.get("backend") != "none"})

    def v(traffic, payload, cfg, n):
        be, lay, sc = cfg
        return [val for x in st if x.get("traffic") == traffic and _payload(x) == payload and x.get("backend") == be
                and x.get("layout") == lay and bool(x.get("stateful_shortcut")) == sc and int(x.get("rules") or 0) == n
                and not x.get("error") and x.get("metrics") for val in [x["metrics"].get(METRIC)] if val is not None]

    rows = []
    for traffic, label in (("tcp", "TCP"), ("engine", "UDP one-way")):
        for cfg in fw:
            for size in sorted({_payload(x) for x in st if x.get("traffic") == traffic}, key=lambda s: s or 0):
                z = v(traffic, size, cfg, 0)
                if not z:
                    continue
                rows.append((f"{label} {size} B", config_name(*cfg), fmt(mean(z) / 1e6, 0),
                             *[fmt(ratio_pct(v(traffic, size, cfg, n), z), 0) for n in rules if n > 0]))
    direct = {tr: values(st, METRIC, mode="direct", traffic=tr) for tr in ("tcp", "engine")}
    out.tables.append(SideTable(
        title="fwlab: throughput as % of 0 rules (0-rule figure in Mbit/s)",
        header=("traffic", "firewall", "0 rules [Mbit/s]", *[f"{n:,} rules [%]" for n in rules if n > 0]),
        rows=tuple(rows), left=2,
        note="Means over repetitions. UDP one-way: fwlab-engine frames, throughput in frame bits incl. FCS."))
    pub_rows = [(label, fmt(vals[0], 0)) for label, vals in t.rows]
    pub_rows += [("fwlab direct, TCP maximum over write sizes", fmt(max(direct["tcp"]) / 1e6 if direct["tcp"] else None, 0)),
                 ("fwlab direct, UDP one-way maximum over sizes", fmt(max(direct["engine"]) / 1e6 if direct["engine"] else None, 0))]
    out.tables.append(SideTable(title=f"{t.ref}: as published, and fwlab's direct figures", header=("figure", "Mbit/s"),
                                rows=tuple(pub_rows),
                                note="Absolute rates do not compare (32-bit PCI NICs then, veth here)."))

    # findings
    top = max(rules) if rules else 0
    for cfg in fw:
        name = config_name(*cfg)
        tcp_sizes = sorted({_payload(x) for x in st if x.get("traffic") == "tcp"}, key=lambda s: s or 0)
        r = {s: ratio_pct(v("tcp", s, cfg, top), v("tcp", s, cfg, 0)) for s in tcp_sizes}
        r = {s: x for s, x in r.items() if x is not None}
        if top and r:
            out.findings.append(Finding(
                claim="TCP throughput is the same at every rule count (stateful netfilter)",
                published="Fig. 4: the curves with and without rules 'coincide one to one'",
                fwlab=f"fwlab {name} at {top:,} rules: {fmt_range(list(r.values()))} of its 0-rule TCP throughput "
                      f"(write sizes {', '.join(str(s) for s in r)} B).",
                criterion="at least 90 % of 0 rules at every write size (inconclusive when a lower figure is "
                          "within the noise of the repetitions)",
                verdict=no_effect_verdict([(v("tcp", s, cfg, 0), v("tcp", s, cfg, top)) for s in r], 90.0)))
        below = [n for n in rules if 0 < n <= 200]
        above = [n for n in rules if n >= 500]
        z = v("engine", 1400, cfg, 0)
        if z and below:
            n200 = max(below)
            p200 = ratio_pct(v("engine", 1400, cfg, n200), z)
            out.findings.append(Finding(
                claim="One-way UDP of 1400 B is not slowed up to 200 rules",
                published=f"{t.value('netfilter, UDP_STREAM 1400 B, up to 200 rules (Fig. 5)', 'value'):.0f} Mbit/s up to 200 rules",
                fwlab=f"fwlab {name}: {fmt(p200, 0)} % of the 0-rule rate at {n200} rules.",
                criterion="at least 90 % of the 0-rule rate (inconclusive when lower but within the noise)",
                verdict=NOT_MEASURED if p200 is None else no_effect_verdict([(z, v("engine", 1400, cfg, n200))], 90.0)))
        if z and below and above:
            n200 = max(below)
            ref = v("engine", 1400, cfg, n200)
            drops = {n: ratio_pct(v("engine", 1400, cfg, n), ref) for n in above}
            drops = {n: x for n, x in drops.items() if x is not None}
            pub = 100.0 * t.value("netfilter, UDP_STREAM, 500 and 1000 rules: below (Fig. 5)", "value") / \
                t.value("netfilter, UDP_STREAM 1400 B, up to 200 rules (Fig. 5)", "value")
            if drops:
                out.findings.append(Finding(
                    claim="One-way UDP collapses at 500 and 1000 rules (every packet walks the rule base)",
                    published=f"below 100 Mbit/s at 500 and 1000 rules, i.e. under {pub:.0f} % of the 200-rule rate",
                    fwlab=f"fwlab {name}, as % of its {n200}-rule rate: "
                          + ", ".join(f"{n:,} rules {x:.0f} %" for n, x in sorted(drops.items())) + ".",
                    criterion=f"under {pub:.0f} % of the {n200}-rule rate at every rule count >= 500",
                    verdict=REPRODUCED if max(drops.values()) < pub else NOT_REPRODUCED))
    if not out.findings:
        out.findings.append(Finding(claim="TCP flat, UDP collapsing with the rule count",
                                    published="Figs. 4 and 5", fwlab="no firewall configuration with 0 and more rules in this run.",
                                    criterion="–", verdict=NOT_MEASURED))
    out.findings.append(Finding(
        claim="Under a UDP flood, netfilter halves TCP throughput but keeps forwarding; 500-1000 rules make it worse",
        published="Fig. 8 (no numbers printed)", fwlab="not measured: needs floods from an attacker namespace (issue 6).",
        criterion="–", verdict=NOT_MEASURED))
    return out
