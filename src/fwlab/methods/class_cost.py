"""One traffic class's time inside the firewall: its own packets at a light fixed load, timed in the kernel.

Owns: the load of a class cost trial (:class:`ClassLoad`: at most ``rate_pps``, and at most what
keeps the timed brackets within ``cpu_share`` of one CPU, from a short pilot), the same-packet
reference for an imported rule set (the nft chain after the rule set's last forward chain for
nft and iptables-nft rules, the xtables chain for iptables-legacy; none where that would clash),
linking the in-kernel clock (:class:`fwlab.probes.kclock.CostProbe`) around every base chain the
DUT's tables register on every hook of the class's family, sending the class's packets through a
caller's ``send(count, rate_pps)`` while it is linked, and the trial's figures: the kernel-cost
fields of a suite cost trial (:func:`fwlab.methods.kernel_cost.cost_metrics`: main bracket,
floor, reference, HDR text, every bracket) plus the class's own (``fw_class_*``): the brackets on
its path (entered by at least half the packets sent), their medians added with an interval, the
hooks and chains they hold; for a class the rule set drops, the bracket it is dropped in (entered,
never left: the kernel runs no program after a drop, so a drop's own time is not timed) and the
time before it. With ``drop_mark`` (a marked copy of the rule set is loaded:
:mod:`fwlab.dut.marked_copy`), the clock's leave right after each chain drops the packets carrying
that mark, and the trial counts them (``fw_class_dropped_marked``). Never loads the rule set (the
caller does) and never builds a bed.

Not a registered runner (yet): a class's packets are the rule-set run's (:mod:`fwlab.ruleset`),
not a suite traffic item's; ``measure_class`` takes the sender as a function so the run pipeline
can call it once rule-set runs are plans.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from typing import Any, Callable

from fwlab.errors import FwlabError
from fwlab.methods.kernel_cost import CostLoad, CostTrial, cost_metrics, light_rate_pps
from fwlab.probes import histogram as hist
from fwlab.probes.brackets import nft_base_chains
from fwlab.probes.cost import kernel_cost
from fwlab.probes.kclock import BracketResult, CostProbe, ProbeResult
from fwlab.probes.reference import ReferenceChain, XtablesReference
from fwlab.testbed.host import Host

#: (count, rate_pps) -> fwlab-engine send's JSON (``offered_count``, ``tx_pps``, ...)
Send = Callable[[int, float], dict]
ON_PATH = 0.5  #: a bracket is on the class's path when at least this share of the sent packets entered it
REFERENCE_RULES = 1000
REFERENCE_GAP = 10  #: the nft reference's priority: this far after the rule set's last forward chain


@dataclass(frozen=True)
class ClassLoad:
    """The light load a class cost trial sends."""

    rate_pps: float = 20_000  #: the most it sends [packets/s]
    duration_s: float = 1.0  #: sending time [s]
    cpu_share: float = 0.25  #: at most this share of one CPU inside the timed brackets [ratio]
    min_rate_pps: float = 500  #: never slower [packets/s]
    pilot_s: float = 0.3  #: the pilot's sending time [s]
    pilot_rate_pps: float = 2_000  #: the pilot's rate [packets/s]

    def check(self) -> None:
        if not (0 < self.min_rate_pps <= self.rate_pps and 0 < self.duration_s <= 60 and 0 < self.cpu_share <= 1
                and self.pilot_s > 0 and self.pilot_rate_pps > 0):
            raise FwlabError(f"class cost load out of range: {self}",
                             fix="rate_pps >= min_rate_pps > 0, 0 < duration_s <= 60, 0 < cpu_share <= 1")

    def cost_load(self, ip_version: int, frame_size: int, rate_pps: float) -> CostLoad:
        return CostLoad(rate_pps=rate_pps, duration_s=self.duration_s, frame_size=frame_size, ip_version=ip_version,
                        cpu_share=self.cpu_share, min_rate_pps=min(self.min_rate_pps, rate_pps), pilot_s=0)


def reference_for_dut(host: Host, ns: str | None, *, nft_rules: bool, ip_version: int,
                      uses_security_table: bool = False) -> tuple[ReferenceChain | XtablesReference | None, str | None]:
    """The same-packet reference in the rule set's own code, or (None, why not): nft rules (nft,
    iptables-nft) get the nft reference chain ``REFERENCE_GAP`` priorities after the last forward
    chain of the family; legacy xtables rules the xtables chain in the security table (none when
    the rule set uses that table itself)."""
    if not nft_rules:
        if uses_security_table:
            return None, "the rule set uses the security table the xtables reference would take"
        return XtablesReference(rules=REFERENCE_RULES, ip_version=ip_version), None
    fam = "ipv4" if ip_version == 4 else "ipv6"
    cp = host.run(["nft", "-j", "list", "chains"], ns=ns, check=False, timeout_s=60)
    try:
        chains = nft_base_chains(cp.stdout) if cp.returncode == 0 and cp.stdout.strip() else []
    except (json.JSONDecodeError, FwlabError):
        chains = []
    top = max((c.priority for c in chains if c.family == fam and c.hook == "forward"), default=0)
    return ReferenceChain(rules=REFERENCE_RULES, ip_version=ip_version, priority=max(20, top + REFERENCE_GAP)), None


def bonferroni_z(k: int, level: float = 0.95) -> float:
    """The normal quantile that gives each of ``k`` two-sided intervals level 1 - (1 - level)/k, so
    all ``k`` hold together with at least ``level``."""
    return statistics.NormalDist().inv_cdf(1 - (1 - level) / (2 * max(1, k)))


def _part(b: BracketResult, z: float) -> tuple[float, float, float] | None:
    """(median, low, high) of one bracket's gaps [ns]."""
    ci = hist.median_interval(b.counts, confidence_z=z)
    if b.p50_ns is None or ci is None:
        return None
    return b.p50_ns, ci[0], ci[1]


