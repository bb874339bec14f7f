"""``fwlab bench precision --kernel-cost``: how steady the in-kernel cost is, against throughput.

Owns: one routed bed; nftables linear rule sets of ``rules`` sizes (default 0, 1,000, 10,000),
each loaded in turn, repetition by repetition (order reversed every other repetition, so a drift
of the host's speed favours no size); per repetition and size two trials on the same loaded
rule set with the in-kernel clock and the same-packet reference chain (1,000 non-matching nft
rules at priority 20) linked:

- *cost*: a light, fixed load (fwlab.methods.kernel_cost: at most ``rate_pps``, at most a
  quarter of a CPU inside the brackets), giving the firewall's median ns per packet (raw), its
  ratio to the reference's on the same packets (the median over packets of each packet's
  firewall gap / its reference gap), and that ratio in ns at the reference's median over all
  repetitions of the size (referenced; the ratio of the two medians is kept beside it);
- *throughput*: the engine at its top rate for ``seconds``, giving the forwarded rate, and the
  same raw and referenced cost in that saturated trial.

The spread between repetitions of each figure is its sample SD / mean (CV) and (max - min) /
median. Goals (issue 30): referenced cost CV <= 3 % at 1,000 and 10,000 rules, raw <= 10 %,
judged on the light-load cost trials. Figures depend on the machine and its load; nothing here
asserts one.

Not yet a plan through fwlab.run.start (its trials could be a suite of kinds cost and engine in an
order handed to start, as bench search hands its ABBA order): its spreads are computed from the
trials in memory and would first have to be read back from the record with the same output; its
bed comes from fwlab.run.beds.open_bed.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import asdict, dataclass
from typing import TextIO

from fwlab.dut.base import DutContext, get_backend
from fwlab.errors import FwlabError
from fwlab.methods.kernel_cost import CostLoad, measure_cost, ruleset_for
from fwlab.probes.cost import kernel_cost
from fwlab.probes.kclock import CostProbe
from fwlab.probes.reference import ReferenceChain
from fwlab.runners import engine as eng
from fwlab.runners import engine_args as eng_args
from fwlab.stats.summary import summarize
from fwlab.run.beds import open_bed
from fwlab.testbed import Testbed

GOAL_REFERENCED, GOAL_RAW = 0.03, 0.10  #: spread goals [CV] at >= 1,000 rules
GOAL_RULES = (1000, 10000)


@dataclass(frozen=True)
class KernelPrecisionConfig:
    rules: tuple[int, ...] = (0, 1000, 10000)  #: nftables linear rule counts
    repetitions: int = 5
    seconds: float = 3.0  #: each cost trial's and each throughput trial's sending time [s]
    rate_pps: float = 20_000  #: the cost trials' most [packets/s]
    reference_rules: int = 1000

    def check(self) -> None:
        if not self.rules or any(not 0 <= n <= 100_000 for n in self.rules) or len(set(self.rules)) != len(self.rules):
            raise FwlabError(f"--rules must be distinct counts in 0..100000, not {self.rules}", fix="e.g. --rules 0,1000,10000")
        if not 2 <= self.repetitions <= 50 or not 0.5 <= self.seconds <= 30 or self.rate_pps <= 0:
            raise FwlabError("--repetitions must be 2..50, --seconds 0.5..30 and --rate > 0",
                             fix="e.g. --repetitions 5 --seconds 3")


def spread(values: list[float | None]) -> dict:
    """CV (sample SD / mean) and (max - min) / median of the values that exist."""
    vals = [v for v in values if v is not None]
    if len(vals) < 2:
        return {"n": len(vals), "cv": None, "range_over_median": None, "median": vals[0] if vals else None}
    s = summarize(vals)
    med = statistics.median(vals)
    return {"n": len(vals), "cv": s.cv, "range_over_median": (max(vals) - min(vals)) / med if med else None,
            "median": med, "values": vals}


def _throughput_trial(bed: Testbed, cfg: KernelPrecisionConfig, ref: ReferenceChain) -> dict:
    s, r = eng.default_cpus(bed, 1)
    t = eng_args.EngineTrial(duration_s=cfg.seconds, rate_pps=None, send_cpus=s, recv_cpus=r)
    with CostProbe.for_dut(bed.host, bed.ns("dut"), families=("ipv4",), reference=ref, max_s=cfg.seconds + 30) as p:
        m = eng.run_trial(bed, t).metrics
    sent = int(m.get("offered_count") or 0)
    c = kernel_cost(p.result(), "ipv4", sent)
    return {"rx_pps": m.get("rx_pps"), "tx_pps": m.get("tx_pps"), "offered_count": sent,
            "forwarded_count": m.get("forwarded_count"), "cost": c.to_dict()}


def run_bench(cfg: KernelPrecisionConfig, log: TextIO | None = sys.stderr) -> dict:
    cfg.check()
    ref = ReferenceChain(rules=cfg.reference_rules)
    load = CostLoad(rate_pps=cfg.rate_pps, duration_s=cfg.seconds)
    trials: list[dict] = []
    t0 = time.monotonic()
    with open_bed("routed") as bed:
        backend = get_backend("nftables")
        ctx = DutContext(bed.host, bed.ns("dut"), "routed")
        sets = {n: ruleset_for(bed, n) for n in cfg.rules}
        for rep in range(1, cfg.repetitions + 1):
            for n in cfg.rules if rep % 2 else cfg.rules[::-1]:
                backend.load(ctx, sets[n])
                ct = measure_cost(bed, load, reference=ref)
                tp = _throughput_trial(bed, cfg, ref)
                trials.append({"repetition": rep, "rules": n, "cost_trial": ct.to_dict(), "throughput_trial": tp})
                if log:
                    c, tc = ct.cost, tp["cost"]
                    log.write(f"rep {rep} rules {n:>6}: light {ct.rate_pps:>7.0f} pps p50 {_f(c.p50_ns)} ns "
                              f"ref {_f(c.reference_p50_ns)} ratio {_f(c.packet_ratio_p50, 4)}"
                              f"{' SHORT' if ct.generator_short else ''} | top rate {_f(tp['rx_pps'])} pps "
                              f"p50 {_f(tc['p50_ns'])} ratio {_f(tc['packet_ratio_p50'], 4)}\n")
                    log.flush()
    return {"config": asdict(cfg), "wall_s": time.monotonic() - t0, "trials": _strip(trials),
            "summary": summary(trials), "goals": {"referenced_cv": GOAL_REFERENCED, "raw_cv": GOAL_RAW,
                                                  "at_rules": list(GOAL_RULES)}}


def _strip(trials: list[dict]) -> list[dict]:
    """The trials without the per-bracket histogram texts (the cost figures keep theirs)."""
    out = []
    for t in trials:
        ct = dict(t["cost_trial"])
        ct["probe"] = {k: v for k, v in ct["probe"].items() if k != "brackets"} | {
            "brackets": [{k: v for k, v in b.items() if k != "hdr_b64"} for b in ct["probe"]["brackets"]]}
        out.append({**t, "cost_trial": ct})
    return out


def _referenced(costs: list[dict], key: str = "packet_ratio_p50") -> list[float | None]:
    """Each trial's ratio (``key``: the median per-packet ratio, or the ratio of the medians) in
    ns at the reference's median over the trials."""
    refs = [c["reference_p50_ns"] for c in costs if c.get("reference_p50_ns")]
    ref_med = statistics.median(refs) if refs else None
    return [c[key] * ref_med if ref_med and c.get(key) else None for c in costs]


