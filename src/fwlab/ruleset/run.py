"""``fwlab run --ruleset FILE``: a user's own rule set, its derived traffic, verdicts and cost per class.

A staged job of the run pipeline (:class:`RulesetRun`, run by :func:`fwlab.run.start.start`: the
pipeline opens the bed, makes the record, sets its status and cleans up). Owns the stages of an
imported-rule-set run, each planned from the ones before, their trials naming the registered
methods of :mod:`fwlab.ruleset.methods`:

1. read the file (nft syntax or iptables-save, optional ipset file) and fail in one line on a
   malformed one, before anything is built;
2. build one routed bed and give the DUT's two interfaces the names the rule set uses
   (``interfaces = {eth0 = "client", eth1 = "server"}``), then load the file verbatim
   (:mod:`fwlab.dut.imported`); a refusal tears the bed down and says the kernel's message;
3. read the rule set back from the kernel and derive one traffic class per reachable terminal
   rule and policy (:mod:`fwlab.rules.derive`);
4. functional check: send each class as ``PROBE_COUNT`` engine packets (udp, or tcp SYN) from
   the side the class enters on; observed verdict = did they arrive at the other side's
   interface (rx counter), and which rule counters moved; compared with the rule set's verdict;
5. in-kernel cost (:mod:`fwlab.ruleset.kclass`): each checked class's own packets at a light fixed
   load with the in-kernel clock around every base chain the rule set registers and a same-packet
   reference, ``repetitions`` rounds: the class's time inside the firewall with its interval (a
   dropped class: missing, a drop is not timed) -- the cost the report, the mix and the summary state
   first; then capacity: each class at the engine's maximum rate (``RATE_COUNT`` fixed-size frames, packet
   backend), with the rule set loaded and with no rule set (the reference), alternating, for
   ``repetitions`` rounds. On veth the DUT's forwarding and firewall run in the sender's softirq,
   so the sender's packet rate is the path's rate (generator + DUT together); the rate-based
   difference 1e9 / rate - 1e9 / reference rate [ns/packet], median of the rounds with their range;
6. latency: after both conditions' rates in a round, each class that passes and is udp (tcp SYN
   test frames carry no timestamp) as ``LATENCY_COUNT`` frames at ``LATENCY_FRACTION`` of the
   lower of its two rates in that round (with and without the rule set), in both conditions: the
   same load, so the difference is the rule set's (RFC 2544 latency, as the engine's other latency
   trials), received by ``fwlab-engine recv --backend packet`` on the far side's bed host: one-way
   latency HDR histograms, merged over the rounds into percentiles, with rules and in the
   reference; the added median latency per round (rules p50 - reference p50, same load) with its
   interval over the rounds;
7. the whole mix (:mod:`fwlab.ruleset.mix`): classes weighted evenly or by the user's profile
   (``--mix FILE``, suite key ``class_weights``); its rate, cost, rate ratio (with its interval)
   and latency (with the rule set and in the reference, each left-out class with its own
   summary's reason) from the same rounds' per-class figures.

Writes a normal record (run.json with ``ruleset_import``, one trial per class x condition x
round, kind ``ruleset-class``); the pipeline tears everything down on every exit path. Its
configuration is :mod:`fwlab.ruleset.config`, a class's traffic :mod:`fwlab.ruleset.probe`, the
per-class figures :mod:`fwlab.ruleset.costs` and the mix's :mod:`fwlab.ruleset.mix`; its bed and
the head of its record come from the run pipeline (:mod:`fwlab.run.staged`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from fwlab.dut.imported import ImportedFirewall
from fwlab.results import RunRecord
from fwlab.rules.derive import BedAddresses, Derivation, TrafficClass, derive
from fwlab.rules.imported_model import DERIVE_L4
from fwlab.run.header import derived_suite
from fwlab.run.stages import JobHead, Stage, StagedRun, Stages, StageTrial
from fwlab.run.start import start
from fwlab.ruleset.config import RulesetRunConfig
from fwlab.ruleset.costs import latency_load, latency_missing, latency_why, summarize_costs
from fwlab.ruleset.established import no_reference, replies, twins
from fwlab.ruleset.interfaces import InterfaceMap, parse_map, propose, unmapped, unmapped_line
from fwlab.ruleset.kclass import attach, copy_of, in_kernel_costs
from fwlab.ruleset.methods import ClassBed
from fwlab.ruleset.mix import mix_latency, resolve, summarize_mix
from fwlab.ruleset.probe import (DROP_MAX, PASS_MIN, PROBE_PPS, Bed, Routes, end_probes, open_flow, preflight,
                                 prepare, random_alternatives, read_input, unsendable)
from fwlab.runners.engine_binary import engine_version
from fwlab.testbed import Testbed, require_root, require_tool


# -- the run -----------------------------------------------------------------------------------
def derive_all(model, b: Bed, seed: int = 1) -> Derivation:
    """Classes for every pair of mapped names (client side x server side) in one derivation: the
    bed's addresses with every name mapped to each side (``client_ifs``/``server_ifs``), and every
    protocol the run can send (udp, tcp, and icmp/icmpv6 echo requests: fwlab-engine ``--proto
    icmp-echo``; a class the engine cannot send is listed as not sent, never dropped silently)."""
    m = InterfaceMap([n for n, l in b.links.items() if l.role == "client"],
                     [n for n, l in b.links.items() if l.role == "server"])
    full = BedAddresses(**{**b.addrs.__dict__, "client_ifs": tuple(m.client), "server_ifs": tuple(m.server)})
    d = derive(model, full, seed=seed, protocols=DERIVE_L4)
    if not model.base:
        d.notes.append("the rule set has no chain on the forward path: nothing it holds decides a forwarded packet")
    return d


@dataclass
class InterfacePlan:
    """The names the bed gives the DUT for one rule set: the map, the names created only so the rule
    set loads, and the lines that say so."""

    names: dict[str, str]  #: {name: role}
    loads_also: list[str]
    lines: list[str]
    unmapped: list[str]


def interface_plan(cfg: RulesetRunConfig, fw: ImportedFirewall) -> InterfacePlan:
    """The user's map, or (none given) the one proposed from the names the rule set uses; the names
    it uses but the map leaves out, and the devices to create so it loads unchanged."""
    lines = []
    m = parse_map(cfg.interfaces)
    if not cfg.interfaces_given:
        prop = propose(fw.text, fw.kind)
        if prop is not None and prop.as_dict() != m.as_dict():
            m = prop
            lines.append(f"interfaces: {m.text()} (proposed from the names the rule set uses; "
                         f"give --interfaces NAME=client|server,... to choose)")
    loose, make = unmapped(fw.text, fw.kind, m)
    line = unmapped_line(fw.text, fw.kind, m)
    if line:
        lines.append(line)
    return InterfacePlan(m.as_dict(), make, lines, loose)


def class_trial_header(bed: Testbed, rate_count: int) -> dict:
    """The record's suite fields a class trial has (``run --ruleset``, ``optimize``): offloads and
    pinning as the bed set them, the traffic, and the trial's length as what it is (a frame count,
    not a duration), so no report field is left empty."""
    t = bed.topo
    off = ", ".join(f"{k} {'on' if v else 'off'}" for k, v in t.offloads.__dict__.items())
    return {"offloads": off,
            "pinning": "fwlab-engine send not pinned (each class's frames from one sender thread)",
            "traffic": [{"kind": "ruleset-class", "tool": "fwlab-engine", "sizes": [64, 78]}],
            "trial_length": f"{rate_count:,} frames back to back per class and condition"}


def covered_by_twins(not_covered: list, est: list[TrafficClass]) -> list:
    """The derivation's not-covered rules less those an established twin ends at (the
    ``ct state established`` rules a flow's first packet cannot reach)."""
    done = {r for c in est for r in c.decided_by}
    return [n for n in not_covered if n.rule_id not in done]


