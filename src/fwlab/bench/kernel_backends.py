"""``fwlab bench kernel-cost``: the in-kernel cost per packet of each firewall backend, or why not.

Owns: the bench as one suite run through the run pipeline's one entry point
(:func:`fwlab.run.start.start`) and each backend's figure read back from the record. The suite:
per backend its rule set of ``rules`` deny entries (linear; ipset: its one set) and
``repetitions`` light-load cost trials (traffic kind ``cost``, tool ``kernel-cost``:
fwlab.methods.kernel_cost) with the like reference chain: nft rules for nftables and iptables-nft
(iptables-nft's rules are nf_tables rules), xtables rules for iptables-legacy and ipset. The run
pipeline gives every backend its own bed unless the reset after the previous one is proven clean
(legacy iptables leaves hooks behind in a namespace). ``bridge``: the nftables backend in bridge
mode (a bridge-family table, which the probe cannot bracket); ``bridge:<backend>``: that backend
in bridge mode with br_netfilter as it asks (iptables: on, so its ip-family hooks see the bridged
packets and are timed). XDP backends: the kernel-cost tool times the kernel's own run time per
program (``kernel.bpf_stats_enabled``, on only while the trial runs), no reference. Every backend
gets a figure or the reason it has none. Figures depend on the machine and its load; nothing here
asserts one.
"""

from __future__ import annotations

import statistics
import sys
import time
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

from fwlab.bench.suite_text import suite_toml
from fwlab.errors import FwlabError
from fwlab.results.trial import TrialRecord
from fwlab.stats.kernel_cost import CostPoint, conversion_ns
from fwlab.suites import parse_suite

BACKENDS = ("nftables", "iptables-nft", "iptables-legacy", "ipset", "bridge", "xdp-generic")
SET_BACKENDS = ("ipset",)  #: backends whose rule set is one set (layout set), not a list of rules


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
        if len(set(self.backends)) != len(self.backends):
            raise FwlabError("--backends names a backend twice", fix="name each backend once")
        if not 0 <= self.rules <= 100_000 or not 1 <= self.repetitions <= 20 or not 0.5 <= self.seconds <= 30 \
                or not 500 <= self.rate_pps <= 200_000:
            raise FwlabError("--rules must be 0..100000, --repetitions 1..20, --seconds 0.5..30, --rate 500..200000",
                             fix="e.g. --rules 1000 --repetitions 3 --seconds 2")


def backend_of(name: str) -> str:
    """The fwlab backend a bench name runs: ``bridge`` is nftables, ``bridge:X`` is X."""
    return "nftables" if name == "bridge" else name.removeprefix("bridge:")


def mode_of(name: str) -> str:
    return "bridge" if name.startswith("bridge") else "routed"


def bench_name(mode: str, backend: str) -> str:
    """The bench name of a trial's (mode, backend): the inverse of :func:`backend_of` / :func:`mode_of`."""
    if mode != "bridge":
        return backend
    return "bridge" if backend == "nftables" else f"bridge:{backend}"


def suite_data(cfg: KernelBackendsConfig) -> dict:
    """The bench as a suite: per mode the backends that run in it, one cost item per layout kind
    (``only`` keeps each backend to its own layout and mode)."""
    modes = sorted({mode_of(n) for n in cfg.backends}, key=("routed", "bridge").index)
    backends = list(dict.fromkeys(backend_of(n) for n in cfg.backends))
    opts = {"rate_pps": float(cfg.rate_pps), "reference_rules": 1000, "duration_s": float(cfg.seconds)}
    items = []
    for mode in modes:
        mine = [backend_of(n) for n in cfg.backends if mode_of(n) == mode]
        for layout, sel in (("linear", [b for b in mine if b not in SET_BACKENDS]),
                            ("set", [b for b in mine if b in SET_BACKENDS])):
            if sel:
                items.append({"kind": "cost", "tool": "kernel-cost", "label": f"{mode}_{layout}", "options": opts,
                              "only": {"mode": [mode], "backends": sel, "layouts": [layout]}})
    return {
        "name": "bench-kernel-cost",
        "description": f"fwlab bench kernel-cost: each backend's in-kernel cost per packet at {cfg.rules:,} rules",
        "mode": modes, "backends": backends,
        "layouts": sorted({lay for it in items for lay in it["only"]["layouts"]}, key=("linear", "set").index),
        "rules": [cfg.rules], "stateful_shortcut": [False], "ip_versions": [4], "duration_s": cfg.seconds,
        "repetitions": cfg.repetitions, "settle_s": 0.2, "traffic": items,
    }


