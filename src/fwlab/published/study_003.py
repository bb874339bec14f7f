"""Seed 003 (IPv4 vs IPv6 in a virtual network, iperf): Tables 1 and 2 beside fwlab's TCP and UDP
figures over IPv4 and IPv6.

Normalisation: IPv6 / IPv4 of the same measurement (absolute rates of a 2013 VirtualBox/GNS3
network do not compare); jitter in ms side by side. A difference counts when Welch's t-test (two-sided, alpha 0.05,
fwlab.stats) calls it significant; 'the same' needs the 95 % interval of IPv6 / IPv4 inside the
tolerance. Delay, which the seed names but prints no figure
for, is fwlab's ping round-trip time (kind ``rtt``, idle) and the ping probe beside the TCP
stream (``rtt_probe``, delay under load), IPv4 against IPv6.

TCP window size (§4: "with a small TCP window size, both protocols' throughput fell"; the study
names no size): TCP items with a fixed window (iperf3 -w, option ``window_bytes``, a label such as
``w8k``) against the default-window TCP of the same configuration and IP version. A window can
only limit a path whose bandwidth-delay product exceeds it: where window / the round trip beside
the default-window stream (its ``rtt_probe``, the longest the path shows) is above that stream's
throughput, the finding is "not testable here". (The idle round trip would understate it: on a
shaped 100 Mbit/s wire an 8 KiB window lost ~10 % here although 8 KiB per idle round trip is
~1 Gbit/s.)
"""

from __future__ import annotations

from fwlab.published.compare import (
    NOT_MEASURED,
    REPRODUCED,
    bound_verdict,
    NOT_TESTABLE,
    SIGNIFICANT,
    Finding,
    SideTable,
    StudyComparison,
    change,
    config_name,
    direction_verdict,
    fmt,
    fmt_ci,
    mean,
    pick,
    ratio_ci,
    register,
    values,
    within_verdict,
)
from fwlab.published.model import Study
from fwlab.results.trial import TrialRecord

REGIME_SHARE = 0.10
"""The seed's 1 Mbit/s UDP tests a path only when it is a fair share of what the path carries: at
least this fraction of the same configuration's TCP throughput (else the offered rate, not the
path, sets the figure and 'the same over IPv4 and IPv6' cannot come out otherwise)."""
UDP_SAME_PCT = 5.0


def _st(trials):
    return [t for t in trials if t.kind == "stream" and t.traffic in ("tcp", "udp")]


def _rtt(trials):
    return [t for t in trials if t.kind == "rtt" and t.traffic == "rtt"]