def describe_class(c: TrafficClass) -> str:
    """One class in one line: its packet, where it enters and leaves, and what the rule set does."""
    p = c.packet.describe()
    how = c.terminal if c.terminal in ("reject",) else c.expected
    return (f"{c.class_id}: IPv{p['ip_version']} {p['proto']} {p['src']}:{p['sport']} -> {p['dst']}:{p['dport']} "
            f"({p['iif']} -> {p['oif']}, ct {p['ct_state']}): {how} by {c.rule_id}"
            + (f" [{c.rule_text[:80]}]" if c.rule_text else ""))


def dry_run_ruleset(cfg: RulesetRunConfig, out: TextIO) -> int:
    """``fwlab run --ruleset F --dry-run``: load the rule set in a throw-away bed (the kernel validates
    it, exactly as the run would load it), derive and print the classes and what is not covered, tear
    the bed down. Sends nothing (the engine is not even looked for) and writes no record. Exit 0 with
    classes, 1 without."""
    text = read_input(cfg.ruleset, "rule set")
    ipset_text = read_input(cfg.ipset, "ipset file") if cfg.ipset else None
    fw = ImportedFirewall.from_text(text, str(cfg.ruleset), ipset_text)
    plan = interface_plan(cfg, fw)
    require_root()
    for prog in ("ip", "nft" if fw.kind == "nft" else fw.restore_program, *(("ipset",) if ipset_text else ())):
        require_tool(prog)
    for line in plan.lines:
        out.write(line + "\n")
    job = DryRun(cfg, fw, plan)
    start(job, log=None)  # the bed's set-up is the whole dry run: it records nothing
    b, model, deriv, load_s = job.bed, job.model, job.deriv, job.load_s
    est, _ = twins(model, deriv.classes)
    est += replies(model, deriv.classes + est, b.addrs.dut_own)
    deriv.not_covered = covered_by_twins(deriv.not_covered, est)
    out.write(f"{cfg.ruleset}: {fw.family}, the kernel accepted it in {load_s * 1e3:.1f} ms (a throw-away bed); "
              f"interfaces {', '.join(f'{n}={r}' for n, r in plan.names.items())}\n")
    out.write(f"{len(deriv.classes)} traffic classes" + (f" and {len(est)} established twins" if est else "") + ":\n")
    for c in deriv.classes + est:
        why = unsendable(c)
        out.write(f"  {describe_class(c)}" + (f" — not sent: {why}" if why else "") + "\n")
    out.write(f"{len(deriv.not_covered)} rules not covered:\n")
    for n in deriv.not_covered:
        out.write(f"  {n.rule_id}: {n.reason}" + (f" [{n.rule_text[:80]}]" if n.rule_text else "") + "\n")
    for n in deriv.notes:
        out.write(f"note: {n}\n")
    out.write("dry run: nothing sent, no record written\n")
    return 0 if deriv.classes else 1