def summary(trials: list[dict]) -> dict:
    out = {}
    for n in dict.fromkeys(t["rules"] for t in trials):
        mine = [t for t in trials if t["rules"] == n]
        light = [t["cost_trial"]["cost"] for t in mine]
        top = [t["throughput_trial"]["cost"] for t in mine]
        row = {
            "light_rate_pps": [t["cost_trial"]["rate_pps"] for t in mine],
            "generator_short": sum(bool(t["cost_trial"]["generator_short"]) for t in mine),
            "cost_raw_p50_ns": spread([c["p50_ns"] for c in light]),
            "cost_net_p50_ns": spread([c["net_p50_ns"] for c in light]),
            "cost_packet_ratio": spread([c["packet_ratio_p50"] for c in light]),
            "cost_ratio_of_medians": spread([c["ratio_to_reference"] for c in light]),
            "cost_referenced_ns": spread(_referenced(light)),
            "cost_referenced_by_medians_ns": spread(_referenced(light, "ratio_to_reference")),
            "floor_p50_ns": spread([c["floor_p50_ns"] for c in light]),
            "reference_p50_ns": spread([c["reference_p50_ns"] for c in light]),
            "calls_per_packet": [c["calls_per_packet"] for c in light],
            "throughput_rx_pps": spread([t["throughput_trial"]["rx_pps"] for t in mine]),
            "top_rate_cost_raw_p50_ns": spread([c["p50_ns"] for c in top]),
            "top_rate_cost_referenced_ns": spread(_referenced(top)),
            "missing": sorted({c["missing"] for c in light + top if c.get("missing")}),
        }
        if n in GOAL_RULES:
            ref_cv, raw_cv = row["cost_referenced_ns"]["cv"], row["cost_raw_p50_ns"]["cv"]
            row["goal_met"] = {"referenced": ref_cv is not None and ref_cv <= GOAL_REFERENCED,
                               "raw": raw_cv is not None and raw_cv <= GOAL_RAW}
        out[str(n)] = row
    return out


def _f(v, digits: int = 0) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.1f} %"


def format_table(res: dict) -> str:
    lines = [f"in-kernel cost vs throughput, spread between {res['config']['repetitions']} repetitions "
             f"(CV = SD / mean; nftables linear; reference {res['config']['reference_rules']} nft rules)",
             f"{'rules':>7} {'light pps':>10} {'raw p50 ns':>11} {'raw CV':>8} {'ratio':>8} {'refd ns':>9} "
             f"{'refd CV':>8} {'floor ns':>9} {'top pps':>9} {'thru CV':>8} {'top raw CV':>10} {'top refd CV':>11}"]
    for n, r in res["summary"].items():
        lines.append(
            f"{int(n):>7,} {_f(statistics.median(r['light_rate_pps'])):>10} {_f(r['cost_raw_p50_ns']['median']):>11} "
            f"{_pct(r['cost_raw_p50_ns']['cv']):>8} {_f(r['cost_packet_ratio']['median'], 4):>8} "
            f"{_f(r['cost_referenced_ns']['median']):>9} {_pct(r['cost_referenced_ns']['cv']):>8} "
            f"{_f(r['floor_p50_ns']['median']):>9} {_f(r['throughput_rx_pps']['median']):>9} "
            f"{_pct(r['throughput_rx_pps']['cv']):>8} {_pct(r['top_rate_cost_raw_p50_ns']['cv']):>10} "
            f"{_pct(r['top_rate_cost_referenced_ns']['cv']):>11}"
            + (f"  goal: referenced {'met' if r['goal_met']['referenced'] else 'NOT met'}, "
               f"raw {'met' if r['goal_met']['raw'] else 'NOT met'}" if "goal_met" in r else "")
            + (f"  missing: {'; '.join(r['missing'])}" if r["missing"] else ""))
    lines.append(f"wall time {res['wall_s']:.0f} s")
    return "\n".join(lines)