def class_figures(res: ProbeResult, family: str, sent: int) -> dict[str, Any]:
    """The class's own figures from one hold (``fw_class_*``): the rule set's brackets of
    ``family`` that at least ``ON_PATH`` of the ``sent`` packets entered, the time of those that
    timed them (medians added, each interval at 1 - 5 %/k), and the one they were dropped in."""
    out: dict[str, Any] = {"fw_class_ns": None, "fw_class_low_ns": None, "fw_class_high_ns": None,
                           "fw_class_missing": None, "fw_class_brackets": 0, "fw_class_hooks": [],
                           "fw_class_chains": [], "fw_class_dropped_in": None, "fw_class_before_drop_ns": None,
                           "fw_class_path": [], "fw_class_dropped_marked": None}
    if res.missing:
        out["fw_class_missing"] = res.missing
        return out
    if not sent:
        out["fw_class_missing"] = "the generator sent no packet"
        return out
    marks = [b for b in res.brackets if b.bracket.drop_mark and b.bracket.family == family and not b.missing]
    if marks:
        out["fw_class_dropped_marked"] = sum(b.dropped for b in marks)
    mine = [b for b in res.of_role("chains", family) if not b.missing and b.entered >= ON_PATH * sent]
    out["fw_class_path"] = [{"hook": b.bracket.hook, "chains": list(b.bracket.chains), "entered": b.entered,
                             "timed": b.timed, "unfinished": b.unfinished, "p50_ns": b.p50_ns} for b in mine]
    if not mine:
        why = f"no bracket of the rule set on the {family} hooks was entered by the class's packets"
        refused = [b for b in res.of_role("chains", family) if b.missing]
        if refused:
            why += "; refused: " + "; ".join(f"{b.bracket.label} ({b.missing})" for b in refused)
        if res.unbracketed:
            why += "; not timed: " + "; ".join(f"{u.chain.name} ({u.reason})" for u in res.unbracketed)
        out["fw_class_missing"] = why
        return out
    passed = [b for b in mine if b.timed >= ON_PATH * sent]
    dropped = [b for b in mine if b.timed < ON_PATH * sent]
    z = bonferroni_z(len(passed))
    parts = [p for p in (_part(b, z) for b in passed) if p is not None]
    # brackets on one packet's path added: medians, lows and highs each added (>= 95 % together)
    total = tuple(map(sum, zip(*parts))) if parts and len(parts) == len(passed) else None
    out.update({"fw_class_brackets": len(passed), "fw_class_hooks": sorted({b.bracket.hook for b in passed}),
                "fw_class_chains": [c for b in passed for c in b.bracket.chains]})
    if dropped:
        d = dropped[0]
        out["fw_class_dropped_in"] = f"{d.bracket.label} (entered {d.entered}, left {d.timed})"
        out["fw_class_before_drop_ns"] = total[0] if total else 0.0
        out["fw_class_missing"] = (f"dropped inside {d.bracket.label}: its packets entered ({d.entered} of {sent}) and "
                                   f"never left; the kernel runs no program after a drop, so a drop's time is not timed"
                                   + (f" ({total[0]:.0f} ns before it, in {', '.join(out['fw_class_hooks'])})"
                                      if total else ""))
        return out
    if total is None:
        out["fw_class_missing"] = "fewer than 10 packets timed in a bracket: no interval"
        return out
    out.update({"fw_class_ns": total[0], "fw_class_low_ns": total[1], "fw_class_high_ns": total[2]})
    return out


