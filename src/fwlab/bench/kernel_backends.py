"""``fwlab bench kernel-cost``: the in-kernel cost per packet of each firewall backend, or why not.

Owns: per backend a fresh bed (legacy iptables leaves hooks behind in a namespace), the backend's
rule set of ``rules`` deny entries (linear; ipset: its one set), and ``repetitions`` light-load
cost trials (fwlab.methods.kernel_cost) with the like reference chain: nft rules for nftables and
iptables-nft (iptables-nft's rules are nf_tables rules), xtables rules for iptables-legacy and
ipset. ``bridge``: the nftables backend in bridge mode (a bridge-family table, which the probe
cannot bracket); ``bridge:<backend>``: that backend in bridge mode with br_netfilter as it asks
(iptables: on, so its ip-family hooks see the bridged packets and are timed). XDP backends:
the kernel's own run time per program (``kernel.bpf_stats_enabled``, turned on only while the
trial runs) on a light engine trial, no reference. Every backend gets a figure or the reason it
has none. Figures depend on the machine and its load; nothing here asserts one.

Not yet a plan through fwlab.run.start: its XDP figure (bpf_stats around an engine trial) is no
registered method, and its table is built from the trials in memory, not read back from a record;
its beds come from fwlab.run.beds.open_bed (a fresh one per backend).
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
from fwlab.probes.kclock import ProgStatsProbe
from fwlab.probes.reference import ReferenceChain, XtablesReference
from fwlab.rules.generate import generate
from fwlab.runners import engine as eng
from fwlab.runners import engine_args as eng_args
from fwlab.run.beds import open_bed
from fwlab.testbed import Testbed, Topology, new_run_id

BACKENDS = ("nftables", "iptables-nft", "iptables-legacy", "ipset", "bridge", "xdp-generic")
XTABLES = ("iptables-legacy", "ipset")


@dataclass(frozen=True)
class KernelBackendsConfig:
    backends: tuple[str, ...] = BACKENDS
    rules: int = 1000
    repetitions: int = 3
    seconds: float = 2.0
    rate_pps: float = 20_000

    def check(self) -> None:
        known = set(BACKENDS) | {"xdp", "nftables-flowtable"}
        bad = [b for b in self.backends if b.removeprefix("bridge:") not in known or b.startswith("bridge:xdp")]
        if bad or not self.backends:
            raise FwlabError(f"--backends: unknown {', '.join(bad) or '(none given)'}",
                             fix=f"use some of {', '.join(sorted(known))}")
        if not 0 <= self.rules <= 100_000 or not 1 <= self.repetitions <= 20 or not 0.5 <= self.seconds <= 30:
            raise FwlabError("--rules must be 0..100000, --repetitions 1..20, --seconds 0.5..30",
                             fix="e.g. --rules 1000 --repetitions 3 --seconds 2")


def _med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def _backend_of(name: str) -> str:
    return "nftables" if name == "bridge" else name.removeprefix("bridge:")


def _netfilter(bed: Testbed, name: str, cfg: KernelBackendsConfig) -> dict:
    name = _backend_of(name)
    backend = get_backend(name)
    layout = "set" if name == "ipset" else "linear"
    ctx = DutContext(bed.host, bed.ns("dut"), bed.topo.mode)
    backend.load(ctx, ruleset_for(bed, cfg.rules, layout))
    ref = XtablesReference(rules=1000) if name in XTABLES else ReferenceChain(rules=1000)
    costs = [measure_cost(bed, CostLoad(rate_pps=cfg.rate_pps, duration_s=cfg.seconds), reference=ref)
             for _ in range(cfg.repetitions)]
    missing = sorted({c.cost.missing for c in costs if c.cost.missing})
    out = {"reference": ref.base_chain().name, "trials": [c.cost.to_dict() | {"rate_pps": c.rate_pps,
                                                                                "generator_short": c.generator_short}
                                                            for c in costs]}
    for c in out["trials"]:
        c.pop("hdr_b64", None)
    if missing:
        return {**out, "missing": "; ".join(missing)}
    ks = [c.cost for c in costs]
    ref_med = _med([k.reference_p50_ns for k in ks])
    ratio = _med([k.packet_ratio_p50 for k in ks])
    return {**out, "p50_ns": _med([k.p50_ns for k in ks]), "floor_p50_ns": _med([k.floor_p50_ns for k in ks]),
            "reference_p50_ns": ref_med, "packet_ratio_p50": ratio,
            "referenced_ns": ratio * ref_med if ratio and ref_med else None,
            "calls_per_packet": _med([k.calls_per_packet for k in ks]), "chains": list(ks[0].chains)}


def _xdp(bed: Testbed, name: str, cfg: KernelBackendsConfig) -> dict:
    backend = get_backend(name)
    ctx = DutContext(bed.host, bed.ns("dut"), bed.topo.mode)
    backend.load(ctx, ruleset_for(bed, cfg.rules))
    runs = []
    for _ in range(cfg.repetitions):
        s, r = eng.default_cpus(bed, 1)
        t = eng_args.EngineTrial(duration_s=cfg.seconds, rate_pps=cfg.rate_pps, send_cpus=s, recv_cpus=r)
        with ProgStatsProbe(bed.host, bed.ns("dut"), max_s=cfg.seconds + 30) as p:
            m = eng.run_trial(bed, t, int(cfg.rate_pps * cfg.seconds)).metrics
        res = p.result()
        runs.append({"offered_count": m.get("offered_count"), "forwarded_count": m.get("forwarded_count"),
                     "generator_short": m.get("generator_short"), **res.to_dict()})
    missing = sorted({r["missing"] for r in runs if r["missing"]})
    if missing:
        return {"trials": runs, "missing": "; ".join(missing)}
    # the program on the client-side interface sees the test packets; the other only replies
    per_run = [max((p for p in r["programs"] if p["runs"]), key=lambda p: p["runs"], default=None) for r in runs]
    if not all(per_run):
        return {"trials": runs, "missing": "no XDP program ran during the trials"}
    return {"trials": runs, "ns_per_run": _med([p["ns_per_run"] for p in per_run]),
            "runs_per_packet": _med([p["runs"] / r["offered_count"] for p, r in zip(per_run, runs) if r["offered_count"]]),
            "program": per_run[0]["name"], "what": "the XDP program's own run time per packet (bpf_stats); "
                                                  "no netfilter bracket, no reference"}


def run_bench(cfg: KernelBackendsConfig, log: TextIO | None = sys.stderr) -> dict:
    cfg.check()
    t0 = time.monotonic()
    out = {}
    for name in cfg.backends:
        mode = "bridge" if name.startswith("bridge") else "routed"
        nf_call = bool(get_backend(_backend_of(name)).bridge_nf_call(mode, generate(0, "linear"))) \
            if mode == "bridge" else False
        try:
            with open_bed(Topology(run_id=new_run_id(), mode=mode, bridge_nf_call=nf_call)) as bed:
                fig = _xdp(bed, name, cfg) if name.startswith("xdp") else _netfilter(bed, name, cfg)
        except FwlabError as exc:
            fig = {"missing": f"{type(exc).__name__}: {exc}"}
        out[name] = fig
        if log:
            log.write(f"{name:>16}: {_line(fig)}\n")
            log.flush()
    return {"config": asdict(cfg), "wall_s": time.monotonic() - t0, "backends": out}


def _line(fig: dict) -> str:
    if fig.get("missing"):
        return f"missing: {fig['missing']}"
    if "ns_per_run" in fig:
        return f"{fig['ns_per_run']:,.0f} ns per packet in the XDP program ({fig['program']}; kernel bpf_stats)"
    ref = f", referenced {fig['referenced_ns']:,.0f} ns (ratio {fig['packet_ratio_p50']:.4f} to {fig['reference']})" \
        if fig.get("referenced_ns") else ""
    return (f"p50 {fig['p50_ns']:,.0f} ns per packet, floor {fig['floor_p50_ns']:,.0f} ns{ref}; "
            f"calls/packet {fig['calls_per_packet']:.2f}; in {', '.join(fig['chains'])}")


def format_table(res: dict) -> str:
    lines = [f"in-kernel cost per packet at {res['config']['rules']:,} rules "
             f"(median of {res['config']['repetitions']} light-load trials)"]
    lines += [f"{name:>16}: {_line(fig)}" for name, fig in res["backends"].items()]
    lines.append(f"wall time {res['wall_s']:.0f} s")
    return "\n".join(lines)