@dataclass
class DryRun:
    """``--dry-run``'s staged job: its set-up loads the rule set, reads it back, derives the classes
    and flushes it; nothing is recorded (the pipeline tears the bed down)."""

    cfg: RulesetRunConfig
    fw: ImportedFirewall
    plan: InterfacePlan
    mode: str = "routed"
    bed: Bed | None = None
    model: object = None
    deriv: Derivation | None = None
    load_s: float = 0.0

    def setup(self, bed: Testbed, note) -> None:
        b = self.bed = prepare(bed, self.plan.names, self.plan.loads_also)
        self.load_s = self.fw.load(b.ctx)
        try:
            self.model = self.fw.readback(b.ctx)
            self.deriv = derive_all(self.model, b, seed=self.cfg.seed)
        finally:
            self.fw.flush(b.ctx)
        return None

    def stages(self, run: StagedRun) -> Stages:  # never called: the set-up records nothing
        yield from ()

    def set_condition(self, run: StagedRun, condition: str) -> None:
        raise AssertionError("a dry run has no condition")

    def cleanup(self, run: StagedRun) -> None:
        pass


def run_ruleset(cfg: RulesetRunConfig, out_root: Path, *, log: TextIO | None = sys.stderr) -> RunRecord:
    """``fwlab run --ruleset``: its inputs read and checked, the tools found, before any bed; then
    the staged job (:class:`RulesetRun`) through the run pipeline's one entry point."""
    return start(RulesetRun.of(cfg), out_root=out_root, log=log)


