"""``fwlab optimize FILE``: an equivalent rewrite of a user's rule set, proven on probes, and its gain.

nft syntax: sets, verdict maps and concatenated keys (:mod:`fwlab.rules.optimize`); iptables-save
(with ``--ipset``): address runs -> ipset matches (:mod:`fwlab.rules.optimize_iptables`), written as
``proposal.iptables`` + ``proposal.ipset`` beside the record.

A staged job of the run pipeline (:class:`OptimizeRun`, run by :func:`fwlab.run.start.start`: the
pipeline opens the bed, makes the record, sets its status and cleans up). Owns its set-up and
stages, their trials naming the registered methods of :mod:`fwlab.ruleset.methods`:

1. read the file (nft syntax; a malformed one fails in one line before anything is built), on
   the pipeline's routed bed give the DUT the rule set's interface names
   (:func:`fwlab.ruleset.probe.prepare`) and load the file verbatim; a refusal says the kernel's
   message in one line and leaves nothing behind;
2. propose the rewrite from the kernel's JSON listing (:mod:`fwlab.rules.optimize`), load it
   (the kernel's listing of it becomes ``proposal.nft`` beside the record), or take a hand-made
   rewrite given with ``--proposal``;
3. equivalence: probes = the traffic classes derived from the original and from the proposal
   (:func:`fwlab.rules.derive.derive`, union, the original's first); every probe is evaluated in
   both models (:func:`fwlab.rules.optimize.model_differences`), then sent for real through each
   rule set loaded in turn (``probe_count`` engine packets per probe, observed verdict = did they
   reach the other side): the observed verdicts must be identical, else the suggestion is
   aborted with one line naming the first differing probe;
4. gain: up to ``classes`` probes (the deepest in the original, the middle, the shallowest) at
   the engine's maximum rate through each rule set, alternating A B B A ..., ``repetitions``
   rounds; gain = proposal rate / original rate per class and for the classes' even mix, each
   with its Fieller interval (:func:`fwlab.stats.ratio.ratio_interval`).

Writes a normal record (run.json with ``ruleset_optimize``, trials of kind ``ruleset-class``
with ``condition`` original | proposal); the pipeline tears everything down on every exit path.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from fwlab.dut.imported import ImportedFirewall
from fwlab.errors import BackendError, SuiteError
from fwlab.rules.derive import TrafficClass, derive
from fwlab.rules.imported_model import base_rule_id, evaluate
from fwlab.rules.optimize import Proposal, model_differences, propose, union_probes
from fwlab.rules.optimize_iptables import propose_iptables
from fwlab.run.header import derived_suite
from fwlab.run.stages import JobHead, Stage, StagedRun, Stages, StageTrial
from fwlab.run.start import start
from fwlab.ruleset.kclass import kernel_gain, kernel_text
from fwlab.ruleset.methods import ClassBed
from fwlab.ruleset.mix import median_range, mix_per_round, ratio_dict
from fwlab.ruleset.probe import (DEFAULT_INTERFACES, PROBE_PPS, Bed, Routes, end_probes, observe, parse_interfaces,
                                 preflight, prepare, read_input)
from fwlab.ruleset.run import class_trial_header, kpps_text
from fwlab.runners.engine_binary import engine_version
from fwlab.stats.ratio import RATIO_METHOD
from fwlab.testbed import Testbed

PROBE_COUNT = 10  #: engine packets per probe and rule set [packets]
RATE_COUNT = 100_000  #: frames per rate measurement
MEASURED_CLASSES = 3  #: probes measured for the gain: deepest, middle, shallowest in the original


@dataclass
class OptimizeConfig:
    ruleset: Path
    proposal: Path | None = None  #: a hand-made rewrite to check (and measure) instead of fwlab's
    ipset: Path | None = None  #: with an iptables-save file: its 'ipset save' file (the proposal's too)
    interfaces: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_INTERFACES))
    repetitions: int = 4
    rate_count: int = RATE_COUNT
    probe_count: int = PROBE_COUNT
    classes: int = MEASURED_CLASSES
    measure_rate: bool = True
    seed: int = 1

    def check(self) -> None:
        if self.repetitions < 2:
            raise SuiteError(f"--repetitions {self.repetitions}: the gain needs at least 2 rounds (A B, B A)",
                             fix="e.g. --repetitions 4")
        for name in ("rate_count", "probe_count", "classes"):
            if getattr(self, name) < 1:
                raise SuiteError(f"{name} must be at least 1", fix=f"e.g. {name} = {getattr(OptimizeConfig, name)}")


@dataclass
class OptimizeResult:
    verdict: str  #: equivalent | different | nothing-to-merge
    summary: list[str]  #: the one-screen summary
    record: Path | None = None
    first_difference: str | None = None


def _rule_count(model) -> int:
    """Rules as the user counts them: a verdict map's or concatenated set's elements (model rules
    '<id>/<n>') are one rule."""
    return len({base_rule_id(r.rule_id) for ch in model.chains.values() for r in ch.rules})


def _nft_json(b: Bed) -> str:
    return b.bed.host.run(["nft", "-j", "list", "ruleset"], ns=b.ctx.ns).stdout


def _load_proposal_doc(b: Bed, prop: Proposal) -> str:
    """Load fwlab's proposal (JSON) and return the kernel's nft-syntax listing of it."""
    from fwlab.testbed.host import CommandFailed

    b.bed.host.run(["nft", "flush", "ruleset"], ns=b.ctx.ns, check=False)
    try:
        b.bed.host.run(["nft", "-j", "-f", "-"], ns=b.ctx.ns, input=json.dumps(prop.doc))
    except CommandFailed as exc:
        raise BackendError(f"the kernel refused fwlab's proposed rewrite: {(exc.stderr or exc.message).strip()[:300]}",
                           fix="report this as a bug in fwlab optimize; the original is unaffected") from exc
    text = b.bed.host.run(["nft", "list", "ruleset"], ns=b.ctx.ns).stdout
    b.bed.host.run(["nft", "flush", "ruleset"], ns=b.ctx.ns, check=False)
    return "# fwlab optimize: proposed equivalent rule set (nft's own listing of it)\n" + text


# -- the live equivalence check --------------------------------------------------------------------
def live_differences(b: Bed, engine: str, fws: dict[str, ImportedFirewall], probes: list[TrafficClass],
                     count: int, log=None) -> tuple[list[dict], dict | None]:
    """Every probe through each rule set (loaded in turn): per-probe observations and the first
    probe whose observed verdicts differ (or are inconclusive), None when all are identical."""
    routes = Routes(b, probes)
    seen: dict[str, dict[str, dict]] = {}
    for name, fw in fws.items():
        fw.flush(b.ctx)
        fw.load(b.ctx)
        t0 = time.perf_counter()
        seen[name] = {c.class_id: observe(b, engine, routes, c, count) for c in probes}
        fw.flush(b.ctx)
        if log:
            log(f"  {len(probes)} probes through the {name} in {time.perf_counter() - t0:.1f} s")
    return difference_rows(seen, probes)


def difference_rows(seen: dict[str, dict[str, dict]], probes: list[TrafficClass]) -> tuple[list[dict], dict | None]:
    """Per probe the two rule sets' observations (``seen``: {name: {class_id: observation}}, the
    original's first) side by side, and the first probe whose observed verdicts differ (or are
    inconclusive), None when all are identical."""
    rows, first = [], None
    a, bname = list(seen)
    for c in probes:
        oa, ob = seen[a][c.class_id], seen[bname][c.class_id]
        same = oa["observed"] == ob["observed"] != "inconclusive"
        want = "passed" if c.expected == "accept" else "dropped"
        row = {"class_id": c.class_id, "expected": c.expected, a: oa, bname: ob, "identical": same,
               "as_expected": oa["observed"] == want and ob["observed"] == want}
        rows.append(row)
        if not same and first is None:
            first = row
    return rows, first


def describe_probe(c: TrafficClass) -> str:
    p = c.packet.describe()
    return (f"probe {c.class_id} (IPv{p['ip_version']} {p['proto']} {p['src']}:{p['sport']} -> {p['dst']}:{p['dport']}, "
            f"{p['iif']} -> {p['oif']}; {c.rule_text or c.rule_id})")


# -- the gain --------------------------------------------------------------------------------------
def pick_measured(probes: list[TrafficClass], traversed: dict[str, int], n: int) -> list[TrafficClass]:
    """The deepest probe in the original (most rules compared), the middle one, the shallowest, ...
    up to ``n`` distinct probes, deepest first."""
    order = sorted(probes, key=lambda c: (-traversed[c.class_id], c.class_id))
    if len(order) <= n:
        return order
    idx = [0, len(order) // 2, len(order) - 1] + [round(i * (len(order) - 1) / max(n - 1, 1)) for i in range(n)]
    out = [order[i] for i in dict.fromkeys(idx)][:n]
    return sorted(out, key=lambda c: (-traversed[c.class_id], c.class_id))


def summarize_gain(measured: list[TrafficClass], traversed: dict[str, dict[str, int]],
                   rates: dict[tuple[str, str], list[float | None]]) -> dict:
    """Per class and for the classes' even mix: rates and gain = proposal / original with its interval.
    The mix rate of a round = :func:`fwlab.ruleset.mix.mix_rate` with even weights (each class an
    equal share of packets)."""
    per = []
    for c in measured:
        a = [x for x in rates.get((c.class_id, "original"), []) if x]
        b = [x for x in rates.get((c.class_id, "proposal"), []) if x]
        per.append({"class_id": c.class_id, "rule_id": c.rule_id, "rule_text": c.rule_text, "expected": c.expected,
                    "traversed_original": traversed["original"][c.class_id],
                    "traversed_proposal": traversed["proposal"][c.class_id],
                    "original_rate_pps": median_range(a), "proposal_rate_pps": median_range(b),
                    "gain": ratio_dict(b, a)})
    even = {c.class_id: 1 / len(measured) for c in measured}
    rounds = max((len(rates.get((c.class_id, cond)) or []) for c in measured for cond in ("original", "proposal")),
                 default=0)
    mix = {cond: [x for x in mix_per_round(even, rates, cond, rounds) if x] for cond in ("original", "proposal")}
    return {"classes": per, "mix": {"classes": [c.class_id for c in measured],
                                    "original_rate_pps": median_range(mix["original"]),
                                    "proposal_rate_pps": median_range(mix["proposal"]),
                                    "gain": ratio_dict(mix["proposal"], mix["original"])},
            "method": f"gain = mean proposal rate / mean original rate over the rounds, 95 % interval {RATIO_METHOD}"}


# -- the run -----------------------------------------------------------------------------------------
def _fmt_gain(g: dict) -> str:
    if g.get("ratio") is None:
        return "–"
    iv = f" [{g['low']:.2f}, {g['high']:.2f}]" if g.get("low") is not None else f" (no interval: {g.get('why')})"
    return f"x{g['ratio']:.2f}{iv}"


def run_optimize(cfg: OptimizeConfig, out_root: Path, *, log: TextIO | None = sys.stderr) -> OptimizeResult:
    """``fwlab optimize``: the inputs read and checked, the tools found, before any bed; then the
    staged job (:class:`OptimizeRun`) through the run pipeline's one entry point."""
    job = OptimizeRun.of(cfg)
    start(job, out_root=out_root, log=log)
    return job.result


