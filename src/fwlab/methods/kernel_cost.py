"""The firewall's cost at a light, fixed load: one engine trial with the in-kernel clock on.

Owns: choosing a rate the bed always holds (at most ``rate_pps``, and at most ``cpu_share`` of one
CPU spent inside the timed brackets, from a short pilot at a low rate with the same brackets:
at 10,000 linear nft rules a packet spends ~70 us in the firewall, so 20 kpps would need more
than a CPU), sending it through the DUT with fwlab-engine while the probe is linked, and the
trial's figures: intended / offered / forwarded counts, whether the generator fell short, and
the cost (:class:`fwlab.probes.cost.KernelCost`) on the trial's IP family. Cost does not need the
DUT saturated; capacity stays with the RFC 2544 and stream methods. Never loads the firewall
(the caller does) and never changes the rate during the trial.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fwlab.errors import FwlabError
from fwlab.probes.brackets import BaseChain
from fwlab.probes.cost import KernelCost, kernel_cost
from fwlab.probes.kclock import CostProbe, ProbeResult, ProgStatsProbe, ProgStatsResult
from fwlab.probes.reference import ReferenceChain, XtablesReference
from fwlab.rules.generate import generate
from fwlab.runners import engine as eng
from fwlab.runners import engine_args as eng_args
from fwlab.runners.base import Measurement, Runner, TrafficSpec, TrialEnv, register

if TYPE_CHECKING:
    from fwlab.testbed.bed import Testbed


@dataclass(frozen=True)
class CostLoad:
    """The light load a cost trial sends."""

    rate_pps: float = 20_000  #: the most the trial sends [packets/s]
    duration_s: float = 3.0  #: sending time [s]
    frame_size: int | None = None  #: Ethernet frame incl. FCS [bytes]; None: the smallest (64 B IPv4, 78 B IPv6)
    ip_version: int = 4
    cpu_share: float = 0.25  #: at most this share of one CPU inside the timed brackets [ratio]
    min_rate_pps: float = 500  #: never slower than this (a figure needs packets) [packets/s]
    pilot_s: float = 0.5  #: the pilot's sending time [s] (0: no pilot, send rate_pps)
    pilot_rate_pps: float = 2_000  #: the pilot's rate [packets/s]

    def check(self) -> None:
        if not (0 < self.min_rate_pps <= self.rate_pps and 0 < self.duration_s <= 600 and 0 < self.cpu_share <= 1
                and self.ip_version in (4, 6) and self.pilot_s >= 0 and self.pilot_rate_pps > 0):
            raise FwlabError(f"cost load out of range: {self}",
                             fix="rate_pps >= min_rate_pps > 0, 0 < duration_s <= 600, 0 < cpu_share <= 1, ip_version 4|6")

    @property
    def family(self) -> str:
        return "ipv4" if self.ip_version == 4 else "ipv6"


def ruleset_for(bed: "Testbed", count: int, layout: str = "linear", ip_version: int = 4):
    """fwlab's generated rule set of ``count`` deny entries for this bed's address plan."""
    plan = bed.topo.plan
    return generate(count, layout, ip_version=ip_version, client_net=plan.client_net(ip_version),
                    server_net=plan.server_net(ip_version))


def light_rate_pps(load: CostLoad, bracket_ns_per_packet: float | None) -> float:
    """The rate that keeps the timed brackets within ``cpu_share`` of one CPU, within
    [min_rate_pps, rate_pps]; ``rate_pps`` when the pilot timed nothing."""
    if not bracket_ns_per_packet or bracket_ns_per_packet <= 0:
        return load.rate_pps
    return float(round(min(load.rate_pps, max(load.min_rate_pps, load.cpu_share * 1e9 / bracket_ns_per_packet))))


@dataclass(frozen=True)
class CostTrial:
    """One cost trial's figures."""

    load: CostLoad
    rate_pps: float  #: the rate sent [packets/s] (chosen from the pilot)
    intended_count: int
    offered_count: int
    forwarded_count: int
    generator_short: bool  #: the generator sent fewer packets than intended: the trial is not at its load
    tx_pps: float | None
    pilot_ns_per_packet: float | None  #: time per packet inside all brackets in the pilot [ns]
    cost: KernelCost
    probe: ProbeResult

    def to_dict(self) -> dict[str, Any]:
        return {"rate_pps": self.rate_pps, "duration_s": self.load.duration_s, "frame_size": self.load.frame_size or eng_args.default_frame_size(self.load.ip_version),
                "ip_version": self.load.ip_version, "intended_count": self.intended_count,
                "offered_count": self.offered_count, "forwarded_count": self.forwarded_count,
                "generator_short": self.generator_short, "tx_pps": self.tx_pps,
                "pilot_ns_per_packet": self.pilot_ns_per_packet, "cost": self.cost.to_dict(),
                "probe": self.probe.to_dict()}