@dataclass
class RulesetRun:
    """``fwlab run --ruleset``'s staged job: the set-up loads the rule set on a routed bed and derives
    its classes; the stages are the probe checks, then for the classes that passed the in-kernel
    cost rounds, then the rate rounds, each followed by its latency round (planned from that round's
    rates). Conditions: ``rules`` (the rule set), ``reference`` (none), ``drop-reference``."""

    cfg: RulesetRunConfig
    text: str
    fw: ImportedFirewall
    plan: InterfacePlan
    engine: str
    mode: str = "routed"

    @classmethod
    def of(cls, cfg: RulesetRunConfig) -> "RulesetRun":
        """Read the files and check the tools (a bad input fails in one line before anything is built)."""
        text = read_input(cfg.ruleset, "rule set")
        ipset_text = read_input(cfg.ipset, "ipset file") if cfg.ipset else None
        fw = ImportedFirewall.from_text(text, str(cfg.ruleset), ipset_text)
        plan = interface_plan(cfg, fw)
        engine = preflight(("nft" if fw.kind == "nft" else fw.restore_program,) + (("ipset",) if ipset_text else ()))
        return cls(cfg, text, fw, plan, engine)

    def setup(self, bed: Testbed, note) -> JobHead:
        cfg, fw, plan = self.cfg, self.fw, self.plan
        names = plan.names
        for line in plan.lines:
            note(line)
        b = prepare(bed, names, plan.loads_also)
        load_s = fw.load(b.ctx)  # a refusal raises here; the pipeline removes the bed
        digest = fw.digest(b.ctx)
        model = fw.readback(b.ctx)
        deriv: Derivation = derive_all(model, b, seed=cfg.seed)
        note(f"{cfg.ruleset.name}: {fw.family}, loaded in {load_s * 1e3:.1f} ms; "
             f"{len(deriv.classes)} traffic classes, {len(deriv.not_covered)} not covered")
        mix = resolve(cfg.class_weights, deriv.classes, f"class weights ({cfg.mix_source or 'the profile'})")
        mix["profile"] = cfg.class_weights
        mix["profile_source"] = cfg.mix_source
        suite = derived_suite(
            f"ruleset-{cfg.ruleset.stem}", repetitions=cfg.repetitions, ip_versions=sorted(model.families()),
            description=f"imported rule set {cfg.ruleset.name}: derived traffic classes, their verdicts "
                        f"and cost per class")
        suite["parsed"].update(class_trial_header(bed, cfg.rate_count))
        imp = {"file": str(cfg.ruleset), "ipset_file": str(cfg.ipset) if cfg.ipset else None,
               "kind": fw.kind, "family": fw.family, "ip_version": fw.ip_version, "digest": digest,
               "load_s": load_s, "text": self.text, "interfaces": names, "derivation": deriv.to_dict(),
               "interface_notes": plan.lines, "interfaces_unmapped": plan.unmapped,
               "interfaces_created": b.idle,
               "probe": {"count": cfg.probe_count, "pps": PROBE_PPS, "pass_min": PASS_MIN, "drop_max": DROP_MAX},
               "rate": {"count": cfg.rate_count, "repetitions": cfg.repetitions, "frame_size": {"4": 64, "6": 78},
                        "method": "fwlab-engine send --backend packet --rate-pps max; rate = offered / elapsed "
                                  "(the sender's softirq carries the DUT's forwarding on veth)"},
               "latency": {"count": cfg.latency_count, "fraction": cfg.latency_fraction,
                           "method": "fwlab-engine send --backend packet at fraction x the lower of the class's two "
                                     "rates (with and without the rule set) in the same round, the same load in both "
                                     "conditions; fwlab-engine recv --backend packet on the far side's bed host; "
                                     "one-way latency (same host clock), HDR histograms merged over rounds"},
               "mix": mix,
               "engine_version": engine_version()}
        if any(m.field == "ct_state" for ch in model.chains.values() for r in ch.rules for m in r.matches):
            imp["cost_note"] = ("the rule set matches ct state, so the DUT tracks connections while it is loaded and "
                                "not in the reference (no rule set): each class's cost includes connection tracking")
        self.model, self.deriv, self.digest, self.imp, self.mix = model, deriv, digest, imp, mix
        return JobHead(suite=suite, bed={"backend": "imported", "backend_version": fw.version(b.ctx),
                                         "dut_interfaces": b.names},
                       state=ClassBed(b, self.engine), run={"ruleset_import": imp}, condition="rules")

    def stages(self, run: StagedRun) -> Stages:
        cfg, fw, model, deriv, digest, imp, mix = self.cfg, self.fw, self.model, self.deriv, self.digest, self.imp, self.mix
        rec, note, state = run.record, run.note, run.state
        b, engine = state.b, state.engine
        est, no_twin = twins(model, deriv.classes)
        est += replies(model, deriv.classes + est, b.addrs.dut_own)  # each established flow's reply direction
        deriv.not_covered = covered_by_twins(deriv.not_covered, est)
        imp["derivation"]["not_covered"] = [n.to_dict() for n in deriv.not_covered]
        imp["established"] = {"classes": [c.to_dict() for c in est], "none": no_twin,
                              "method": "an established twin per udp/tcp class the rule set accepts (when it "
                                        "tracks connections): the same packet on its own source port, its flow "
                                        "opened before every burst (udp: one packet and the reply conntrack "
                                        "expects; tcp: a handshake), so every measured packet is ct state "
                                        "established; and per established class its reply direction (id + 'r': "
                                        "the far side's packets back, as conntrack's reply tuple has them); "
                                        "checked and measured like the other classes, left out of the mix"}
        if est:
            note(f"  {len(est)} established twins ({', '.join(c.class_id for c in est)})")
        every = deriv.classes + est
        imp["not_sent"] = {c.class_id: unsendable(c) for c in every if unsendable(c)}
        every = [c for c in every if c.class_id not in imp["not_sent"]]
        state.routes = Routes(b, every, opener=lambda c: open_flow(b, engine, c))
        alt = random_alternatives(every)
        probes = yield Stage("probe checks", tuple(
            StageTrial("probe-check", "rules", {"class": c, "fw": fw, "count": cfg.probe_count,
                                                "alternatives": alt.get(c.class_id, [])}) for c in every))
        end_probes(b)
        imp["probes"] = probes
        for p in probes:
            note(f"  {p['class_id']}: expected {p['expected']}, observed {p['observed']} "
                 f"({p['arrived']}/{p['sent']}) -> {p['status']}")
        checked = {p["class_id"] for p in probes if p["status"] == "match"}
        imp["not_measured"] = {c.class_id: no_reference(c, b.addrs.dut_own) for c in every
                               if no_reference(c, b.addrs.dut_own)}
        measured = [c for c in every if c.class_id in checked and c.class_id not in imp["not_measured"]]
        imp["left_out"] = {p["class_id"]: f"check {p['status']}: {p['why']}" for p in probes
                           if p["status"] != "match"}
        imp["left_out"].update({i: f"not sent: {why}" for i, why in imp["not_sent"].items()})
        imp["left_out"].update({i: f"not measured: {why}" for i, why in imp["not_measured"].items()
                                if i in checked})
        mix.update(leave_out(mix, imp["left_out"]))
        rec.save_run()
        kernel = yield from in_kernel_costs(run, fw, measured, cfg, digest, imp)
        if not (cfg.measure_rate and measured):
            imp["costs"] = []
            imp["rate_missing"] = ("not measured (--no-rate)" if not cfg.measure_rate else
                                   "no traffic class derived" if not deriv.classes else
                                   "no class passed its functional check")
            return
        rates: dict[tuple[str, str], list[float]] = {}
        lat: dict[tuple[str, str], list[dict]] = {}
        conds = conditions(measured)
        for k in range(cfg.repetitions):
            order = conds if k % 2 == 0 else conds[::-1]
            done = f"  rate round {k + 1}/{cfg.repetitions} done"
            planned = [(cond, c) for cond in order for c in measured_in(measured, cond)]
            got = yield Stage(f"rate round {k + 1}", tuple(
                StageTrial("class-rate", cond, {"class": c, "round": k, "count": cfg.rate_count,
                                                "identity": _identity(cond, digest, fw.family)})
                for cond, c in planned), fresh=True, done_note=None if cfg.latency_count else done)
            for (cond, c), rate in zip(planned, got):
                rates.setdefault((c.class_id, rate_key(cond)), []).append(rate)
            if cfg.latency_count:
                # both conditions at the same load, known once both rates of the round are: the
                # condition still loaded first if it is one of the two, then the other
                timed = [x for x in reversed(order) if x in ("rules", "reference")]
                planned = [(cond, c) for cond in timed for c in measured if latency_missing(c) is None]
                got = yield Stage(f"latency round {k + 1}", tuple(
                    StageTrial("class-latency", cond, {
                        "class": c, "round": k, "count": cfg.latency_count,
                        "identity": _identity(cond, digest, fw.family),
                        "load": latency_load(rates, c.class_id, k, cfg.latency_fraction)})
                    for cond, c in planned), done_note=done)
                for (cond, c), t in zip(planned, got):
                    lat.setdefault((c.class_id, cond), []).append(t)
        imp["costs"] = attach(summarize_costs(measured, rates, lat if cfg.latency_count else None), kernel)
        if not cfg.latency_count:
            imp["latency_missing"] = "not measured (latency_count = 0)"
        w = mix["weights"]
        mix.update(summarize_mix(w, rates, cfg.repetitions))
        if cfg.latency_count:
            per_class = {c["class_id"]: c["latency"] for c in imp["costs"]}
            for cond, key in (("rules", "latency"), ("reference", "reference_latency")):
                hists = {i: [t["hdr"] for t in lat.get((i, cond), []) if t.get("hdr")] for i in w}
                why = {i: latency_why(per_class[i], cond) for i in w if i in per_class}
                mix[key] = mix_latency(w, hists, why, cond)
        note(f"  mix ({mix['source']}, {sum(v > 0 for v in w.values())} classes), rate-based (capacity, "
             f"max-rate sends): {kpps_text(mix['rate_pps'])} kpps, 1e9/rate - 1e9/reference rate "
             f"{_ns(mix['cost_ns_per_packet'])} ns/packet")

    def set_condition(self, run: StagedRun, condition: str) -> None:
        cp = copy_of(run, condition)  # a marked copy of the rule set (the dropped classes' cost trials)
        if cp is not None:
            self.fw.flush(run.state.b.ctx)
            cp.load(run.state.b.ctx)
            return
        _set_condition(run.state.b, self.fw, condition)

    def cleanup(self, run: StagedRun) -> None:
        self.fw.flush(run.state.b.ctx)


