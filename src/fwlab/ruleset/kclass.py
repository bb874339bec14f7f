"""Each class's time inside the firewall, for ``fwlab run --ruleset`` and ``fwlab optimize``.

Owns the stages of the class cost trials (:func:`fwlab.methods.class_cost.measure_class`) of a
rule-set run: ``rounds`` stages over the classes (order reversed every other round; the first
round's pilot picks each class's rate, later rounds keep it), each naming the ``class-cost``
method (:mod:`fwlab.ruleset.methods`: the same-packet reference for the imported rule set, each
class routed, and an established twin's flow opened, first); one cost trial: the class's rule
counter read around it, one record line (kind ``ruleset-class``, traffic
``ruleset-class-cost``, the figures of a suite cost trial plus the class's own ``fw_class_*``),
and the per-class summary (:func:`fwlab.stats.class_cost.summarize_class`: referenced to the
reference's median over the run). The rule set stays loaded throughout, except for the classes
it drops: those are timed on its marked copy (:mod:`fwlab.dut.marked_copy`: each drop verdict
made ``meta mark set M accept``, the clock's leave right after the chain dropping the marked
packets; condition ``<cond>-marked1``), after the round's other classes; their figure is "time to
the drop verdict (timed on a marked copy)", and each round one of them per family is timed again
on the copy that sets the mark twice (``<cond>-marked2``): the difference is the mark statement's
own time. The job loads a marked condition's copy from ``run.state.copies`` (:func:`copy_of`). A
new-flow class's packets each come on a flow of their own where :mod:`fwlab.ruleset.flows` allows
(the DUT's conntrack entries counted around the trial and flushed after it). With no rule set
there is nothing to time, so a class's in-kernel cost needs no no-rule-set reference.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from fwlab.dut.imported import ImportedFirewall
from fwlab.dut.marked_copy import LABEL, LABEL_REJECT, MarkedCopy, uses_mark
from fwlab.errors import FwlabError
from fwlab.methods.class_cost import ClassLoad, measure_class, reference_for_dut
from fwlab.results import RunRecord, trial_record, utc_now
from fwlab.rules.derive import TrafficClass
from fwlab.ruleset.config import RulesetRunConfig
from fwlab.ruleset.flows import conntrack_count, flush_conntrack, port_range
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
    #: a marked copy of ``fw`` (condition ``<base>-marked<n>``): its trials drop the marked packets after timing them
    copy: MarkedCopy | None = None
    base: str | None = None  #: a marked copy's: the condition it copies (its trials are recorded under it)


def marked_label(c: TrafficClass) -> str:
    """What a dropped class's figure is (record and report)."""
    return LABEL_REJECT if c.terminal == "reject" else LABEL


def copy_of(run, condition: str) -> MarkedCopy | None:
    """The marked copy a condition name stands for on this run (registered by :func:`cost_stages`
    in ``run.state.copies``), None for any other condition: the job loads it in place of a rule set."""
    return (getattr(run.state, "copies", None) or {}).get(condition)


def sender(b: Bed, engine: str, c: TrafficClass, text: str = "", flows: list | None = None):
    """``send(count, rate_pps)`` for class ``c``'s packets from the side it enters on; a new-flow
    class's packets each on a flow of its own where :func:`fwlab.ruleset.flows.port_range` allows
    (what each send did is appended to ``flows``)."""
    used = [0]  # ports the earlier sends of this trial took (the pilot's): the next send starts after them

    def send(count: int, rate_pps: float) -> dict:
        ports, how = port_range(text, c, count + used[0])
        if ports:
            ports = (ports[0] + used[0], ports[1])
            used[0] += count
        if flows is not None:
            flows.append(how)
        role, argv = send_args(engine, b, c, count=count, rate=str(int(round(rate_pps))), src_ports=ports)
        return send_frames(b, role, argv)
    return send


def references(b: Bed, fw: ImportedFirewall, versions: set[int]) -> dict[int, tuple]:
    """Per IP version: (reference chain or None, why none) in the rule set's own code."""
    nft_rules = fw.kind == "nft" or "nf_tables" in (fw.version(b.ctx) or "")
    return {v: reference_for_dut(b.ctx.host, b.ctx.ns, nft_rules=nft_rules, ip_version=v,
                                 uses_security_table="*security" in fw.text) for v in sorted(versions)}