def _trial(bed: "Testbed", load: CostLoad, rate_pps: float, duration_s: float) -> tuple[eng_args.EngineTrial, int]:
    send, recv = eng.default_cpus(bed, 1)
    t = eng_args.EngineTrial(duration_s=duration_s, rate_pps=rate_pps,
                        frame_size=load.frame_size or eng_args.default_frame_size(load.ip_version),
                        ip_version=load.ip_version, send_cpus=send, recv_cpus=recv)
    return t, int(round(rate_pps * duration_s))


def _probe(bed: "Testbed", load: CostLoad, reference: ReferenceChain | XtablesReference | None, extra_chains, hooks, seconds: float):
    return CostProbe.for_dut(bed.host_for("dut"), bed.ns("dut"), families=(load.family,), hooks=hooks,
                             extra_chains=extra_chains, reference=reference, max_s=seconds + 30)


def measure_cost(bed: "Testbed", load: CostLoad = CostLoad(), *, reference: ReferenceChain | XtablesReference | None = None,
                 extra_chains: tuple[BaseChain, ...] = (), hooks: tuple[str, ...] | None = ("forward",)) -> CostTrial:
    """One cost trial on ``bed`` with the firewall already loaded in its DUT namespace."""
    load.check()
    if reference is not None and reference.ip_version != load.ip_version:
        raise FwlabError(f"the reference chain is IPv{reference.ip_version}, the load IPv{load.ip_version}",
                         fix="give the reference chain the load's IP version")
    pilot_ns = None
    if load.pilot_s > 0:
        t, n = _trial(bed, load, load.pilot_rate_pps, load.pilot_s)
        with _probe(bed, load, reference, extra_chains, hooks, load.pilot_s) as p:
            pm = eng.run_trial(bed, t, n).metrics
        pr = p.result()
        sent = pm.get("offered_count") or 0
        timed_ns = sum(b.sum_ns for b in pr.brackets if not b.missing)
        pilot_ns = timed_ns / sent if sent and not pr.missing else None
    rate = light_rate_pps(load, pilot_ns)
    t, n = _trial(bed, load, rate, load.duration_s)
    with _probe(bed, load, reference, extra_chains, hooks, load.duration_s) as p:
        m = eng.run_trial(bed, t, n).metrics
    res = p.result()
    sent = int(m.get("offered_count") or 0)
    return CostTrial(load, rate, n, sent, int(m.get("forwarded_count") or 0), bool(m.get("generator_short")),
                     m.get("tx_pps"), pilot_ns, kernel_cost(res, load.family, sent), res)


@dataclass(frozen=True)
class XdpCostTrial:
    """One light-load trial of an XDP backend timed by the kernel's own program statistics."""

    load: CostLoad
    intended_count: int
    offered_count: int
    forwarded_count: int
    generator_short: bool
    tx_pps: float | None
    stats: ProgStatsResult

    def busiest(self):
        """The program that ran most (on the client-side interface it sees the test packets; the
        others only replies), or None when none ran."""
        return max((p for p in self.stats.programs if p.runs), key=lambda p: p.runs, default=None)

    @property
    def missing(self) -> str | None:
        if self.stats.missing:
            return self.stats.missing
        return None if self.busiest() is not None else "no XDP program ran during the trial"