#: the drop reference: the least a firewall can do to drop a packet forwarded through the DUT
DROP_REFERENCE = """table inet fwlab_drop_reference {
    chain forward { type filter hook forward priority 0; policy drop; }
}
"""
def conditions(classes: list[TrafficClass]) -> list[str]:
    """The conditions a round measures: with the rule set, the forwarding reference for the classes it
    accepts, the drop reference for those it drops."""
    out = ["rules"]
    if any(c.expected == "accept" for c in classes):
        out.append("reference")
    if any(c.expected != "accept" for c in classes):
        out.append("drop-reference")
    return out


def measured_in(classes: list[TrafficClass], cond: str) -> list[TrafficClass]:
    """The classes measured in ``cond``: every class with the rule set; each class in its own reference."""
    if cond == "rules":
        return classes
    return [c for c in classes if (c.expected == "accept") == (cond == "reference")]


def rate_key(cond: str) -> str:
    """The rates' key of a condition: both references are a class's ``reference`` (its own kind)."""
    return "reference" if cond == "drop-reference" else cond


def leave_out(mix: dict, left_out: dict[str, str]) -> dict:
    """The mix without the classes that failed their check (weights renormalised over the rest);
    ``left_out`` names each with its reason."""
    w = dict(mix.get("weights") or {})
    gone = {i: why for i, why in left_out.items() if i in w}
    for i in gone:
        w[i] = 0.0
    total = sum(w.values())
    return {"weights": {i: v / total for i, v in w.items()} if total > 0 else {i: 0.0 for i in w},
            "left_out": gone, "weight_left_out": sum((mix.get("weights") or {}).get(i, 0.0) for i in gone)}


