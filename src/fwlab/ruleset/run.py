"""``fwlab run --ruleset FILE``: a user's own rule set, its derived traffic, verdicts and cost per class.

Owns the order of work of an imported-rule-set run:

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
5. cost: each class at the engine's maximum rate (``RATE_COUNT`` fixed-size frames, packet
   backend), with the rule set loaded and with no rule set (the reference), alternating, for
   ``repetitions`` rounds. On veth the DUT's forwarding and firewall run in the sender's softirq,
   so the sender's packet rate is the path's rate (generator + DUT together); per-class cost =
   1e9 / rate - 1e9 / reference rate [ns/packet], median of the rounds with their range;
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
round, kind ``ruleset-class``) and tears everything down on every exit path. Its configuration is
:mod:`fwlab.ruleset.config`, a class's traffic :mod:`fwlab.ruleset.probe`, the per-class figures
:mod:`fwlab.ruleset.costs` and the mix's :mod:`fwlab.ruleset.mix`; its bed and the head of its
record come from the run pipeline (:func:`fwlab.run.beds.open_bed`, :mod:`fwlab.run.header`).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TextIO

from fwlab.dut.imported import ImportedFirewall
from fwlab.errors import FwlabError
from fwlab.results import RunRecord, trial_record, utc_now
from fwlab.rules.derive import Derivation, TrafficClass, derive
from fwlab.run.beds import open_bed
from fwlab.run.header import derived_suite, new_record
from fwlab.ruleset.config import RulesetRunConfig
from fwlab.ruleset.costs import latency_load, latency_missing, latency_why, summarize_costs
from fwlab.ruleset.mix import mix_latency, resolve, summarize_mix
from fwlab.ruleset.probe import (DROP_MAX, PASS_MIN, PROBE_PPS, Bed, Routes, class_spec, frame_size,
                                 parse_interfaces, preflight, prepare, probe, rate_trial, read_input, send_args,
                                 send_frames)
from fwlab.runners.engine import engine_version, metrics_from, parse_result, wait_ready

LATENCY_IDLE_S = 0.3  #: the latency receiver stops this long after the last frame [s]


# -- the run -----------------------------------------------------------------------------------
def note_to(log: TextIO | None):
    """A progress line writer to ``log`` (None: silent)."""
    def note(s: str) -> None:
        if log:
            log.write(s + "\n")
            log.flush()
    return note


def run_ruleset(cfg: RulesetRunConfig, out_root: Path, *, log: TextIO | None = sys.stderr) -> RunRecord:
    text = read_input(cfg.ruleset, "rule set")
    ipset_text = read_input(cfg.ipset, "ipset file") if cfg.ipset else None
    fw = ImportedFirewall.from_text(text, cfg.ruleset.name, ipset_text)
    names = parse_interfaces(cfg.interfaces)
    engine = preflight(("nft" if fw.kind == "nft" else fw.restore_program,) + (("ipset",) if ipset_text else ()))
    note = note_to(log)
    with open_bed("routed") as bed:
        desc = bed.describe()
        b = prepare(bed, names)
        load_s = fw.load(b.ctx)  # a refusal raises here; `with` removes the bed
        digest = fw.digest(b.ctx)
        model = fw.readback(b.ctx)
        deriv: Derivation = derive(model, b.addrs, seed=cfg.seed)
        note(f"{cfg.ruleset.name}: {fw.family}, loaded in {load_s * 1e3:.1f} ms; "
             f"{len(deriv.classes)} traffic classes, {len(deriv.not_covered)} not covered")
        mix = resolve(cfg.class_weights, deriv.classes, f"class weights ({cfg.mix_source or 'the profile'})")
        mix["profile"] = cfg.class_weights
        mix["profile_source"] = cfg.mix_source
        rec = new_record(out_root, derived_suite(
            f"ruleset-{cfg.ruleset.stem}", repetitions=cfg.repetitions, ip_versions=sorted(model.families()),
            description=f"imported rule set {cfg.ruleset.name}: derived traffic classes, their verdicts "
                        f"and cost per class"),
            {"trials": 0, "skipped": []},
            beds=[{**desc, "backend": "imported", "backend_version": fw.version(b.ctx), "dut_interfaces": b.names}])
        imp = {"file": str(cfg.ruleset), "ipset_file": str(cfg.ipset) if cfg.ipset else None,
               "kind": fw.kind, "family": fw.family, "ip_version": fw.ip_version, "digest": digest,
               "load_s": load_s, "text": text, "interfaces": names, "derivation": deriv.to_dict(),
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
        rec.run["ruleset_import"] = imp
        rec.save_run()
        try:
            routes = Routes(b, deriv.classes)
            probes = [probe(b, fw, engine, c, cfg.probe_count, routes) for c in deriv.classes]
            imp["probes"] = probes
            for p in probes:
                note(f"  {p['class_id']}: expected {p['expected']}, observed {p['observed']} "
                     f"({p['arrived']}/{p['sent']}) -> {p['status']}")
            rec.save_run()
            rates: dict[tuple[str, str], list[float]] = {}
            lat: dict[tuple[str, str], list[dict]] = {}
            if cfg.measure_rate and deriv.classes:
                for k in range(cfg.repetitions):
                    order = ("rules", "reference") if k % 2 == 0 else ("reference", "rules")
                    for cond in order:
                        _set_condition(b, fw, cond)
                        for c in deriv.classes:
                            rate = rate_trial(rec, b, engine, c, cond, k, count=cfg.rate_count, route=routes.ensure,
                                              **_identity(cond, digest, fw.family))
                            rates.setdefault((c.class_id, cond), []).append(rate)
                    if cfg.latency_count:
                        # both conditions at the same load, known once both rates of the round are:
                        # the condition still loaded first, then the other (A B | B A, one reload)
                        for cond in reversed(order):
                            if cond != order[-1]:
                                _set_condition(b, fw, cond)
                            for c in deriv.classes:
                                if latency_missing(c) is None:
                                    lat.setdefault((c.class_id, cond), []).append(_latency_trial(
                                        rec, b, routes, engine, c, cond, k, cfg, digest, fw.family,
                                        latency_load(rates, c.class_id, k, cfg.latency_fraction)))
                    note(f"  rate round {k + 1}/{cfg.repetitions} done")
                imp["costs"] = summarize_costs(deriv.classes, rates, lat if cfg.latency_count else None)
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
                note(f"  mix ({mix['source']}, {sum(v > 0 for v in w.values())} classes): "
                     f"{kpps_text(mix['rate_pps'])} kpps, cost {_ns(mix['cost_ns_per_packet'])} ns/packet")
            else:
                imp["costs"] = []
                imp["rate_missing"] = "not measured (--no-rate)" if deriv.classes else "no traffic class derived"
            rec.run["plan"]["trials"] = len(rec.trials())
            rec.set_status("complete")
        except BaseException:
            rec.set_status("incomplete")
            raise
        finally:
            fw.flush(b.ctx)
    return rec


def _set_condition(b: Bed, fw: ImportedFirewall, cond: str) -> None:
    """Load the rule set (``rules``) or leave the DUT without one (``reference``)."""
    fw.flush(b.ctx)
    if cond == "rules":
        fw.load(b.ctx)


def kpps_text(d: dict) -> str:
    """A {median, ...} rate [packets/s] as kpps text for the progress lines, '–' without one."""
    return "–" if d.get("median") is None else f"{d['median'] / 1e3:,.1f}"


def _ns(d: dict) -> str:
    return "–" if d.get("median") is None else f"{d['median']:,.0f}"


def _latency_trial(rec: RunRecord, b: Bed, routes: Routes, engine: str, c: TrafficClass, cond: str, k: int,
                   cfg: RulesetRunConfig, digest: str, family: str, load: float | None) -> dict:
    """One latency trial of class ``c`` in round ``k``: ``latency_count`` frames at ``load``
    [packets/s] (:func:`latency_load`, the same in both conditions), received by the engine on the
    far side's bed host (AF_PACKET, the class's port). Appends the trial (traffic
    ``ruleset-class-latency``) and returns {hdr, samples, load_pps, round, why}."""
    if not load:
        return {"hdr": None, "samples": 0, "load_pps": None, "round": k,
                "why": "no rate measured in this round to load at"}
    routes.ensure(c)
    role, send_argv = send_args(engine, b, c, count=cfg.latency_count, rate=str(int(load)))
    other = "server" if role == "client" else "client"
    host, ns = b.bed.host, b.bed.ns(other)
    ready = host.scratch_path(f"latency-ready-{c.class_id}-{cond}-{k}-{time.monotonic_ns()}")
    iface = b.bed.topo.client_if if other == "client" else b.bed.topo.server_if
    recv_argv = [engine, "recv", "--backend", "packet", "--iface", iface, "--port", str(c.packet.describe()["dport"]),
                 "--idle-timeout-s", str(LATENCY_IDLE_S), "--duration-s", str(round(cfg.latency_count / load * 2 + 10)),
                 "--ready-file", ready]
    started = utc_now()
    error, send, recv = None, {}, {}
    rx = host.spawn(recv_argv, ns=ns)
    try:
        wait_ready(host, rx, ready, "recv (latency)", timeout_s=5.0, fix="check the engine build ('make engine')")
        send = send_frames(b, role, send_argv)
        try:
            rx.proc.wait(timeout=LATENCY_IDLE_S + 3.0)
        except Exception:  # noqa: BLE001 - still running: stopped below
            pass
        out, _ = rx.stop(sig=2, wait_s=5.0)
        recv = parse_result(out, "recv") if out.strip() else {}
        if not recv:
            error = "fwlab-engine recv printed nothing"
    except FwlabError as exc:
        error = exc.one_line()
    finally:
        if rx.proc.poll() is None:
            rx.stop()
        host.forget(rx)
    m = metrics_from(send, recv, frame_size(c)).metrics if send and recv else {}
    ident = _identity(cond, digest, family)
    spec = class_spec(rec, c, cond, k, trial_id=f"{c.class_id}-{cond}-latency-r{k}", traffic="ruleset-class-latency",
                      backend=ident["backend"], layout=ident["layout"], duration_s=m.get("duration_s"))
    keep = ("tx_pps", "rx_pps", "offered_count", "forwarded_count", "loss_ratio", "duration_s", "latency_ns",
            "latency_samples", "latency_hdr_b64", "latency_hdr_unit", "jitter_ns", "generator_short")
    metrics = {key: m.get(key) for key in keep} | {"ns_per_packet": None, "load_pps": load}
    rec.append_trial(trial_record(
        spec, kind="ruleset-class", started_utc=started, metrics=metrics if m else None, ruleset=ident["ruleset"],
        raw={"engine_send_json": send, "engine_recv_json": {k2: v for k2, v in recv.items() if k2 != "streams"},
             "argv": {"send": send_argv, "recv": recv_argv}},
        error=error, extra={"class": c.to_dict()}))
    hdr = m.get("latency_hdr_b64") if m else None
    why = error or (None if hdr else f"no frame reached the receiver ({m.get('forwarded_count', 0) if m else 0} "
                                     f"of {m.get('offered_count', 0) if m else 0})")
    return {"hdr": hdr, "samples": m.get("latency_samples") if m else 0, "load_pps": load, "round": k, "why": why}


def _identity(cond: str, digest: str, family: str) -> dict:
    """``run --ruleset``'s two conditions: the imported rule set, or none (the reference)."""
    on = cond == "rules"
    return {"backend": "imported" if on else "none", "layout": "imported" if on else "none",
            "ruleset": {"digest": digest if on else None, "family": family if on else None}}