def _med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def figure(trials: list[TrialRecord]) -> dict:
    """One backend's figure from its cost trials (or why it has none)."""
    if not trials:
        return {"missing": "no cost trial ran (the run planned none for it, or it was left out: see the record)"}
    rows = [{"trial_id": t.trial_id, "error": t.error, **{k: v for k, v in (t.metrics or {}).items()
                                                          if k not in ("fw_hdr_b64", "fw_brackets", "fw_programs")}}
            for t in trials]
    missing = sorted({str(t.error or t.metric("fw_missing")) for t in trials if t.error or t.metric("fw_missing")})
    if missing:
        return {"trials": rows, "missing": "; ".join(missing)}
    if all(t.metric("fw_source") == "bpf_stats" for t in trials):
        return {"trials": rows, "ns_per_run": _med(t.metric("fw_mean_ns") for t in trials),
                "runs_per_packet": _med(t.metric("fw_calls_per_packet") for t in trials),
                "program": (trials[0].metric("fw_chains") or ["?"])[0].removeprefix("xdp program "),
                "what": "the XDP program's own run time per packet (bpf_stats); no netfilter bracket, no reference"}
    ref_med = _med(t.metric("fw_ref_p50_ns") for t in trials)
    ratio = _med(t.metric("fw_ref_ratio_p50") for t in trials)
    conv = conversion_ns(CostPoint.from_metrics(t.layout, t.rules, t.repetition, t.metrics or {}) for t in trials)
    return {"trials": rows, "reference": trials[0].metric("fw_reference"),
            "p50_ns": _med(t.metric("fw_p50_ns") for t in trials),
            "floor_p50_ns": _med(t.metric("fw_floor_p50_ns") for t in trials),
            "reference_p50_ns": ref_med, "packet_ratio_p50": ratio,
            "referenced_ns": ratio * conv if ratio and conv else None,  # the report's conversion
            "calls_per_packet": _med(t.metric("fw_calls_per_packet") for t in trials),
            "chains": list(trials[0].metric("fw_chains") or [])}


def figures(cfg: KernelBackendsConfig, records: list[TrialRecord]) -> dict:
    """Each bench name's figure, in the order given."""
    mine = [r for r in records if r.kind == "cost"]
    return {n: figure([r for r in mine if bench_name(r.mode, r.backend) == n]) for n in cfg.backends}


def run_bench(cfg: KernelBackendsConfig, out_root: Path | str = "results", log: TextIO | None = sys.stderr) -> dict:
    """Run the bench's suite through the run pipeline (root, real traffic) and read it back."""
    from fwlab.run.start import start  # the one entry point of the run pipeline

    cfg.check()
    text = suite_toml(suite_data(cfg))
    suite = parse_suite(tomllib.loads(text), "of fwlab bench kernel-cost")
    t0 = time.monotonic()
    rec = start(suite, text, Path(out_root), quiet=log is None)
    out = figures(cfg, rec.records())
    skipped = {(s["mode"], s["backend"]): s["reason"] for s in (rec.run.get("plan") or {}).get("skipped") or []}
    for n, fig in out.items():
        why = skipped.get((mode_of(n), backend_of(n)))
        if why and "trials" not in fig:
            fig["missing"] = f"not planned: {why}"
    return {"config": asdict(cfg), "record": str(rec.path), "suite_toml": text, "wall_s": time.monotonic() - t0,
            "backends": out}


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
    lines.append(f"wall time {res['wall_s']:.0f} s" + (f"; record {res['record']}" if res.get("record") else ""))
    return "\n".join(lines)
