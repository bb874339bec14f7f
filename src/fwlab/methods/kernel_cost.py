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
from fwlab.probes.kclock import CostProbe, ProbeResult
from fwlab.probes.reference import ReferenceChain, XtablesReference
from fwlab.rules.generate import generate
from fwlab.runners import engine as eng

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
        return {"rate_pps": self.rate_pps, "duration_s": self.load.duration_s, "frame_size": self.load.frame_size or eng.default_frame_size(self.load.ip_version),
                "ip_version": self.load.ip_version, "intended_count": self.intended_count,
                "offered_count": self.offered_count, "forwarded_count": self.forwarded_count,
                "generator_short": self.generator_short, "tx_pps": self.tx_pps,
                "pilot_ns_per_packet": self.pilot_ns_per_packet, "cost": self.cost.to_dict(),
                "probe": self.probe.to_dict()}


def _trial(bed: "Testbed", load: CostLoad, rate_pps: float, duration_s: float) -> tuple[eng.EngineTrial, int]:
    send, recv = eng.default_cpus(bed, 1)
    t = eng.EngineTrial(duration_s=duration_s, rate_pps=rate_pps,
                        frame_size=load.frame_size or eng.default_frame_size(load.ip_version),
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
