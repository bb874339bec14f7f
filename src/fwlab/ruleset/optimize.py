"""``fwlab optimize FILE``: an equivalent rewrite of a user's rule set, proven on probes, and its gain.

nft syntax: sets, verdict maps and concatenated keys (:mod:`fwlab.rules.optimize`); iptables-save
(with ``--ipset``): address runs -> ipset matches (:mod:`fwlab.rules.optimize_iptables`), written as
``proposal.iptables`` + ``proposal.ipset`` beside the record.

Owns the order of work:

1. read the file (nft syntax; a malformed one fails in one line before anything is built),
   build one routed bed (:func:`fwlab.ruleset.probe.prepare`) and load the file verbatim; a
   refusal says the kernel's message in one line and leaves nothing behind;
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
with ``condition`` original | proposal) and tears everything down on every exit path.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from fwlab.dut.imported import ImportedFirewall
from fwlab.errors import BackendError, SuiteError
from fwlab.results import RunRecord
from fwlab.rules.derive import TrafficClass, derive
from fwlab.rules.imported_model import base_rule_id
from fwlab.rules.optimize import Proposal, model_differences, propose, union_probes
from fwlab.rules.optimize_iptables import propose_iptables
from fwlab.ruleset.mix import median_range, mix_per_round, ratio_dict
from fwlab.run.beds import open_bed
from fwlab.run.header import derived_suite, new_record
from fwlab.ruleset.probe import (DEFAULT_INTERFACES, PROBE_PPS, SETTLE_S, Bed, Routes, end_probes, observed_verdict,
                                 parse_interfaces, preflight, prepare, rate_trial, read_input, send_counted)
from fwlab.ruleset.run import class_trial_header, kpps_text, note_to
from fwlab.runners.engine_binary import engine_version
from fwlab.stats.ratio import RATIO_METHOD

PROBE_COUNT = 10  #: engine packets per probe and rule set [packets]
PROBE_SETTLE_S = 0.05  #: wait after a probe before reading the receiver's counter [s] (retried at SETTLE_S)
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
def observe(b: Bed, engine: str, routes: Routes, c: TrafficClass, count: int) -> dict:
    """Send ``count`` packets of probe ``c``; passed | dropped | inconclusive from the probe's own
    packets counted at the receiving bed host (:func:`fwlab.ruleset.probe.send_counted`; an
    inconclusive share is retried once, with more packets)."""
    routes.ensure(c)
    res: dict = {}
    for n, settle in ((count, PROBE_SETTLE_S), (max(count, 40), SETTLE_S)):
        got = send_counted(b, engine, c, n, settle_s=settle)
        res = {"sent": got.sent, "arrived": got.arrived, "observed": observed_verdict(got.sent, got.arrived),
               "interface_rx_delta": got.interface_rx_delta}
        if res["observed"] != "inconclusive":
            break
    return res


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
    rows, first = [], None
    a, bname = list(fws)
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


def _rate_trial(rec: RunRecord, b: Bed, engine: str, routes: Routes, c: TrafficClass, cond: str, k: int,
                cfg: OptimizeConfig, digest: str, family: str = "nft (verbatim)") -> float | None:
    """:func:`fwlab.ruleset.probe.rate_trial`; the two conditions are told apart by layout: the
    original file or the proposal (both an imported rule set)."""
    return rate_trial(rec, b, engine, c, cond, k, count=cfg.rate_count, route=routes.ensure, backend="imported",
                      layout=cond, ruleset={"digest": digest, "family": family})


# -- the run -----------------------------------------------------------------------------------------
def _fmt_gain(g: dict) -> str:
    if g.get("ratio") is None:
        return "–"
    iv = f" [{g['low']:.2f}, {g['high']:.2f}]" if g.get("low") is not None else f" (no interval: {g.get('why')})"
    return f"x{g['ratio']:.2f}{iv}"


def run_optimize(cfg: OptimizeConfig, out_root: Path, *, log: TextIO | None = sys.stderr) -> OptimizeResult:
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
    suffix = "iptables" if ipt else "nft"
    note = note_to(log)
    with open_bed("routed") as bed:
        desc = bed.describe()
        b = prepare(bed, names)
        fw_a.load(b.ctx)  # a refusal raises here, one line; `with` removes the bed
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
                    return OptimizeResult("nothing-to-merge", [f"{cfg.ruleset.name}: {prop.summary()}; nothing proposed"])
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
        diffs = model_differences(model_a, model_b, probes)
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
        rec = new_record(out_root, suite,
            {"trials": 0, "skipped": []},
            beds=[{**desc, "backend": "imported", "backend_version": fw_a.version(b.ctx), "dut_interfaces": b.names}])
        (rec.path / f"proposal.{suffix}").write_text(text_b)
        if ipt and ipset_b:
            (rec.path / "proposal.ipset").write_text(ipset_b)
        opt = {"file": str(cfg.ruleset), "text": text, "digest": digest_a, "kind": fw_a.kind,
               "ipset_file": str(cfg.ipset) if cfg.ipset else None,
               "proposal_ipset_file": str(rec.path / "proposal.ipset") if ipt and ipset_b else None,
               "proposal_file": str(rec.path / f"proposal.{suffix}"),
               "proposal_source": "fwlab" if prop else str(cfg.proposal),
               "proposal_digest": digest_b, "rules_before": rules_a, "rules_after": rules_b,
               "rewrite": prop.to_dict() if prop else None, "interfaces": names,
               "derivation": {"original": der_a.to_dict(), "proposal": der_b.to_dict()},
               "probes": [c.to_dict() for c in probes],
               "probe": {"count": cfg.probe_count, "pps": PROBE_PPS},
               "engine_version": engine_version()}
        rec.run["ruleset_optimize"] = opt
        rec.save_run()
        summary = list(head) + [f"proposal: {rec.path / f'proposal.{suffix}'}"
                                + (f" (with {rec.path / 'proposal.ipset'}, loaded first by 'ipset restore')"
                                   if ipt and ipset_b else "")]
        try:
            nc = der_a.not_covered
            if nc:
                summary.append(f"not covered by probes ({len(nc)} rules, equivalence not proven for them): "
                               + "; ".join(f"{n.rule_id}: {n.reason}" for n in nc[:3]) + (" ..." if len(nc) > 3 else ""))
            if diffs:
                first = diffs[0].one_line()
                opt["equivalence"] = {"verdict": "different", "level": "model", "first_difference": first,
                                      "differences": len(diffs), "probes": len(probes)}
                rec.set_status("complete")
                return OptimizeResult("different", summary + [f"NOT equivalent (model, {len(diffs)} of {len(probes)} "
                                                              f"probes differ): {first}"], rec.path, first)
            note(f"  model: {len(probes)} probes ({len(der_a.classes)} from the original, "
                 f"{len(probes) - len(der_a.classes)} more from the proposal) identical; now on the data path")
            rows, first = live_differences(b, engine, {"original": fw_a, "proposal": fw_b}, probes,
                                           cfg.probe_count, note)
            by_id = {c.class_id: c for c in probes}
            opt["live"] = rows
            if first is not None:
                line = (f"{describe_probe(by_id[first['class_id']])}: original {first['original']['observed']} "
                        f"({first['original']['arrived']}/{first['original']['sent']}), proposal "
                        f"{first['proposal']['observed']} ({first['proposal']['arrived']}/{first['proposal']['sent']})")
                opt["equivalence"] = {"verdict": "different", "level": "data path", "first_difference": line,
                                      "differences": sum(not r["identical"] for r in rows), "probes": len(probes)}
                rec.set_status("complete")
                return OptimizeResult("different", summary + [f"NOT equivalent on the data path: {line}"], rec.path, line)
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
                gain = _measure(rec, b, engine, cfg, probes, model_a, model_b, fw_a, fw_b, digest_a, digest_b, note)
                opt["gain"] = gain
                rounds = " ".join("AB" if k % 2 == 0 else "BA" for k in range(cfg.repetitions))
                summary.append(f"gain = proposal rate / original rate ({cfg.rate_count} frames per measurement, "
                               f"{cfg.repetitions} rounds {rounds}, 95 % interval):")
                for g in gain["classes"]:
                    summary.append(f"  {g['class_id']:>6} {g['expected']:<6} ({g['traversed_original']:>5} -> "
                                   f"{g['traversed_proposal']} rules compared): {kpps_text(g['original_rate_pps'])} -> "
                                   f"{kpps_text(g['proposal_rate_pps'])} kpps  {_fmt_gain(g['gain'])}")
                mx = gain["mix"]
                summary.append(f"  mix of these {len(mx['classes'])} classes: {kpps_text(mx['original_rate_pps'])} -> "
                               f"{kpps_text(mx['proposal_rate_pps'])} kpps  {_fmt_gain(mx['gain'])}")
            else:
                opt["gain"] = None
                opt["rate_missing"] = "not measured (--no-rate)"
            rec.run["plan"]["trials"] = len(rec.trials())
            rec.set_status("complete")
        except BaseException:
            rec.set_status("incomplete")
            raise
        finally:
            fw_a.flush(b.ctx)
    summary.append(f"record: {rec.path}  (fwlab report {rec.path})")
    return OptimizeResult("equivalent", summary, rec.path)


def _measure(rec, b, engine, cfg, probes, model_a, model_b, fw_a, fw_b, digest_a, digest_b, note) -> dict:
    from fwlab.rules.imported_model import evaluate

    traversed = {"original": {c.class_id: len(evaluate(model_a, c.packet).traversed) for c in probes},
                 "proposal": {c.class_id: len(evaluate(model_b, c.packet).traversed) for c in probes}}
    measured = pick_measured(probes, traversed["original"], cfg.classes)
    end_probes(b)  # the probe-arrival counters off the bed hosts before any rate
    routes = Routes(b, measured)
    fws = {"original": (fw_a, digest_a), "proposal": (fw_b, digest_b)}
    rates: dict[tuple[str, str], list[float | None]] = {}
    for k in range(cfg.repetitions):
        for cond in ("original", "proposal") if k % 2 == 0 else ("proposal", "original"):
            fw, digest = fws[cond]
            fw.flush(b.ctx)
            fw.load(b.ctx)
            for c in measured:
                rates.setdefault((c.class_id, cond), []).append(
                    _rate_trial(rec, b, engine, routes, c, cond, k, cfg, digest, fw.family))
            fw.flush(b.ctx)
        note(f"  rate round {k + 1}/{cfg.repetitions} done")
    return summarize_gain(measured, traversed, rates)


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