def check_outcome(run: dict) -> tuple[int, str | None]:
    """The exit status of a ``run --ruleset`` record and why: 1 when no traffic class was derived or
    a class's observed verdict is not the rule set's (a mismatch, or inconclusive), else 0."""
    imp = run.get("ruleset_import") or {}
    der = imp.get("derivation") or {}
    if not der.get("classes"):
        return 1, (f"no traffic class derived from {imp.get('file')}: nothing was checked or measured "
                   f"({len(der.get('not_covered') or [])} rules not covered; see the report's not-covered table)")
    bad = [p for p in imp.get("probes") or [] if p.get("status") != "match"]
    if bad:
        return 1, (f"{len(bad)} of {len(imp.get('probes') or [])} classes failed their functional check and are left "
                   f"out of the costs and the mix: " + "; ".join(f"{p['class_id']} {p['status']} ({p['why']})"
                                                               for p in bad[:4]) + (" ..." if len(bad) > 4 else ""))
    return 0, None


def _set_condition(b: Bed, fw: ImportedFirewall, cond: str) -> None:
    """Load the rule set (``rules``), the drop reference (``drop-reference``), or leave the DUT
    without one (``reference``)."""
    fw.flush(b.ctx)
    if cond == "rules":
        fw.load(b.ctx)
    elif cond == "drop-reference":
        b.ctx.host.run(["nft", "-f", "-"], ns=b.ctx.ns, input=DROP_REFERENCE)


def kpps_text(d: dict) -> str:
    """A {median, ...} rate [packets/s] as kpps text for the progress lines, '–' without one."""
    return "–" if d.get("median") is None else f"{d['median'] / 1e3:,.1f}"


def _ns(d: dict) -> str:
    return "–" if d.get("median") is None else f"{d['median']:,.0f}"


def _identity(cond: str, digest: str, family: str) -> dict:
    """``run --ruleset``'s conditions: the imported rule set, none (the forwarding reference), or the
    drop reference."""
    if cond == "drop-reference":
        return {"backend": "drop-reference", "layout": "drop-reference",
                "ruleset": {"digest": None, "family": "nft (drop reference)"}}
    on = cond == "rules"
    return {"backend": "imported" if on else "none", "layout": "imported" if on else "none",
            "ruleset": {"digest": digest if on else None, "family": family if on else None}}