@dataclass
class OptimizeRun:
    """``fwlab optimize``'s staged job: the set-up loads the original, proposes (or takes) the rewrite,
    loads it, derives the probes from both and compares them in the models; the stages are the
    probes through each rule set on the data path, then (when identical) the in-kernel gain rounds
    and the rate rounds. Conditions: ``original`` and ``proposal`` (each loaded alone)."""

    cfg: OptimizeConfig
    text: str
    ipset_text: str | None
    given: str | None
    fw_a: ImportedFirewall
    names: dict[str, str]
    engine: str
    mode: str = "routed"
    result: OptimizeResult | None = None

    @classmethod
    def of(cls, cfg: OptimizeConfig) -> "OptimizeRun":
        """Read the files and check the tools (a bad input fails in one line before anything is built)."""
        cfg.check()
        text = read_input(cfg.ruleset, "rule set")
        ipset_text = read_input(cfg.ipset, "ipset file") if cfg.ipset else None
        fw_a = ImportedFirewall.from_text(text, cfg.ruleset.name, ipset_text)
        ipt = fw_a.kind == "iptables"
        given = read_input(cfg.proposal, "proposal") if cfg.proposal else None
        if given is not None:
            kind_b = ImportedFirewall.from_text(given, cfg.proposal.name, ipset_text if ipt else None).kind
            if kind_b != fw_a.kind:
                raise SuiteError(f"{cfg.proposal.name} is {kind_b} syntax but {cfg.ruleset.name} is {fw_a.kind}",
                                 fix="give a rewrite in the original's syntax")
        names = parse_interfaces(cfg.interfaces)
        engine = preflight((fw_a.restore_program, fw_a.save_program, "ipset") if ipt else ("nft",))
        return cls(cfg, text, ipset_text, given, fw_a, names, engine)

    @property
    def ipt(self) -> bool:
        return self.fw_a.kind == "iptables"

    def setup(self, bed: Testbed, note) -> JobHead | None:
        cfg, fw_a, ipt, given, ipset_text = self.cfg, self.fw_a, self.ipt, self.given, self.ipset_text
        suffix = "iptables" if ipt else "nft"
        b = prepare(bed, self.names)
        fw_a.load(b.ctx)  # a refusal raises here, one line; the pipeline removes the bed
        ipset_b = None
        try:
            listing_a = b.bed.host.run([fw_a.save_program], ns=b.ctx.ns).stdout if ipt else _nft_json(b)
            model_a = fw_a.readback(b.ctx)
            digest_a = fw_a.digest(b.ctx)
            fw_a.flush(b.ctx)
            if given is not None:
                prop = None
                text_b = given
                source_b = cfg.proposal.name
                ipset_b = ipset_text
            else:
                prop = propose_iptables(listing_a, fw_a.ip_version, ipset_text) if ipt else propose(listing_a)
                if not prop.merges:
                    self.result = OptimizeResult("nothing-to-merge",
                                                 [f"{cfg.ruleset.name}: {prop.summary()}; nothing proposed"])
                    return None
                if ipt:
                    text_b = "# fwlab optimize: proposed equivalent rule set (iptables-save; load proposal.ipset first)\n" \
                        + prop.text
                    ipset_b = (ipset_text or "") + prop.ipset_text
                else:
                    text_b = _load_proposal_doc(b, prop)
                source_b = f"proposal.{suffix}"
            fw_b = ImportedFirewall.from_text(text_b, source_b, ipset_b)
            fw_b.load(b.ctx)
            model_b = fw_b.readback(b.ctx)
            digest_b = fw_b.digest(b.ctx)
            fw_b.flush(b.ctx)
        finally:
            fw_a.flush(b.ctx)
        rules_a, rules_b = _rule_count(model_a), _rule_count(model_b)
        der_a, der_b = derive(model_a, b.addrs, seed=cfg.seed), derive(model_b, b.addrs, seed=cfg.seed)
        probes = union_probes(der_a.classes, der_b.classes)
        head = [f"{cfg.ruleset.name}: {rules_a} rules -> {rules_b} rules"
                + (f" ({len(prop.merges)} run(s) merged into sets)" if prop else f" (hand-made rewrite {source_b})")]
        head += [f"  {m.describe()}" for m in (prop.merges if prop else [])][:6]
        if prop and len(prop.merges) > 6:
            head.append(f"  ... and {len(prop.merges) - 6} more runs")
        for line in head:
            note(line)
        suite = derived_suite(
            f"optimize-{cfg.ruleset.stem}", repetitions=cfg.repetitions, ip_versions=sorted(model_a.families()),
            description=f"fwlab optimize {cfg.ruleset.name}: an equivalent rewrite, its equivalence on "
                        f"derived probes, and its gain")
        suite["parsed"].update(class_trial_header(bed, cfg.rate_count))
        self.fw_b, self.text_b, self.ipset_b, self.prop, self.head = fw_b, text_b, ipset_b, prop, head
        self.models = {"original": model_a, "proposal": model_b}
        self.digests = {"original": digest_a, "proposal": digest_b}
        self.rules, self.ders, self.probes = (rules_a, rules_b), (der_a, der_b), probes
        return JobHead(suite=suite, bed={"backend": "imported", "backend_version": fw_a.version(b.ctx),
                                         "dut_interfaces": b.names}, state=ClassBed(b, self.engine))

    def firewalls(self) -> dict[str, ImportedFirewall]:
        return {"original": self.fw_a, "proposal": self.fw_b}

    def stages(self, run: StagedRun) -> Stages:
        cfg, ipt, prop, probes = self.cfg, self.ipt, self.prop, self.probes
        rec, note, b = run.record, run.note, run.state.b
        der_a, der_b = self.ders
        suffix = "iptables" if ipt else "nft"
        (rec.path / f"proposal.{suffix}").write_text(self.text_b)
        if ipt and self.ipset_b:
            (rec.path / "proposal.ipset").write_text(self.ipset_b)
        opt = {"file": str(cfg.ruleset), "text": self.text, "digest": self.digests["original"], "kind": self.fw_a.kind,
               "ipset_file": str(cfg.ipset) if cfg.ipset else None,
               "proposal_ipset_file": str(rec.path / "proposal.ipset") if ipt and self.ipset_b else None,
               "proposal_file": str(rec.path / f"proposal.{suffix}"),
               "proposal_source": "fwlab" if prop else str(cfg.proposal),
               "proposal_digest": self.digests["proposal"], "rules_before": self.rules[0], "rules_after": self.rules[1],
               "rewrite": prop.to_dict() if prop else None, "interfaces": self.names,
               "derivation": {"original": der_a.to_dict(), "proposal": der_b.to_dict()},
               "probes": [c.to_dict() for c in probes],
               "probe": {"count": cfg.probe_count, "pps": PROBE_PPS},
               "engine_version": engine_version()}
        rec.run["ruleset_optimize"] = opt
        rec.save_run()
        summary = list(self.head) + [f"proposal: {rec.path / f'proposal.{suffix}'}"
                                     + (f" (with {rec.path / 'proposal.ipset'}, loaded first by 'ipset restore')"
                                        if ipt and self.ipset_b else "")]
        nc = der_a.not_covered
        if nc:
            summary.append(f"not covered by probes ({len(nc)} rules, equivalence not proven for them): "
                           + "; ".join(f"{n.rule_id}: {n.reason}" for n in nc[:3]) + (" ..." if len(nc) > 3 else ""))
        diffs = model_differences(self.models["original"], self.models["proposal"], probes)
        if diffs:
            first = diffs[0].one_line()
            opt["equivalence"] = {"verdict": "different", "level": "model", "first_difference": first,
                                  "differences": len(diffs), "probes": len(probes)}
            self.result = OptimizeResult("different", summary + [f"NOT equivalent (model, {len(diffs)} of "
                                                                 f"{len(probes)} probes differ): {first}"],
                                         rec.path, first)
            return
        note(f"  model: {len(probes)} probes ({len(der_a.classes)} from the original, "
             f"{len(probes) - len(der_a.classes)} more from the proposal) identical; now on the data path")
        run.state.routes = Routes(b, probes)
        seen: dict[str, dict[str, dict]] = {}
        for name in self.firewalls():
            t0 = time.perf_counter()
            got = yield Stage(f"probes through the {name}", tuple(
                StageTrial("probe-observe", name, {"class": c, "count": cfg.probe_count}) for c in probes), fresh=True)
            seen[name] = {c.class_id: o for c, o in zip(probes, got)}
            note(f"  {len(probes)} probes through the {name} in {time.perf_counter() - t0:.1f} s")
        rows, first = difference_rows(seen, probes)
        by_id = {c.class_id: c for c in probes}
        opt["live"] = rows
        if first is not None:
            line = (f"{describe_probe(by_id[first['class_id']])}: original {first['original']['observed']} "
                    f"({first['original']['arrived']}/{first['original']['sent']}), proposal "
                    f"{first['proposal']['observed']} ({first['proposal']['arrived']}/{first['proposal']['sent']})")
            opt["equivalence"] = {"verdict": "different", "level": "data path", "first_difference": line,
                                  "differences": sum(not r["identical"] for r in rows), "probes": len(probes)}
            self.result = OptimizeResult("different", summary + [f"NOT equivalent on the data path: {line}"],
                                         rec.path, line)
            return
        unexpected = [r["class_id"] for r in rows if not r["as_expected"]]
        opt["equivalence"] = {"verdict": "equivalent", "level": "model and data path", "probes": len(probes),
                              "not_as_expected": unexpected}
        summary.append(f"equivalent on all {len(probes)} derived probes ({len(der_a.classes)} from the original, "
                       f"{len(probes) - len(der_a.classes)} more from the proposal): model and data path identical")
        if unexpected:
            summary.append(f"  note: {len(unexpected)} probes were treated alike by both but not as the model "
                           f"says (e.g. {unexpected[0]}): a finding about the rule set, see 'fwlab run --ruleset'")
        rec.save_run()
        if cfg.measure_rate and probes:
            gain = yield from self.measure(run)
            opt["gain"] = gain
            summary += gain_lines(cfg, gain)
        else:
            opt["gain"] = None
            opt["rate_missing"] = "not measured (--no-rate)"
        summary.append(f"record: {rec.path}  (fwlab report {rec.path})")
        self.result = OptimizeResult("equivalent", summary, rec.path)

    def measure(self, run: StagedRun) -> Generator[Stage, list, dict]:
        """The gain stages: in-kernel on the accepted probes, then capacity on the measured ones."""
        cfg, probes, note, b = self.cfg, self.probes, run.note, run.state.b
        traversed = {cond: {c.class_id: len(evaluate(self.models[cond], c.packet).traversed) for c in probes}
                     for cond in ("original", "proposal")}
        measured = pick_measured(probes, traversed["original"], cfg.classes)
        end_probes(b)  # the probe-arrival counters off the bed hosts before any rate
        # inside the firewall a drop is never timed: the in-kernel gain is measured on the probes the
        # rule sets accept, the deepest in the original, the middle, the shallowest (e.g. a deny list's
        # allowed traffic, which walks the whole list)
        timed = pick_measured([c for c in probes if c.expected == "accept"], traversed["original"], cfg.classes)
        run.state.routes = Routes(b, list({c.class_id: c for c in measured + timed}.values()))
        kernel = yield from kernel_gain(run, timed, self.fw_a, self.fw_b, self.digests["original"],
                                        self.digests["proposal"], cfg.repetitions)
        kernel["probes"] = [{"class_id": c.class_id, "rule_id": c.rule_id, "rule_text": c.rule_text,
                             "expected": c.expected, "traversed_original": traversed["original"][c.class_id],
                             "traversed_proposal": traversed["proposal"][c.class_id]} for c in timed]
        if not timed:
            kernel["missing"] = "no probe the rule sets accept: a drop is entered and never timed inside the firewall"
        fws = self.firewalls()
        rates: dict[tuple[str, str], list[float | None]] = {}
        for k in range(cfg.repetitions):
            planned = [(cond, c) for cond in (("original", "proposal") if k % 2 == 0 else ("proposal", "original"))
                       for c in measured]
            got = yield Stage(f"rate round {k + 1}", tuple(
                StageTrial("class-rate", cond, {"class": c, "round": k, "count": cfg.rate_count, "identity": {
                    "backend": "imported", "layout": cond,
                    "ruleset": {"digest": self.digests[cond], "family": fws[cond].family}}})
                for cond, c in planned), fresh=True, done_note=f"  rate round {k + 1}/{cfg.repetitions} done")
            for (cond, c), rate in zip(planned, got):
                rates.setdefault((c.class_id, cond), []).append(rate)
        out = summarize_gain(measured, traversed, rates)
        out["kernel"] = kernel
        for g in out["classes"]:
            g["kernel_gain"] = kernel["classes"].get(g["class_id"])
        return out

    def set_condition(self, run: StagedRun, condition: str) -> None:
        fw = self.firewalls()[condition]
        fw.flush(run.state.b.ctx)
        fw.load(run.state.b.ctx)

    def cleanup(self, run: StagedRun) -> None:
        self.fw_a.flush(run.state.b.ctx)