def transmitted(b: Bed, ip_version: int) -> int | None:
    """The DUT namespace's count of IP datagrams it transmitted (``OutTransmits`` of /proc/net/snmp,
    ``Ip6OutTransmits`` of /proc/net/snmp6: counted as a packet goes to the device, after every hook;
    ``ForwDatagrams`` is no use here: it counts a forwarded packet before the forward hook drops it)."""
    path = "/proc/net/snmp" if ip_version == 4 else "/proc/net/snmp6"
    cp = b.ctx.host.run(["cat", path], ns=b.ctx.ns, check=False, timeout_s=10)
    if cp.returncode != 0:
        return None
    lines = cp.stdout.splitlines()
    if ip_version == 6:
        got = [ln.split() for ln in lines if ln.startswith("Ip6OutTransmits")]
        return int(got[0][1]) if got else None
    ip = [ln.split() for ln in lines if ln.startswith("Ip:")]
    if len(ip) < 2 or "OutTransmits" not in ip[0]:
        return None
    return int(ip[1][ip[0].index("OutTransmits")])


def cost_trial(rec: RunRecord, b: Bed, engine: str, c: TrafficClass, cond: Condition, k: int, *, load: ClassLoad,
               rate_pps: float | None, ref) -> dict:
    """One class cost trial, appended to the record; returns its metrics (with ``rule_counter_delta``)."""
    chain, why = ref
    started = utc_now()
    c0, f0 = cond.fw.counters(b.ctx), transmitted(b, c.packet.family)
    ct0, flows = conntrack_count(b.ctx.host, b.ctx.ns), []
    rid = cond.copy.counter_id(c.rule_id) if cond.copy else c.rule_id
    error, m, raw = None, None, {}
    try:
        t = measure_class(b.ctx.host, b.ctx.ns, ip_version=c.packet.family, frame_size=frame_size(c),
                          send=sender(b, engine, c, cond.fw.text, flows), load=load, rate_pps=rate_pps, reference=chain,
                          reference_missing=why, drop_mark=cond.copy.mark if cond.copy else None)
        m, raw = t.metrics, {"probe": t.probe.to_dict(), "engine_send_json": t.send_json}
    except FwlabError as exc:
        error = exc.one_line()
    c1, f1 = cond.fw.counters(b.ctx), transmitted(b, c.packet.family)
    ct1 = conntrack_count(b.ctx.host, b.ctx.ns)
    cycled = any(f.startswith("one flow per packet") for f in flows)
    if cycled:
        flush_conntrack(b.ctx.host, b.ctx.ns)  # a full table would drop the next trial's new flows
    if m is not None:
        m["fw_class_flows"] = flows[-1] if flows else None
        # conntrack entries made over pilot + trial: one per packet of a cycled, accepted class
        m["conntrack_new_delta"] = ct1 - ct0 if ct0 is not None and ct1 is not None else None
        # the DUT's transmitted datagrams over pilot + trial: every packet of an accepted class, none of a dropped one
        m["dut_transmitted_delta"] = f1 - f0 if f0 is not None and f1 is not None else None
        m["ns_per_packet"] = None  # not a back-to-back trial: its figure is fw_class_ns
        m["rule_counter_delta"] = c1.get(rid, 0) - c0.get(rid, 0) if rid in c1 else None
        if cond.copy:
            m.update({"fw_class_figure_kind": marked_label(c), "fw_marked_copy_marks": cond.copy.mark_times,
                      "fw_marked_copy_counter_rule": rid, "fw_marked_copy_changed": cond.copy.changed})
    spec = class_spec(rec, c, cond.base or cond.name, k, trial_id=f"{c.class_id}-{cond.name}-cost-r{k}", traffic=TRAFFIC,
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
                load: ClassLoad = ClassLoad(), marked: set[str] = frozenset()) -> Generator[Stage, list, dict]:
    """The stages of every class's in-kernel cost under each condition, one stage a round (each
    condition loaded in turn, alternating per round; the first round's pilot rate kept after):
    {"trials": {(class_id, cond): [metrics, ...]}, "references": {cond: {version: name or why}},
    "mark_cost": {(class_id, cond): [metrics of the copy that sets the mark twice, ...]}}.

    The classes in ``marked`` (those the rule set drops) are timed on the condition's marked copy
    instead (condition ``<cond>-marked1``, after the condition's other classes of the round); their
    trials are stored under the condition's name all the same, so they share its reference median.
    Per round, the first marked class of each IP version is timed once more on the copy that marks
    twice (``<cond>-marked2``, in ``mark_cost``). The copies are registered in ``run.state.copies``
    for the job to load (:func:`copy_of`)."""
    versions = {c.packet.family for c in classes}
    trials: dict[tuple[str, str], list[dict]] = {}
    mark_cost: dict[tuple[str, str], list[dict]] = {}
    rates: dict[tuple[str, str], float | None] = {}
    plain = [c for c in classes if c.class_id not in marked]
    dropped = [c for c in classes if c.class_id in marked]
    calib = [next(c for c in dropped if c.packet.family == v) for v in sorted({c.packet.family for c in dropped})]
    copies = {}
    if dropped:
        for cond in conds:
            for times in (1, 2):
                cp = Condition(f"{cond.name}-marked{times}", cond.fw, cond.digest,
                               "marked-copy" if times == 1 else "marked-copy-x2", MarkedCopy(cond.fw, times), cond.name)
                copies[(cond.name, times)] = cp
                run.state.copies[cp.name] = cp.copy
    for k in range(rounds):
        order = conds if k % 2 == 0 else conds[::-1]
        rev = (lambda xs: xs) if k % 2 == 0 else (lambda xs: xs[::-1])
        plan = []
        for cond in order:
            plan += [(cond, c, trials) for c in rev(plain)]
            if dropped:
                plan += [(copies[(cond.name, 1)], c, trials) for c in rev(dropped)]
                plan += [(copies[(cond.name, 2)], c, mark_cost) for c in calib]
        got = yield Stage(f"in-kernel cost round {k + 1}", tuple(
            StageTrial("class-cost", cond.name, {"class": c, "cond": cond, "round": k, "load": load, "versions": versions,
                                                 "rate_pps": rates.get((c.class_id, cond.name))})
            for cond, c, _ in plan), fresh=len(conds) > 1 or bool(dropped),
            done_note=f"  in-kernel cost round {k + 1}/{rounds} done")
        for (cond, c, store), m in zip(plan, got):
            rates.setdefault((c.class_id, cond.name), m.get("rate_pps"))
            store.setdefault((c.class_id, cond.base or cond.name), []).append(m)
    refs = run.state.references
    return {"trials": trials, "mark_cost": mark_cost, "references": {
        cond.name: {str(v): (r[0].base_chain().name if r[0] is not None else None, r[1])
                    for v, r in refs.get(cond.name, {}).items()} for cond in conds}}