@register("seed-003")
def compare(study: Study, run: dict, trials: list[TrialRecord]) -> StudyComparison:
    out = StudyComparison(study)
    st = _st(trials)
    t1, t2 = study.table("table1"), study.table("table2")
    out.scaling = [
        "Windows 7 and Ubuntu VMs through three GNS3 routers -> client and server namespaces through the "
        "routed DUT (no firewall, and nftables rule sets as an extra).",
        "iperf 2 TCP -> iperf3 TCP; iperf 2's default UDP load (1 Mbit/s, 1470 B datagrams) -> iperf3 UDP at "
        "1 Mbit/s with 1470 B datagrams (label 1m); plus unlimited UDP.",
        "The seed's KByte/MByte/GBit runs are one test reported in three units: fwlab runs it once.",
        "UDP throughput is iperf3's own received rate (as the seed's iperf reported): 1470 B datagrams "
        "over IPv6 exceed the 1500 B MTU and cross the DUT as two fragments each.",
        "Compared as IPv6 / IPv4 of the same measurement; jitter in ms.",
        "The study's one-way and two-way runs (§1; only one-way figures printed) -> iperf3 TCP up, and "
        "iperf3 --bidir (label bidir) without a firewall.",
    ]
    rtt = _rtt(trials)
    out.scaling.append("Delay (the seed's 'gecikme zamanı', named as a metric, no figure printed) -> ping round-trip "
                       "time through the DUT: idle (kind rtt, an ICMP echo every 10 ms for the trial's length) and "
                       "beside the TCP stream (rtt_probe, delay under load); median, 99th percentile and RFC 3550 "
                       "jitter of the round trips.")
    out.missing = ["Windows 7 as the sender: one kernel here."]
    cfgs = sorted({(t.backend, t.layout, t.rules) for t in st + rtt})

    def used(cfg, traffic, label=None, metric="throughput_bps"):
        be, lay, n = cfg
        return [t for ipv in (4, 6) for t in pick(st, metric, backend=be, layout=lay, rules=n, traffic=traffic,
                                                  ip_version=ipv, label=label)]

    def v(cfg, traffic, ipv, metric="throughput_bps", label=None):
        be, lay, n = cfg
        match = dict(backend=be, layout=lay, rules=n, traffic=traffic, ip_version=ipv, label=label)
        if traffic == "udp" and metric == "throughput_bps":
            # iperf3's own received rate, as the seed's iperf: the link counter counts IP fragments,
            # and a 1470 B datagram over IPv6 (1518 B packet) is two of them
            app = values(st, "app_throughput_bps", **match)
            if app:
                return app
        return values(st, metric, **match)

    def name(cfg):
        be, lay, n = cfg
        return "no firewall" if be == "none" else f"{config_name(be, lay)} {n:,} rules"

    pub_tcp = {u: t1.value(f"IPv6 {u}", "average") / t1.value(f"IPv4 {u}", "average") for u in ("KByte/s", "MByte/s")}
    rows = [("as published", f"TCP, {u} run", fmt(t1.value(f'IPv4 {u}', 'average'), 2) + f" {u}",
             fmt(t1.value(f'IPv6 {u}', 'average'), 2) + f" {u}", fmt(r, 2)) for u, r in pub_tcp.items()]
    pub_udp = t2.value("IPv6 KByte/s", "average throughput") / t2.value("IPv4 KByte/s", "average throughput")
    rows.append(("as published", "UDP 1 Mbit/s, KByte/s run", f"{t2.value('IPv4 KByte/s', 'average throughput'):g} KByte/s",
                 f"{t2.value('IPv6 KByte/s', 'average throughput'):g} KByte/s", fmt(pub_udp, 2)))
    for cfg in cfgs:
        for traffic, label, what in (("tcp", None, "TCP"), ("tcp", "bidir", "TCP both directions at once (sum)"),
                                     ("udp", "1m", "UDP 1 Mbit/s"), ("udp", None, "UDP unlimited")):
            a, b = v(cfg, traffic, 4, label=label), v(cfg, traffic, 6, label=label)
            if a and b:
                rows.append((f"fwlab, {name(cfg)}", what, fmt(mean(a) / 1e6, 2) + " Mbit/s", fmt(mean(b) / 1e6, 2) + " Mbit/s",
                             fmt(mean(b) / mean(a), 3)))
    out.tables.append(SideTable(title=f"{t1.ref} and {t2.ref}: throughput, IPv4 vs IPv6",
                                header=("source", "measurement", "IPv4", "IPv6", "IPv6 / IPv4"), rows=tuple(rows), left=2,
                                note="fwlab: means over repetitions. 'Both directions at once': iperf3 --bidir (label "
                                     "bidir), the study's two-way runs, whose figures it does not print."))
    rows = [("as published", f"{u} run", fmt(t2.value(f'IPv4 {u}', 'average jitter [ms]'), 2),
             fmt(t2.value(f'IPv6 {u}', 'average jitter [ms]'), 2)) for u in ("KByte/s", "MByte/s", "GBit/s")]
    for cfg in cfgs:
        a, b = v(cfg, "udp", 4, "jitter_ms", "1m"), v(cfg, "udp", 6, "jitter_ms", "1m")
        if a and b:
            rows.append((f"fwlab, {name(cfg)}", "UDP 1 Mbit/s", fmt(mean(a), 3), fmt(mean(b), 3)))
    out.tables.append(SideTable(title=f"{t2.ref}: jitter at 1 Mbit/s", header=("source", "run", "IPv4 [ms]", "IPv6 [ms]"),
                                rows=tuple(rows), left=2))

    _delay_table(out, rtt, st, cfgs, name)

    ref = next((c for c in cfgs if c[0] == "none"), cfgs[0] if cfgs else None)
    tcp = change(v(ref, "tcp", 4), v(ref, "tcp", 6)) if ref else None
    if tcp is None or tcp.change_pct is None:
        out.findings.append(Finding(id="seed-003/ipv6-tcp-higher", claim="IPv6 TCP throughput is higher than IPv4 (Tablo 1)",
                                    published=f"IPv6/IPv4 {pub_tcp['KByte/s']:.2f} and {pub_tcp['MByte/s']:.2f}",
                                    fwlab="no TCP over both IP versions in this run.", criterion="–", verdict=NOT_MEASURED))
    else:
        sig = tcp.verdict == SIGNIFICANT
        desc = (f"fwlab ({name(ref)}): IPv6 {tcp.change_pct:+.1f} % against IPv4 "
                f"({'significant' if sig else 'within the noise'}, threshold {fmt(tcp.threshold_pct, 1)} %).")
        verdict, why = direction_verdict(tcp, b_above=True)
        out.findings.append(Finding.judge(
            id="seed-003/ipv6-tcp-higher", used=used(ref, "tcp"), reason=why,
            claim="IPv6 TCP throughput is higher than IPv4 (Tablo 1)",
            published=f"IPv6/IPv4 = {pub_tcp['KByte/s']:.2f} (KByte/s run), {pub_tcp['MByte/s']:.2f} (MByte/s run)",
            fwlab=desc, criterion="IPv6 above IPv4 and the difference significant", verdict=verdict))
        verdict, why = direction_verdict(tcp, b_above=False)
        out.findings.append(Finding.judge(
            id="seed-003/ipv4-better", used=used(ref, "tcp"), reason=why,
            claim="IPv4 performs better than IPv6 because of IPv6's larger overhead (the paper's conclusion)",
            published="stated in §3.2/4 without a figure; contradicts Tablo 1",
            fwlab=desc, criterion="IPv4 above IPv6 and the difference significant", verdict=verdict))
    udp_a, udp_b = (v(ref, "udp", 4, label="1m"), v(ref, "udp", 6, label="1m")) if ref else ([], [])
    udp = change(udp_a, udp_b)
    if udp is not None and udp.change_pct is not None:
        path = mean(v(ref, "tcp", 4)) if ref else None
        offered = udp.mean_a
        iv = ratio_ci(udp_b, udp_a)
        crit = (f"the 95 % interval of IPv6 / IPv4 within ±{UDP_SAME_PCT:g} % (entirely outside -> not reproduced, "
                f"across -> inconclusive), on a path where 1 Mbit/s is at least {100 * REGIME_SHARE:.0f} % of what "
                f"TCP carries")
        if not path:
            verdict, why = NOT_TESTABLE, ("no TCP figure on the same path to tell whether 1 Mbit/s loads it: the bed "
                                          "cannot show that it reaches the seed's regime")
        elif offered < REGIME_SHARE * path:
            verdict, why = NOT_TESTABLE, (f"the bed cannot reach the seed's regime: 1 Mbit/s offered on a path that "
                                          f"carries {path / 1e6:,.0f} Mbit/s of TCP ({100 * offered / path:.2g} % of "
                                          f"it), so the offered rate, not the path, sets both figures")
        else:
            verdict, why = within_verdict(iv, UDP_SAME_PCT)
        out.findings.append(Finding.judge(
            id="seed-003/udp-1m-same", used=used(ref, "udp", "1m"), reason=why,  # TCP only sets the regime
            claim="At iperf's default 1 Mbit/s, UDP throughput is the same over IPv4 and IPv6",
            published=f"117 vs 121 KByte/s (IPv6/IPv4 {pub_udp:.2f})",
            fwlab=f"fwlab ({name(ref)}): IPv6 {udp.change_pct:+.2f} % against IPv4 (IPv6 / IPv4 {fmt_ci(iv, digits=2)}, "
                  f"95 % interval).",
            criterion=crit, verdict=verdict))
    jit = change(v(ref, "udp", 4, "jitter_ms", "1m"), v(ref, "udp", 6, "jitter_ms", "1m")) if ref else None
    pub4 = mean([t2.value(f"IPv4 {u}", "average jitter [ms]") for u in ("KByte/s", "MByte/s", "GBit/s")])
    pub6 = mean([t2.value(f"IPv6 {u}", "average jitter [ms]") for u in ("KByte/s", "MByte/s", "GBit/s")])
    if jit is not None and jit.mean_a is not None:
        sig = jit.verdict == SIGNIFICANT
        verdict, why = direction_verdict(jit, b_above=True)
        out.findings.append(Finding.judge(
            id="seed-003/ipv4-less-jitter", used=used(ref, "udp", "1m", "jitter_ms"), reason=why,
            claim="IPv4 has less jitter than IPv6 (the paper's conclusion)",
            published=f"mean of the three runs {pub4:.2f} ms (IPv4) vs {pub6:.2f} ms (IPv6); IPv6 lower in the KByte/s run",
            fwlab=f"fwlab ({name(ref)}): {jit.mean_a:.3f} ms (IPv4) vs {jit.mean_b:.3f} ms (IPv6), "
                  f"{'significant' if sig else 'within the noise'}.",
            criterion="IPv4 below IPv6 and the difference significant", verdict=verdict))
    out.findings.append(_delay_finding(rtt, ref, name))
    _window_part(out, st, cfgs, ref, name)
    return out


