"""Each class's time inside the firewall, for ``fwlab run --ruleset`` and ``fwlab optimize``.

Owns the stages of the class cost trials (:func:`fwlab.methods.class_cost.measure_class`) of a
rule-set run: ``rounds`` stages over the classes (order reversed every other round; the first
round's pilot picks each class's rate, later rounds keep it), each naming the ``class-cost``
method (:mod:`fwlab.ruleset.methods`: the same-packet reference for the imported rule set, each
class routed, and an established twin's flow opened, first); one cost trial: the class's rule
counter read around it, one record line (kind ``ruleset-class``, traffic
``ruleset-class-cost``, the figures of a suite cost trial plus the class's own ``fw_class_*``),
and the per-class summary (:func:`fwlab.stats.class_cost.summarize_class`: referenced to the
reference's median over the run). The rule set stays loaded throughout; with no rule set there
is nothing to time, so a class's in-kernel cost needs no no-rule-set reference.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from fwlab.dut.imported import ImportedFirewall
from fwlab.errors import FwlabError
from fwlab.methods.class_cost import ClassLoad, measure_class, reference_for_dut
from fwlab.results import RunRecord, trial_record, utc_now
from fwlab.rules.derive import TrafficClass
from fwlab.ruleset.config import RulesetRunConfig
from fwlab.ruleset.probe import Bed, class_spec, frame_size, send_args, send_frames
from fwlab.run.stages import Stage, StagedRun, StageTrial
from fwlab.stats.class_cost import common_reference, summarize_class

TRAFFIC = "ruleset-class-cost"


@dataclass(frozen=True)
class Condition:
    """The rule set a class cost trial runs under (``rules`` in run --ruleset; original | proposal in optimize)."""

    name: str
    fw: ImportedFirewall
    digest: str | None
    layout: str = "imported"


def sender(b: Bed, engine: str, c: TrafficClass):
    """``send(count, rate_pps)`` for class ``c``'s packets from the side it enters on."""
    def send(count: int, rate_pps: float) -> dict:
        role, argv = send_args(engine, b, c, count=count, rate=str(int(round(rate_pps))))
        return send_frames(b, role, argv)
    return send


def references(b: Bed, fw: ImportedFirewall, versions: set[int]) -> dict[int, tuple]:
    """Per IP version: (reference chain or None, why none) in the rule set's own code."""
    nft_rules = fw.kind == "nft" or "nf_tables" in (fw.version(b.ctx) or "")
    return {v: reference_for_dut(b.ctx.host, b.ctx.ns, nft_rules=nft_rules, ip_version=v,
                                 uses_security_table="*security" in fw.text) for v in sorted(versions)}


def cost_trial(rec: RunRecord, b: Bed, engine: str, c: TrafficClass, cond: Condition, k: int, *, load: ClassLoad,
               rate_pps: float | None, ref) -> dict:
    """One class cost trial, appended to the record; returns its metrics (with ``rule_counter_delta``)."""
    chain, why = ref
    started = utc_now()
    c0 = cond.fw.counters(b.ctx)
    error, m, raw = None, None, {}
    try:
        t = measure_class(b.ctx.host, b.ctx.ns, ip_version=c.packet.family, frame_size=frame_size(c),
                          send=sender(b, engine, c), load=load, rate_pps=rate_pps, reference=chain,
                          reference_missing=why)
        m, raw = t.metrics, {"probe": t.probe.to_dict(), "engine_send_json": t.send_json}
    except FwlabError as exc:
        error = exc.one_line()
    c1 = cond.fw.counters(b.ctx)
    if m is not None:
        m["ns_per_packet"] = None  # not a back-to-back trial: its figure is fw_class_ns
        m["rule_counter_delta"] = c1.get(c.rule_id, 0) - c0.get(c.rule_id, 0) if c.rule_id in c1 else None
    spec = class_spec(rec, c, cond.name, k, trial_id=f"{c.class_id}-{cond.name}-cost-r{k}", traffic=TRAFFIC,
                      backend="imported", layout=cond.layout, duration_s=load.duration_s)
    flags = []
    if m and m.get("generator_short"):
        flags.append({"code": "generator-short", "severity": "warning",
                      "message": f"the generator sent {m['offered_count']} of {m['intended_count']} packets: "
                                 f"the cost trial is not at its load"})
    rec.append_trial(trial_record(spec, kind="ruleset-class", started_utc=started, metrics=m,
                                  ruleset={"digest": cond.digest, "family": cond.fw.family}, raw=raw, error=error,
                                  flags=flags or None, extra={"class": c.to_dict()}))
    return m or {"fw_class_missing": error, "fw_missing": error}