def summaries(classes: list[TrafficClass], trials: dict[tuple[str, str], list[dict]], cond: str,
              mark_trials: dict[tuple[str, str], list[dict]] | None = None) -> dict[str, dict]:
    """{class_id: :func:`summarize_class`} under ``cond``, each family referenced to its own common
    reference median (over every class's trials of that family under ``cond``), with the trials'
    probe counts beside (sent, entered, timed, rule counter) for the checks; a class timed on a
    marked copy with its ``figure_kind`` and the family's mark statement time (``mark_statement``,
    from ``mark_trials``: the copy that marks twice)."""
    from fwlab.stats.class_cost import mark_cost

    out = {}
    for v in {c.packet.family for c in classes}:
        mine = [c for c in classes if c.packet.family == v]
        ref = common_reference([t for c in mine for t in trials.get((c.class_id, cond), [])])
        calib = [mark_cost(trials.get(key, []), ts, ref) for key, ts in (mark_trials or {}).items()
                 if key[1] == cond and any(c.class_id == key[0] for c in mine)]
        for c in mine:
            ts = trials.get((c.class_id, cond), [])
            s = summarize_class(ts, ref)
            kind = next((t.get("fw_class_figure_kind") for t in ts if t.get("fw_class_figure_kind")), None)
            if kind:
                s["figure_kind"] = kind
                s["mark_statement"] = calib[0] if calib else {"ns": None, "missing": "not measured"}
            s.update({"class_id": c.class_id, "expected": c.expected, "rule_id": c.rule_id,
                      "ip_version": v, "rate_pps": [t.get("rate_pps") for t in ts],
                      "counts": [{"sent": t.get("offered_count"), "entered": t.get("fw_entered"),
                                  "timed": t.get("fw_timed"), "unfinished": t.get("fw_unfinished"),
                                  "pilot_sent": t.get("pilot_offered_count"),
                                  "dropped_marked": t.get("fw_class_dropped_marked"),
                                  "dut_transmitted": t.get("dut_transmitted_delta"),
                                  "conntrack_new": t.get("conntrack_new_delta"), "flows": t.get("fw_class_flows"),
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
    kind = f" [{s['figure_kind']}]" if s.get("figure_kind") else ""
    return (f"  {s['class_id']}{kind}: {f['median']:,.0f} ns/packet [{f['low']:,.0f}, {f['high']:,.0f}]{rel} inside the "
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
    marked, why_not = marked_classes(fw, classes)
    got = yield from cost_stages(run, classes, [Condition("rules", fw, digest)], cfg.repetitions, load, marked)
    per = summaries(classes, got["trials"], "rules", got["mark_cost"])
    twins = established_pairs(classes)
    imp["kernel_cost"] = {
        "classes": per, "references": got["references"]["rules"], "method": LOAD_METHOD,
        "load": {"rate_pps_max": load.rate_pps, "duration_s": load.duration_s, "cpu_share": load.cpu_share,
                 "pilot_s": load.pilot_s, "rounds": cfg.repetitions},
        "established": [{"new": new, "established": t} for t, new in twins.items() if new in per],
        "dropped": DROPPED_METHOD if marked else (
            "a packet the rule set drops enters the bracket of the chain that drops it and never leaves it: the "
            f"kernel runs no program after a drop, so a drop's own time is not timed ({why_not})"),
        "marked_copy_classes": sorted(marked)}
    for s in per.values():
        note(cost_line(s))
    mix = imp.get("mix") or {}
    if mix.get("weights"):
        mix["kernel_cost"] = mix_cost(mix["weights"], per)
        f = mix["kernel_cost"].get("ns_per_packet")
        note(f"  mix ({mix.get('source')}): " + (
            f"{f['median']:,.0f} ns/packet [{f['low']:,.0f}, {f['high']:,.0f}] inside the firewall "
            f"({mix['kernel_cost']['weight_covered']:.0%} of the weight timed{to_verdict(mix['kernel_cost'])}): "
            f"{f['precision']}" if f else
            f"in-kernel cost missing: {mix['kernel_cost'].get('missing')}"))
    run.record.save_run()
    return per


DROPPED_METHOD = (
    "a class the rule set drops is timed on a marked copy of the rule set: each drop and reject verdict (and a base "
    "chain's policy drop, as policy accept with a final marking rule) replaced by 'meta mark set 0x66776c62 accept' "
    "(iptables: -j FWLAB_DROPMARK, a chain doing -j MARK then -j ACCEPT), and the clock's leave program right after "
    "the chain that marked it (after the reference chain when that chain is the hook's last) stamps the time and "
    "returns NF_DROP for the marked packets: the packet still never leaves the DUT and no later chain runs on it, "
    "conntrack confirms no entry as for the real drop (the packet dies on the same hook). Its figure is the time to "
    "the drop verdict, including the mark statement (measured: mark_statement, the copy that marks twice against "
    "the one that marks once); a reject's ICMP error is not sent on the copy, so its time is not included")


def marked_classes(fw: ImportedFirewall, classes: list[TrafficClass]) -> tuple[set[str], str]:
    """The classes to time on the marked copy (those the rule set drops), or (empty, why none)."""
    drop = {c.class_id for c in classes if c.expected == "drop"}
    if not drop:
        return set(), "no class is dropped"
    if uses_mark(fw.text):
        return set(), "the rule set uses fwlab's drop mark 0x66776c62 itself: no marked copy"
    return drop, ""


def to_verdict(kc: dict) -> str:
    """", of which x % (c1, c5) to the drop verdict on a marked copy" for the mix line ('' when none)."""
    ids = list(kc.get("to_drop_verdict") or {})
    if not ids:
        return ""
    return (f", of which {kc.get('weight_to_drop_verdict', 0):.0%} ({', '.join(ids)}) time to the drop verdict "
            f"(timed on a marked copy)")


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