SMALL_WINDOW_PCT = 95.0
"""'Throughput fell': the small window's figure below this % of the default window's (95 % interval)."""


def _window(t: TrialRecord) -> int | None:
    w = (t.options or {}).get("window_bytes")
    return int(w) if w else None


def _window_cap_bps(window_bytes: int, rtt_ms: float | None) -> float | None:
    """What one window per round trip carries [bit/s] (None without a round trip)."""
    return window_bytes * 8 / (rtt_ms / 1e3) if rtt_ms else None


def _window_part(out: StudyComparison, st: list[dict], cfgs, ref, name) -> None:
    """The window-size table (every configuration) and the 'small window lowers TCP' finding
    (the reference configuration, both IP versions)."""
    tcp = [t for t in st if t.traffic == "tcp"]
    windows = sorted({w for t in tcp for w in [_window(t)] if w})
    claim = "A small TCP window lowers the throughput over both IPv4 and IPv6 (§4)"
    published = "§4: with a small TCP window size the throughput of both protocols fell; no size or figure printed"
    crit = (f"over each IP version, the 95 % interval of the smallest window's TCP throughput below "
            f"{SMALL_WINDOW_PCT:g} % of the default window's (entirely above -> not reproduced, across -> "
            f"inconclusive); an IP version where window / the round trip under load exceeds the default-window "
            f"throughput cannot show it (not testable here)")
    if not windows:
        out.findings.append(Finding(id="seed-003/small-window-slower", claim=claim, published=published,
                                    fwlab="not measured: no TCP trial with a fixed window (iperf3 option window_bytes) "
                                          "in this run.", criterion=crit, verdict=NOT_MEASURED))
        return

    def tp(cfg, ipv, w):
        return values(tcp, "throughput_bps", ip_version=ipv, **_cfg_match(cfg),
                      label=(lambda lb: lb is None) if w is None else (lambda lb: True),
                      options=lambda o, w=w: (o or {}).get("window_bytes") == w if w else
                      not (o or {}).get("window_bytes"))

    def load_rtt(cfg, ipv) -> float | None:
        """The median round trip beside the default-window TCP stream (rtt_probe), None without."""
        r = values(tcp, "rtt_p50_ms", ip_version=ipv, **_cfg_match(cfg), label=lambda lb: lb is None,
                   options=lambda o: not (o or {}).get("window_bytes"))
        return mean(r) if r else None

    rows = []
    for cfg in cfgs:
        for ipv in (4, 6):
            base = tp(cfg, ipv, None)
            if not base:
                continue
            r = load_rtt(cfg, ipv)
            rows.append((name(cfg), f"IPv{ipv}", "default", fmt(mean(base) / 1e6, 1), "100", "–"))
            for w in windows:
                x = tp(cfg, ipv, w)
                if x:
                    iv = ratio_ci(x, base)
                    cap = _window_cap_bps(w, r)
                    rows.append((name(cfg), f"IPv{ipv}", f"{w:,} B", fmt(mean(x) / 1e6, 1), fmt_ci(iv, digits=0),
                                 fmt(cap / 1e6, 0) if cap else "–"))
    out.tables.append(SideTable(
        title="§4: TCP throughput by window size (iperf3 -w), IPv4 and IPv6",
        header=("configuration", "IP", "window", "TCP [Mbit/s]", "% of the default window (95 % interval)",
                "window / round trip under load [Mbit/s]"),
        rows=tuple(rows), left=3,
        note="The study names no window size: fwlab's sizes. Means over repetitions; a window limits TCP only where "
             "window / round trip is below what the path carries (the last column, from the ping round trip beside "
             "the default-window stream, rtt_probe; – without one). "
             "iperf3 -w sets both socket buffers; Linux gives twice the size asked for (extra.socket_buffers)."))

    small = windows[0]
    ivs, untestable, cells, used = [], [], [], []
    for ipv in (4, 6):
        base, x = tp(ref, ipv, None) if ref else [], tp(ref, ipv, small) if ref else []
        if not base or not x:
            continue
        cap = _window_cap_bps(small, load_rtt(ref, ipv))
        iv = ratio_ci(x, base)
        used += [t for t in tcp if t.ip_version == ipv and all(getattr(t, k) == v for k, v in _cfg_match(ref).items())
                 and (_window(t) == small or (not _window(t) and t.label is None))
                 and not t.error and t.metric("throughput_bps") is not None]
        cells.append(f"IPv{ipv} {fmt_ci(iv, digits=0)} of the default window"
                     + (f" (window / round trip under load {cap / 1e6:,.0f} Mbit/s)" if cap else ""))
        if cap is not None and cap >= mean(base):
            untestable.append(f"IPv{ipv}: {small:,} B per {load_rtt(ref, ipv):.3f} ms round trip under load carries "
                              f"{cap / 1e6:,.0f} Mbit/s, above the {mean(base) / 1e6:,.0f} Mbit/s the default window "
                              f"gets")
        else:
            ivs.append(iv)
    if not cells:
        out.findings.append(Finding(id="seed-003/small-window-slower", claim=claim, published=published,
                                    fwlab=f"not measured: no default- and {small:,} B-window TCP over one IP version "
                                          f"in {name(ref) if ref else 'this run'}.", criterion=crit,
                                    verdict=NOT_MEASURED))
        return
    if not ivs:
        verdict, why = NOT_TESTABLE, ("the bed cannot reach the seed's regime: the window cannot limit this path ("
                                      + "; ".join(untestable) + "); emulate a longer round trip (link_delay)")
    else:
        verdict, why = bound_verdict(ivs, SMALL_WINDOW_PCT, at_least=False)
        if untestable and verdict == REPRODUCED:
            verdict, why = NOT_TESTABLE, ("decided for one IP version only; " + "; ".join(untestable))
    out.findings.append(Finding.judge(
        id="seed-003/small-window-slower", used=used, effect=True, reason=why, claim=claim, published=published,
        fwlab=f"fwlab ({name(ref)}), TCP with a {small:,} B window: " + ", ".join(cells) + " (95 % intervals).",
        criterion=crit, verdict=verdict))


