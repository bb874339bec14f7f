"""Cost figures from one hold of the in-kernel clock: what the firewall costs a packet.

Owns: turning a :class:`~fwlab.probes.kclock.ProbeResult` and the packets a trial sent into the
figures a record keeps (:class:`KernelCost`): per family, the firewall's brackets summed per
packet (the mean over timed packets of each bracket, added; calls per packet = timed / sent),
the median gap of the main bracket with a distribution-free 95 % interval, the floor (the
probe's own gap with nothing inside) and the cost net of it, and, with a reference chain, the
ratio firewall / reference on the same packets, and the reference's own gaps (a histogram).
Missing figures say why. Pure.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from fwlab.probes import histogram as hist
from fwlab.probes.kclock import BracketResult, ProbeResult


@dataclass(frozen=True)
class KernelCost:
    """The firewall's time per packet in one trial, on one netfilter family [ns]."""

    family: str
    missing: str | None = None  #: why there is no figure, else None
    packets_sent: int | None = None  #: test packets the generator sent in the hold
    timed: int = 0  #: packets the firewall's main bracket timed
    entered: int = 0  #: packets that entered it
    unfinished: int = 0  #: entered and never left (dropped or stolen by the firewall: not timed)
    calls_per_packet: float | None = None  #: firewall bracket passes per sent packet (all brackets)
    p50_ns: float | None = None  #: median gap of the main bracket (the first chain bracket)
    p50_low_ns: float | None = None  #: 95 % interval of that median
    p50_high_ns: float | None = None
    mean_ns: float | None = None
    p90_ns: float | None = None
    p99_ns: float | None = None
    per_packet_ns: float | None = None  #: every firewall bracket's mean gap x its passes per packet, added
    floor_p50_ns: float | None = None  #: the probe's own gap (nothing inside), median
    net_p50_ns: float | None = None  #: p50 - floor p50: the firewall's own median time
    reference_p50_ns: float | None = None  #: the reference chain's median gap on the same packets
    ratio_to_reference: float | None = None  #: p50 / reference p50 (ratio of the two medians)
    #: median over packets of (this packet's firewall gap / its reference gap): each packet's two
    #: gaps are microseconds apart on one CPU, so whatever slowed that moment slowed both
    packet_ratio_p50: float | None = None
    packet_ratio_low: float | None = None  #: 95 % interval of that median
    packet_ratio_high: float | None = None
    paired: int = 0  #: packets timed by both the firewall's and the reference's bracket
    hdr_b64: str | None = None  #: the main bracket's gaps, HdrHistogram V2 text (ns)
    #: the reference chain's gaps, HdrHistogram V2 text (ns): its fastest packets over a run give
    #: the reference's uncontended time (``fwlab.stats.kernel_cost.reference_conversion``)
    reference_hdr_b64: str | None = None
    chains: tuple[str, ...] = ()  #: what the main bracket holds

    def to_dict(self) -> dict:
        d = asdict(self)
        d["chains"] = list(self.chains)
        return d


def kernel_cost(res: ProbeResult, family: str = "ipv4", packets_sent: int | None = None) -> KernelCost:
    if res.missing:
        return KernelCost(family, missing=res.missing, packets_sent=packets_sent)
    chains = res.of_role("chains", family)
    if not chains:
        why = f"no base chain of the firewall on the timed {family} hooks"
        if res.unbracketed:  # e.g. a bridge-family table: say which chains, and why not
            why += "; not timed: " + "; ".join(f"{u.chain.name} ({u.reason})" for u in res.unbracketed)
        return KernelCost(family, missing=why, packets_sent=packets_sent)
    main = next((b for b in chains if b.bracket.hook == "forward" and not b.missing), chains[0])
    if main.missing or main.timed == 0:
        return KernelCost(family, missing=main.missing or "no packet passed the firewall's bracket",
                          packets_sent=packets_sent, entered=main.entered, unfinished=main.unfinished,
                          chains=main.bracket.chains)
    ok = [b for b in chains if not b.missing and b.timed]
    calls = sum(b.timed for b in ok) / packets_sent if packets_sent else None
    per_packet = (sum(b.sum_ns for b in ok) / packets_sent) if packets_sent else None
    ci = hist.median_interval(main.counts)
    floor, ref = _usable(res.floor(family)), _usable(res.reference(family))
    p50 = main.p50_ns
    return KernelCost(
        family, packets_sent=packets_sent, timed=main.timed, entered=main.entered, unfinished=main.unfinished,
        calls_per_packet=calls, p50_ns=p50, p50_low_ns=ci[0] if ci else None, p50_high_ns=ci[1] if ci else None,
        mean_ns=main.mean_ns, p90_ns=main.percentile_ns(90), p99_ns=main.percentile_ns(99),
        per_packet_ns=per_packet, floor_p50_ns=floor.p50_ns if floor else None,
        net_p50_ns=(p50 - floor.p50_ns) if floor and p50 is not None else None,
        reference_p50_ns=ref.p50_ns if ref else None,
        ratio_to_reference=(p50 / ref.p50_ns) if ref and p50 is not None and ref.p50_ns else None,
        **_packet_ratio(ref, main),
        hdr_b64=hist.to_hdr(main.counts), reference_hdr_b64=hist.to_hdr(ref.counts) if ref else None,
        chains=main.bracket.chains)


def _packet_ratio(ref: BracketResult | None, main: BracketResult) -> dict:
    if ref is None or ref.bracket.partner != main.bracket.id or not ref.paired:
        return {}
    ci = hist.median_interval(ref.ratio_counts)
    scale = 1 << ref.ratio_shift
    return {"packet_ratio_p50": ref.packet_ratio(50), "paired": ref.paired,
            "packet_ratio_low": ci[0] / scale if ci else None, "packet_ratio_high": ci[1] / scale if ci else None}


def _usable(b: BracketResult | None) -> BracketResult | None:
    return b if b is not None and not b.missing and b.timed else None