def gain_lines(cfg: OptimizeConfig, gain: dict) -> list[str]:
    """The summary's lines of the gain: in-kernel per probe and for their mix, then capacity."""
    out = []
    rounds = " ".join("AB" if k % 2 == 0 else "BA" for k in range(cfg.repetitions))
    kg = gain["kernel"]
    out.append(f"gain inside the firewall (in-kernel) = original time / proposal time per packet "
               f"({cfg.repetitions} rounds {rounds}, light load, same-packet reference; interval: "
               f"envelope of the rounds' 95 % intervals):")
    for g in kg["probes"]:
        kgain = kg["classes"].get(g["class_id"]) or {}
        out.append(f"  {g['class_id']:>6} {g['expected']:<6} ({g['traversed_original']:>5} -> "
                   f"{g['traversed_proposal']} rules compared): "
                   f"{kernel_text(kg['per_class'].get(g['class_id']))}  {_fmt_gain(kgain)} "
                   f"{kgain.get('verdict', '')}")
    if kg.get("missing"):
        out.append(f"  missing: {kg['missing']}")
    out.append(f"  mix of these classes: {_fmt_gain(kg['mix'])} {kg['mix'].get('verdict', '')}"
               + (f" (left out: {', '.join(kg['mix']['left_out'])})" if kg['mix'].get('left_out') else ""))
    out.append(f"capacity (secondary): gain = proposal rate / original rate ({cfg.rate_count} frames "
               f"per measurement at the engine's maximum, {cfg.repetitions} rounds {rounds}, 95 % "
               f"interval):")
    for g in gain["classes"]:
        out.append(f"  {g['class_id']:>6} {g['expected']:<6} ({g['traversed_original']:>5} -> "
                   f"{g['traversed_proposal']} rules compared): {kpps_text(g['original_rate_pps'])} -> "
                   f"{kpps_text(g['proposal_rate_pps'])} kpps  {_fmt_gain(g['gain'])}")
    mx = gain["mix"]
    out.append(f"  mix of these {len(mx['classes'])} classes: {kpps_text(mx['original_rate_pps'])} -> "
               f"{kpps_text(mx['proposal_rate_pps'])} kpps  {_fmt_gain(mx['gain'])}")
    return out


def config_from_args(ruleset: str, *, proposal: str | None = None, ipset: str | None = None,
                     interfaces: str | None = None,
                     repetitions: int | None = None, classes: int | None = None, rate_count: int | None = None,
                     no_rate: bool = False) -> OptimizeConfig:
    cfg = OptimizeConfig(ruleset=Path(ruleset), proposal=Path(proposal) if proposal else None,
                         ipset=Path(ipset) if ipset else None,
                         interfaces=parse_interfaces(interfaces) if interfaces else dict(DEFAULT_INTERFACES),
                         repetitions=4 if repetitions is None else repetitions,
                         classes=MEASURED_CLASSES if classes is None else classes,
                         rate_count=RATE_COUNT if rate_count is None else rate_count, measure_rate=not no_rate)
    cfg.check()
    return cfg