DELAY_METRICS = (("rtt_p50_ms", "median"), ("rtt_p99_ms", "99th pct."), ("rtt_jitter_ms", "jitter (RFC 3550)"))


def _cfg_match(cfg) -> dict:
    be, lay, n = cfg
    return dict(backend=be, layout=lay, rules=n)


def _delay_table(out: StudyComparison, rtt: list[dict], st: list[dict], cfgs, name) -> None:
    """Round-trip times over IPv4 and IPv6 per configuration: idle (ping) and beside TCP."""
    rows = [("as published", "delay", "named as a metric, no figure printed", "–", "–")]
    for cfg in cfgs:
        for what, sel, extra in (("idle (ping)", rtt, dict(traffic="rtt")),
                                 ("beside the TCP stream", st, dict(traffic="tcp", label=None))):
            for metric, mname in DELAY_METRICS:
                a = values(sel, metric, ip_version=4, **_cfg_match(cfg), **extra)
                b = values(sel, metric, ip_version=6, **_cfg_match(cfg), **extra)
                if a and b:
                    rows.append((f"fwlab, {name(cfg)}", f"{what}, {mname}", fmt(mean(a), 3), fmt(mean(b), 3),
                                 fmt(mean(b) / mean(a), 2) if mean(a) else "–"))
    out.tables.append(SideTable(
        title="Delay: round-trip time, IPv4 vs IPv6", header=("source", "measurement", "IPv4 [ms]", "IPv6 [ms]",
                                                                "IPv6 / IPv4"),
        rows=tuple(rows), left=2,
        note="fwlab: ping through the DUT (ICMP echo every 10 ms); per trial the median, 99th percentile and RFC 3550 "
             "jitter of the round trips, then the mean over repetitions. 'Beside the TCP stream': the same probe while "
             "the TCP trial runs (delay under load)."))