def cost_stages(run: StagedRun, classes: list[TrafficClass], conds: list[Condition], rounds: int,
                load: ClassLoad = ClassLoad()) -> Generator[Stage, list, dict]:
    """The stages of every class's in-kernel cost under each condition, one stage a round (each
    condition loaded in turn, alternating per round; the first round's pilot rate kept after):
    {"trials": {(class_id, cond): [metrics, ...]}, "references": {cond: {version: name or why}}}."""
    versions = {c.packet.family for c in classes}
    trials: dict[tuple[str, str], list[dict]] = {}
    rates: dict[tuple[str, str], float | None] = {}
    for k in range(rounds):
        order = conds if k % 2 == 0 else conds[::-1]
        plan = [(cond, c) for cond in order for c in (classes if k % 2 == 0 else classes[::-1])]
        got = yield Stage(f"in-kernel cost round {k + 1}", tuple(
            StageTrial("class-cost", cond.name, {"class": c, "cond": cond, "round": k, "load": load, "versions": versions,
                                                 "rate_pps": rates.get((c.class_id, cond.name))})
            for cond, c in plan), fresh=len(conds) > 1, done_note=f"  in-kernel cost round {k + 1}/{rounds} done")
        for (cond, c), m in zip(plan, got):
            rates.setdefault((c.class_id, cond.name), m.get("rate_pps"))
            trials.setdefault((c.class_id, cond.name), []).append(m)
    refs = run.state.references
    return {"trials": trials, "references": {
        cond.name: {str(v): (r[0].base_chain().name if r[0] is not None else None, r[1])
                    for v, r in refs.get(cond.name, {}).items()} for cond in conds}}


def summaries(classes: list[TrafficClass], trials: dict[tuple[str, str], list[dict]], cond: str) -> dict[str, dict]:
    """{class_id: :func:`summarize_class`} under ``cond``, each family referenced to its own common
    reference median (over every class's trials of that family under ``cond``), with the trials'
    probe counts beside (sent, entered, timed, rule counter) for the checks."""
    out = {}
    for v in {c.packet.family for c in classes}:
        mine = [c for c in classes if c.packet.family == v]
        ref = common_reference([t for c in mine for t in trials.get((c.class_id, cond), [])])
        for c in mine:
            ts = trials.get((c.class_id, cond), [])
            s = summarize_class(ts, ref)
            s.update({"class_id": c.class_id, "expected": c.expected, "rule_id": c.rule_id,
                      "ip_version": v, "rate_pps": [t.get("rate_pps") for t in ts],
                      "counts": [{"sent": t.get("offered_count"), "entered": t.get("fw_entered"),
                                  "timed": t.get("fw_timed"), "unfinished": t.get("fw_unfinished"),
                                  "pilot_sent": t.get("pilot_offered_count"),
                                  "rule_counter_delta": t.get("rule_counter_delta")} for t in ts]})
            out[c.class_id] = s
    return out


def cost_line(s: dict) -> str:
    """A class's in-kernel cost as one progress line."""
    f = s.get("ns_per_packet")
    if not f:
        return f"  {s['class_id']}: in-kernel cost missing: {s.get('missing')}"
    rel = f" (±{100 * f['half_width_rel']:.1f} %)" if f.get("half_width_rel") is not None else ""
    floor = f"; floor {s['floor_p50_ns']:.0f} ns" if s.get("floor_p50_ns") is not None else ""
    return (f"  {s['class_id']}: {f['median']:,.0f} ns/packet [{f['low']:,.0f}, {f['high']:,.0f}]{rel} inside the "
            f"firewall ({'referenced' if s['referenced'] else 'raw'}, {', '.join(s['hooks']) or '-'}, "
            f"{f['n']} rounds{floor}): {f['precision']}")


LOAD_METHOD = ("fwlab-engine send --backend packet of the class's own packets at a light fixed load (at most "
               "20 kpps, and at most what keeps the timed brackets within a quarter of one CPU, from a 0.3 s "
               "pilot in the first round; later rounds keep that rate), the in-kernel clock (BPF netfilter "
               "brackets) linked around every base chain the DUT's tables register on every hook of the class's "
               "family, with the same-packet reference chain where one of like code exists")


def established_pairs(classes: list[TrafficClass]) -> dict[str, str]:
    """{established class id: its new-flow class id}: a twin's own (``c3e`` -> ``c3``), or for an
    established class the derivation made, the new-flow class of the same protocol and direction
    whose deciding rule decided the flow's opening packet (its ``opened_by``); a flow's reply
    direction (``c5r``) beside the same new-flow class as ``c5``."""
    ids = {c.class_id for c in classes}
    new = [c for c in classes if c.packet.ct_state != "established"]
    out = {}
    for e in (c for c in classes if c.packet.ct_state == "established"):
        if e.class_id.endswith("e") and e.class_id[:-1] in ids:
            out[e.class_id] = e.class_id[:-1]
            continue
        opened = list(getattr(e, "opened_by", None) or [])
        hit = [c for c in new if opened and c.rule_id == opened[-1] and c.packet.l4proto == e.packet.l4proto
               and c.direction == e.direction]
        if hit:
            out[e.class_id] = hit[0].class_id
    for e in classes:  # a flow's reply direction (c5r of c5): beside the same new-flow class
        base = e.class_id[:-1]
        if getattr(e.packet, "ct_direction", None) == "reply" and e.class_id not in out and base in out:
            out[e.class_id] = out[base]
    return out