@dataclass(frozen=True)
class ClassCostTrial:
    rate_pps: float
    intended_count: int
    offered_count: int
    tx_pps: float | None
    pilot_ns_per_packet: float | None
    pilot_offered_count: int  #: packets the pilot sent (0: no pilot)
    probe: ProbeResult
    metrics: dict[str, Any]
    send_json: dict


def pilot_rate(host: Host, ns: str | None, family: str, send: Send, load: ClassLoad,
               reference: ReferenceChain | XtablesReference | None,
               drop_mark: int | None = None) -> tuple[float, float | None, int]:
    """(the rate to send at, the pilot's time per packet inside all brackets [ns], packets it sent)
    from a pilot at ``pilot_rate_pps`` with the same brackets."""
    n = max(10, int(round(load.pilot_rate_pps * load.pilot_s)))
    with CostProbe.for_dut(host, ns, families=(family,), hooks=None, reference=reference,
                           max_s=load.pilot_s + 30, drop_mark=drop_mark) as p:
        got = send(n, load.pilot_rate_pps)
    res = p.result()
    sent = int(got.get("offered_count") or 0)
    ns_pp = sum(b.sum_ns for b in res.brackets if not b.missing) / sent if sent and not res.missing else None
    return light_rate_pps(CostLoad(rate_pps=load.rate_pps, cpu_share=load.cpu_share,
                                   min_rate_pps=load.min_rate_pps), ns_pp), ns_pp, sent


def measure_class(host: Host, ns: str | None, *, ip_version: int, frame_size: int, send: Send,
                  load: ClassLoad = ClassLoad(), rate_pps: float | None = None,
                  reference: ReferenceChain | XtablesReference | None = None,
                  reference_missing: str | None = None, drop_mark: int | None = None) -> ClassCostTrial:
    """One class cost trial with the rule set already loaded in namespace ``ns``: a pilot (unless
    ``rate_pps`` is given: a later round keeps the first round's rate), then ``duration_s`` of the
    class's packets with the clock linked on every hook of its family (with ``drop_mark``: the
    marked copy's marked packets dropped right after the chain that marked them)."""
    load.check()
    family = "ipv4" if ip_version == 4 else "ipv6"
    pilot_ns, pilot_sent = None, 0
    if rate_pps is None:
        rate_pps, pilot_ns, pilot_sent = pilot_rate(host, ns, family, send, load, reference, drop_mark)
    n = int(round(rate_pps * load.duration_s))
    with CostProbe.for_dut(host, ns, families=(family,), hooks=None, reference=reference,
                           max_s=load.duration_s + 30, drop_mark=drop_mark) as p:
        got = send(n, rate_pps)
    res = p.result()
    sent = int(got.get("offered_count") or 0)
    ct = CostTrial(load.cost_load(ip_version, frame_size, rate_pps), rate_pps, n, sent, 0,
                   bool(got.get("generator_short")) or sent < n, got.get("tx_pps"), pilot_ns,
                   kernel_cost(res, family, sent), res)
    m = cost_metrics(ct, reference.base_chain().name if reference is not None else None, reference_missing)
    m.update({"forwarded_count": None, "rx_pps": None, "loss_ratio": None})  # the sender only: nothing counted there
    m.update(class_figures(res, family, sent))
    m["pilot_offered_count"] = pilot_sent
    return ClassCostTrial(rate_pps, n, sent, got.get("tx_pps"), pilot_ns, pilot_sent, res, m, got)