def _delay_finding(rtt: list[dict], ref, name) -> Finding:
    claim = "IPv4 has a shorter delay than IPv6 (the paper's conclusion)"
    published = "§3.2: IPv4's bandwidth and delay (jitter) are better than IPv6's; no delay figure printed"
    crit = "IPv4's median round-trip time below IPv6's and the difference significant"
    cfg = ref
    a = values(rtt, "rtt_p50_ms", ip_version=4, traffic="rtt", **_cfg_match(cfg)) if cfg else []
    b = values(rtt, "rtt_p50_ms", ip_version=6, traffic="rtt", **_cfg_match(cfg)) if cfg else []
    c = change(a, b)
    if c is None or c.change_pct is None:
        return Finding(id="seed-003/ipv4-shorter-delay", claim=claim, published=published,
                       fwlab="not measured: no idle round-trip trials (kind rtt) over both IP versions in this run.",
                       criterion=crit, verdict=NOT_MEASURED)
    sig = c.verdict == SIGNIFICANT
    verdict, why = direction_verdict(c, b_above=True)
    return Finding.judge(
        id="seed-003/ipv4-shorter-delay", reason=why, claim=claim, published=published,
        used=[t for ipv in (4, 6) for t in pick(rtt, "rtt_p50_ms", ip_version=ipv, traffic="rtt", **_cfg_match(cfg))],
        fwlab=f"fwlab ({name(cfg)}), idle median round trip: {c.mean_a:.3f} ms (IPv4) vs {c.mean_b:.3f} ms (IPv6), "
              f"IPv6 {c.change_pct:+.1f} % ({'significant' if sig else 'within the noise'}, threshold "
              f"{fmt(c.threshold_pct, 1)} %).",
        criterion=crit, verdict=verdict)