def in_kernel_costs(run: StagedRun, fw: ImportedFirewall, classes: list[TrafficClass], cfg: RulesetRunConfig,
                    digest: str | None, imp: dict) -> Generator[Stage, list, dict[str, dict]]:
    """``run --ruleset``'s in-kernel cost stages: every checked class (established twins too) in
    ``cfg.repetitions`` rounds with the rule set loaded; writes ``imp["kernel_cost"]`` and the mix's
    ``kernel_cost``, prints one line per class; returns {class_id: summary} ({} when not measured)."""
    if not cfg.measure_cost or not classes:
        imp["kernel_cost"] = {"classes": {}, "missing": "not measured (--no-rate)" if not cfg.measure_cost else
                              "no class passed its functional check"}
        return {}
    from fwlab.stats.class_cost import mix_cost

    note = run.note
    load = ClassLoad(duration_s=cfg.cost_duration_s)
    got = yield from cost_stages(run, classes, [Condition("rules", fw, digest)], cfg.repetitions, load)
    per = summaries(classes, got["trials"], "rules")
    twins = established_pairs(classes)
    imp["kernel_cost"] = {
        "classes": per, "references": got["references"]["rules"], "method": LOAD_METHOD,
        "load": {"rate_pps_max": load.rate_pps, "duration_s": load.duration_s, "cpu_share": load.cpu_share,
                 "pilot_s": load.pilot_s, "rounds": cfg.repetitions},
        "established": [{"new": new, "established": t} for t, new in twins.items() if new in per],
        "dropped": ("a packet the rule set drops enters the bracket of the chain that drops it and never leaves it: "
                    "the kernel runs no program after a drop, so a drop's own time is not timed (the brackets "
                    "before it are)")}
    for s in per.values():
        note(cost_line(s))
    mix = imp.get("mix") or {}
    if mix.get("weights"):
        mix["kernel_cost"] = mix_cost(mix["weights"], per)
        f = mix["kernel_cost"].get("ns_per_packet")
        note(f"  mix ({mix.get('source')}): " + (
            f"{f['median']:,.0f} ns/packet [{f['low']:,.0f}, {f['high']:,.0f}] inside the firewall "
            f"({mix['kernel_cost']['weight_covered']:.0%} of the weight timed): {f['precision']}" if f else
            f"in-kernel cost missing: {mix['kernel_cost'].get('missing')}"))
    run.record.save_run()
    return per


def attach(costs: list[dict], per: dict[str, dict]) -> list[dict]:
    """The rate-based per-class figures with each class's in-kernel cost beside (``kernel_cost``),
    sorted by the in-kernel cost, most expensive first (classes without one last)."""
    for c in costs:
        c["kernel_cost"] = per.get(c["class_id"])
    def key(c):
        f = (c.get("kernel_cost") or {}).get("ns_per_packet")
        return -(f["median"]) if f else float("inf")
    return sorted(costs, key=key) if per else costs


def kernel_text(s: dict | None) -> str:
    """original -> proposal in-kernel ns/packet of one class, for the summary."""
    if not s:
        return "in-kernel: not measured"
    f = [(s.get(k) or {}).get("ns_per_packet") for k in ("original", "proposal")]
    if not all(f):
        why = str((s.get("original") or {}).get("missing") or (s.get("proposal") or {}).get("missing"))
        return "in-kernel: missing (" + ("dropped: a drop is not timed" if "dropped inside" in why else why[:80]) + ")"
    return f"{f[0]['median']:,.0f} -> {f[1]['median']:,.0f} ns/packet"


def kernel_gain(run: StagedRun, classes: list[TrafficClass], fw_a: ImportedFirewall, fw_b: ImportedFirewall,
                digest_a: str | None, digest_b: str | None, rounds: int) -> Generator[Stage, list, dict]:
    """``fwlab optimize``'s in-kernel gain stages: each measured class under the original and the
    proposal (loaded in turn, A B, B A, ...), per class and for their even mix
    (:mod:`fwlab.stats.class_cost`); both rule sets flushed after."""
    from fwlab.stats.class_cost import gain, mix_gain

    conds = [Condition("original", fw_a, digest_a, layout="original"),
             Condition("proposal", fw_b, digest_b, layout="proposal")]
    got = yield from cost_stages(run, classes, conds, rounds)
    for cond in conds:
        cond.fw.flush(run.state.b.ctx)
    run.condition = None  # neither rule set is loaded now
    t = got["trials"]
    sums = {cond: summaries(classes, t, cond) for cond in ("original", "proposal")}
    per = {c.class_id: {cond: sums[cond][c.class_id] for cond in sums} for c in classes}
    pairs = {c.class_id: (t.get((c.class_id, "original"), []), t.get((c.class_id, "proposal"), [])) for c in classes}
    return {"classes": {i: gain(a, p) for i, (a, p) in pairs.items()}, "mix": mix_gain(pairs), "per_class": per,
            "references": got["references"], "method": LOAD_METHOD}