def measure_xdp_cost(bed: "Testbed", load: CostLoad = CostLoad()) -> XdpCostTrial:
    """One light-load engine trial at ``load.rate_pps`` (no pilot: an XDP program's run is short)
    with the kernel's run-time statistics of the DUT's XDP programs on (``kernel.bpf_stats``, only
    while the trial runs). The XDP program is already attached (the caller loads the backend)."""
    load.check()
    t, n = _trial(bed, load, load.rate_pps, load.duration_s)
    with ProgStatsProbe(bed.host_for("dut"), bed.ns("dut"), max_s=load.duration_s + 30) as p:
        m = eng.run_trial(bed, t, n).metrics
    return XdpCostTrial(load, n, int(m.get("offered_count") or 0), int(m.get("forwarded_count") or 0),
                        bool(m.get("generator_short")), m.get("tx_pps"), p.result())


def xdp_cost_metrics(ct: XdpCostTrial) -> dict[str, Any]:
    """An XDP trial's figures as the record's ``cost`` metrics: the program's mean run time per
    packet (``fw_mean_ns``, ``fw_source`` "bpf_stats"); no per-packet median, histogram or reference."""
    dur, sent, fwd = ct.load.duration_s, ct.offered_count, ct.forwarded_count
    prog = ct.busiest()
    runs_per_packet = prog.runs / sent if prog is not None and sent else None
    return {
        "rate_pps": ct.load.rate_pps, "duration_s": dur,
        "frame_size": ct.load.frame_size or eng_args.default_frame_size(ct.load.ip_version),
        "intended_count": ct.intended_count, "offered_count": sent, "forwarded_count": fwd,
        "generator_short": ct.generator_short, "tx_pps": ct.tx_pps, "rx_pps": fwd / dur if dur else None,
        "loss_ratio": max(0.0, (sent - fwd) / sent) if sent else None, "throughput_bps": None,
        "fw_source": "bpf_stats", "fw_missing": ct.missing, "fw_family": None,
        "fw_chains": [f"xdp program {prog.name}"] if prog is not None else [],
        "fw_timed": prog.runs if prog is not None else None, "fw_calls_per_packet": runs_per_packet,
        "fw_p50_ns": None, "fw_p50_low_ns": None, "fw_p50_high_ns": None, "fw_floor_p50_ns": None,
        "fw_net_p50_ns": None,
        "fw_mean_ns": prog.ns_per_run if prog is not None and not ct.missing else None,
        "fw_per_packet_ns": prog.ns_per_run * runs_per_packet if prog is not None and runs_per_packet and not ct.missing else None,
        "fw_reference": None, "fw_reference_missing": "no same-packet reference for an XDP program",
        "fw_ref_p50_ns": None, "fw_ref_ratio_p50": None, "fw_hdr_b64": None,
        "fw_programs": [p.to_dict() for p in ct.stats.programs],
    }


# --- the suite's cost item: traffic kind "cost", tool "kernel-cost" ---------------------------

#: backends whose rules are nf_tables rules: the nft reference chain is like code
NFT_REFERENCE = ("nftables", "iptables-nft")
#: backends whose rules are legacy xtables rules: the xtables reference chain is like code
XTABLES_REFERENCE = ("iptables-legacy", "ipset")


def reference_for(backend: str | None, ip_version: int, rules: int = 1000) -> ReferenceChain | XtablesReference | None:
    """The same-packet reference in the backend's own code, or None where no like one exists."""
    if backend in NFT_REFERENCE:
        return ReferenceChain(rules=rules, ip_version=ip_version)
    if backend in XTABLES_REFERENCE:
        return XtablesReference(rules=rules, ip_version=ip_version)
    return None


def no_reference_reason(backend: str | None) -> str:
    return (f"no same-packet reference in {backend}'s own code (only nftables, iptables-nft: nft chain; "
            f"iptables-legacy, ipset: xtables chain)")


def cost_metrics(ct: CostTrial, reference: str | None, reference_missing: str | None) -> dict[str, Any]:
    """A cost trial's figures as the record's ``cost`` metrics (``fwlab.results.metrics.CostMetrics``)."""
    c = ct.cost
    dur = ct.load.duration_s
    fwd = ct.forwarded_count
    m: dict[str, Any] = {
        "rate_pps": ct.rate_pps, "duration_s": dur, "frame_size": ct.load.frame_size or eng_args.default_frame_size(ct.load.ip_version),
        "intended_count": ct.intended_count, "offered_count": ct.offered_count, "forwarded_count": fwd,
        "generator_short": ct.generator_short, "tx_pps": ct.tx_pps,
        "rx_pps": fwd / dur if dur else None,
        "loss_ratio": max(0.0, (ct.offered_count - fwd) / ct.offered_count) if ct.offered_count else None,
        "throughput_bps": None,  # a light fixed load: not a capacity figure
        "pilot_ns_per_packet": ct.pilot_ns_per_packet,
        "fw_missing": c.missing, "fw_family": c.family, "fw_chains": list(c.chains),
        "fw_timed": c.timed, "fw_entered": c.entered, "fw_unfinished": c.unfinished,
        "fw_calls_per_packet": c.calls_per_packet,
        "fw_p50_ns": c.p50_ns, "fw_p50_low_ns": c.p50_low_ns, "fw_p50_high_ns": c.p50_high_ns,
        "fw_mean_ns": c.mean_ns, "fw_p90_ns": c.p90_ns, "fw_p99_ns": c.p99_ns,
        "fw_per_packet_ns": c.per_packet_ns,
        "fw_floor_p50_ns": c.floor_p50_ns, "fw_net_p50_ns": c.net_p50_ns,
        "fw_reference": reference, "fw_reference_missing": reference_missing,
        "fw_ref_p50_ns": c.reference_p50_ns, "fw_ref_ratio_p50": c.packet_ratio_p50,
        "fw_ref_ratio_low": c.packet_ratio_low, "fw_ref_ratio_high": c.packet_ratio_high,
        "fw_ref_median_ratio": c.ratio_to_reference, "fw_paired": c.paired,
        "fw_hdr_b64": c.hdr_b64, "fw_hdr_unit": "ns" if c.hdr_b64 else None,
        "fw_ref_hdr_b64": c.reference_hdr_b64,
        "fw_brackets": [{k: v for k, v in b.items() if k != "hdr_b64"} for b in ct.probe.to_dict().get("brackets") or []],
    }
    if reference and not c.missing and c.packet_ratio_p50 is None:
        m["fw_reference_missing"] = "the reference bracket timed no packet of the firewall's bracket"
    return m


class KernelCostRunner(Runner):
    """Traffic kind ``cost``: the firewall's time per packet inside the DUT's kernel at a light
    fixed load (:func:`measure_cost`), with the same-packet reference where a like one exists."""

    name = "kernel-cost"
    traffics = ("cost",)
    summary = "the firewall's own time per packet, timed in the DUT's kernel (BPF netfilter brackets) at a light load"
    frame_sizes = True
    record_kind = "cost"
    #: the light load is an engine trial (``fwlab.runners.engine.run_trial``: shipped to remote
    #: client and server hosts, split over the generator hosts like the RFC 2544 search's), and the
    #: probe runs on the DUT's host: on a remote DUT its BPF object and loader are copied there
    remote_roles = True
    splits_generators = True
    trial_overhead_s = {"cost": 2.0}  #: loader start and stop twice (pilot and trial), reference install (measured 1.5-2.5 s)

    def unavailable(self) -> str | None:
        return None  # the probe says per trial why it cannot attach (missing: reason)

    def version(self) -> str:
        return "fwlab-kclock (BPF_PROG_TYPE_NETFILTER brackets)"

    def check_options(self, kind: str, options: dict[str, Any]) -> dict[str, Any]:
        known = {"rate_pps", "reference", "reference_rules", "duration_s"}
        bad = sorted(set(options) - known)
        if bad:
            raise ValueError(f"tool 'kernel-cost' takes options {', '.join(sorted(known))} (got: {', '.join(bad)})")
        out = dict(options)
        rate = out.get("rate_pps", CostLoad.rate_pps)
        if not isinstance(rate, (int, float)) or isinstance(rate, bool) or not 500 <= rate <= 200_000:
            raise ValueError(f"kernel-cost rate_pps must be 500..200000 packets/s, not {rate!r}")
        ref = out.get("reference", True)
        if not isinstance(ref, bool):
            raise ValueError(f"kernel-cost reference must be true or false, not {ref!r}")
        rr = out.get("reference_rules", 1000)
        if not isinstance(rr, int) or isinstance(rr, bool) or not 10 <= rr <= 10_000:
            raise ValueError(f"kernel-cost reference_rules must be 10..10000, not {rr!r}")
        dur = out.get("duration_s")
        if dur is not None and (not isinstance(dur, (int, float)) or isinstance(dur, bool) or not 0.5 <= dur <= 60):
            raise ValueError(f"kernel-cost duration_s must be 0.5..60 s (null: the suite's duration_s), not {dur!r}")
        return {"rate_pps": float(rate), "reference": ref, "reference_rules": rr,
                "duration_s": None if dur is None else float(dur)}

    def estimate_s(self, traffic: str, duration_s: float, streams: int, options: dict[str, Any]) -> float:
        return (options.get("duration_s") or duration_s) + CostLoad.pilot_s + self.trial_overhead_s["cost"]

    def measure(self, bed: "Testbed", spec: TrafficSpec, env: TrialEnv | None = None) -> Measurement:
        opts = self.check_options(spec.traffic, dict(spec.options))
        backend = env.backend.name if env is not None and env.backend is not None else None
        if backend is not None and backend.startswith("xdp"):
            return self._measure_xdp(bed, spec, opts)
        ref = reference_for(backend, spec.ip_version, opts["reference_rules"]) if opts["reference"] else None
        ref_missing = None if ref is not None else (
            "reference off (option reference = false)" if not opts["reference"] else no_reference_reason(backend))
        load = CostLoad(rate_pps=opts["rate_pps"], duration_s=opts["duration_s"] or spec.duration_s, frame_size=spec.size_bytes,
                        ip_version=spec.ip_version)
        ct = measure_cost(bed, load, reference=ref)
        m = cost_metrics(ct, ref.base_chain().name if ref is not None else None, ref_missing)
        flags = []
        if ct.generator_short:
            flags.append({"code": "generator-short", "severity": "warning",
                          "message": f"the generator sent {ct.offered_count} of {ct.intended_count} packets at "
                                     f"{ct.rate_pps:.0f} packets/s: the cost trial is not at its load"})
        if ct.cost.missing:
            flags.append({"code": "cost-missing", "severity": "warning",
                          "message": f"no in-kernel cost figure: {ct.cost.missing}"})
        return Measurement(metrics=m, raw={"probe": ct.probe.to_dict()}, flags=flags, kind="cost")

    def _measure_xdp(self, bed: "Testbed", spec: TrafficSpec, opts: dict[str, Any]) -> Measurement:
        """An XDP backend: the kernel's run time per program (no netfilter chain to bracket)."""
        load = CostLoad(rate_pps=opts["rate_pps"], duration_s=opts["duration_s"] or spec.duration_s,
                        frame_size=spec.size_bytes, ip_version=spec.ip_version, pilot_s=0)
        ct = measure_xdp_cost(bed, load)
        flags = []
        if ct.generator_short:
            flags.append({"code": "generator-short", "severity": "warning",
                          "message": f"the generator sent {ct.offered_count} of {ct.intended_count} packets: "
                                     f"the cost trial is not at its load"})
        if ct.missing:
            flags.append({"code": "cost-missing", "severity": "warning",
                          "message": f"no in-kernel cost figure: {ct.missing}"})
        return Measurement(metrics=xdp_cost_metrics(ct), raw={"progstats": ct.stats.to_dict()}, flags=flags,
                           kind="cost")


register(KernelCostRunner())
