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
round, kind ``ruleset-class``) and tears everything down on every exit path.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from fwlab.dut.imported import ImportedFirewall
from fwlab.errors import FwlabError, SuiteError
from fwlab.results import RunRecord, trial_record, utc_now
from fwlab.rules.derive import Derivation, TrafficClass, derive
from fwlab.run.beds import open_bed
from fwlab.run.header import derived_suite, new_record
from fwlab.ruleset.mix import (check_weights, latency_figures, median_range, mix_latency, read_mix_file, resolve,
                              summarize_mix)
from fwlab.ruleset.probe import (DEFAULT_INTERFACES, DROP_MAX, PASS_MIN, PROBE_PPS, Bed, Routes, class_spec,
                                 frame_size, parse_interfaces, preflight, prepare, probe, rate_trial, read_input,
                                 send_args, send_frames)
from fwlab.runners.engine import engine_version, metrics_from, parse_result, wait_ready
from fwlab.stats.median_interval import median_interval

PROBE_COUNT = 40  #: probe packets per class [packets]
RATE_COUNT = 100_000  #: frames per rate measurement (back to back at max)
LATENCY_COUNT = 20_000  #: frames per latency trial
LATENCY_FRACTION = 0.5  #: latency trial load, share of the lower of the class's two rates in the round (RFC 2544 §26.2)
LATENCY_IDLE_S = 0.3  #: the latency receiver stops this long after the last frame [s]


@dataclass
class RulesetRunConfig:
    ruleset: Path
    ipset: Path | None = None
    interfaces: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_INTERFACES))
    repetitions: int = 3
    rate_count: int = RATE_COUNT
    probe_count: int = PROBE_COUNT
    measure_rate: bool = True
    seed: int = 1
    latency_count: int = LATENCY_COUNT  #: frames per latency trial; 0: no latency
    latency_fraction: float = LATENCY_FRACTION
    class_weights: dict[str, float] | None = None  #: the user's mix profile (None: every class alike)
    mix_source: str | None = None  #: where the profile came from (a file, the suite)


# -- the run -----------------------------------------------------------------------------------
def latency_missing(c: TrafficClass) -> str | None:
    """Why class ``c`` gets no latency trial (None: it gets one)."""
    if c.expected != "accept":
        return f"the rule set {c.terminal}s it: no frame arrives to be timed"
    if c.packet.l4proto != "udp":
        return "tcp SYN test frames carry no send timestamp (fwlab-engine times udp frames only)"
    return None


def latency_load(rates: dict[tuple[str, str], list[float | None]], class_id: str, k: int,
                 fraction: float) -> float | None:
    """The load [packets/s] of class ``class_id``'s latency trials in round ``k``, the same in both
    conditions: ``fraction`` x the lower of its rates with and without the rule set in that round
    (the one measured if only one was); None when neither was."""
    got = [r[k] for r in (rates.get((class_id, cond)) or [] for cond in ("rules", "reference"))
           if len(r) > k and r[k]]
    return max(1.0, min(got) * fraction) if got else None


def added_latency(pairs: list[tuple[float, float]]) -> dict:
    """Added median latency [ns] from per-round (rules p50, reference p50) pairs, each pair at the
    same load: the median of the differences with its order-statistic interval (95 %, or min to
    max with the lower coverage ``level`` it has when there are fewer than 6 rounds)."""
    diffs = [a - b for a, b in pairs]
    iv = median_interval(diffs, 0.95)
    return {"median": statistics.median(diffs), "low": iv.low if iv else None, "high": iv.high if iv else None,
            "level": iv.level if iv else None, "n": len(diffs), "per_round": diffs,
            "why": None if iv else "one round: no interval",
            "method": "per round: p50 with the rule set - p50 without, both at the same load; median of the "
                      "rounds, distribution-free order-statistic interval of the median (95 % from 6 rounds)"}


def _added_p50(trials: dict[str, list[dict]]) -> tuple[dict | None, str | None]:
    """The added median latency from the two conditions' trials paired by round, or None and why."""
    by_round = {cond: {t.get("round", i): t for i, t in enumerate(ts)} for cond, ts in trials.items()}
    pairs, unlike = [], []
    for k in sorted(set(by_round["rules"]) & set(by_round["reference"])):
        a, b = by_round["rules"][k], by_round["reference"][k]
        if not (a.get("hdr") and b.get("hdr")):
            continue
        if a.get("load_pps") != b.get("load_pps"):
            unlike.append(k)
            continue
        pairs.append((latency_figures([(a["hdr"], 1.0)])["p50"], latency_figures([(b["hdr"], 1.0)])["p50"]))
    if pairs:
        return added_latency(pairs), None
    if unlike:
        return None, (f"the two conditions were timed at different loads in round(s) {', '.join(map(str, unlike))}: "
                      "their medians are not comparable")
    return None, "no round timed in both conditions"


def summarize_latency(c: TrafficClass, lat: dict[tuple[str, str], list[dict]]) -> dict:
    """A class's latency with rules and without: the rounds' histograms merged, percentiles [ns];
    ``added_p50_ns``: the added median latency over the rounds timed in both conditions at the
    same load (:func:`added_latency`), None with ``added_p50_missing`` otherwise."""
    why = latency_missing(c)
    if why:
        return {"missing": why}
    out: dict = {}
    for cond in ("rules", "reference"):
        trials = lat.get((c.class_id, cond), [])
        texts = [t["hdr"] for t in trials if t.get("hdr")]
        fig = latency_figures([(t, 1.0 / len(texts)) for t in texts]) if texts else None
        out[cond] = {"latency_ns": fig, "rounds": len(texts),
                     "samples": sum(t.get("samples") or 0 for t in trials),
                     "load_pps": [t.get("load_pps") for t in trials]}
        if fig is None:
            out[cond]["missing"] = next((t["why"] for t in trials if t.get("why")), "no frame arrived")
    out["added_p50_ns"], missing = _added_p50({cond: lat.get((c.class_id, cond), []) for cond in ("rules", "reference")})
    if missing:
        out["added_p50_missing"] = missing
    return out


def latency_why(summary: dict, cond: str) -> str | None:
    """Why a class's :func:`summarize_latency` has no latency in ``cond`` (None: it has one): the
    class gets no trial (dropped, tcp), or its trials in that condition timed nothing (their reason)."""
    if summary.get("missing"):
        return summary["missing"]
    d = summary.get(cond) or {}
    return None if d.get("latency_ns") else d.get("missing") or "no latency measured"


def summarize_costs(classes: list[TrafficClass], rates: dict[tuple[str, str], list[float]],
                    lat: dict[tuple[str, str], list[dict]] | None = None) -> list[dict]:
    """Per class: rate with rules and without, cost [ns/packet] = 1e9/rate - 1e9/ref (per round,
    then median and range), latency when measured, sorted most expensive first."""
    out = []
    for c in classes:
        r = rates.get((c.class_id, "rules"), [])
        ref = rates.get((c.class_id, "reference"), [])
        costs = [1e9 / a - 1e9 / b for a, b in zip(r, ref) if a and b]
        out.append({"class_id": c.class_id, "rule_id": c.rule_id, "rule_text": c.rule_text,
                    "expected": c.expected, "traversed_rules": c.traversed_rules,
                    "rate_pps": median_range(r), "reference_rate_pps": median_range(ref),
                    "cost_ns_per_packet": median_range(costs)})
        if lat is not None:
            out[-1]["latency"] = summarize_latency(c, lat)
    out.sort(key=lambda d: -(d["cost_ns_per_packet"]["median"] or float("-inf")))
    return out


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


# -- configuration ---------------------------------------------------------------------------
RULESET_KEYS = ("file", "ipset", "interfaces", "rate_count", "probe_count", "measure_rate", "seed",
                "latency_count", "latency_fraction", "class_weights", "mix")


def _check_latency(count, fraction, where: str) -> None:
    """A latency trial's frame count and load fraction, checked before any arithmetic on them."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise SuiteError(f"{where}: latency_count must be a whole number >= 0 (0: no latency), not {count!r}",
                         fix="latency_count = 20000")
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        raise SuiteError(f"{where}: latency_fraction must be a number in (0, 1] (share of the class's rate), "
                         f"not {fraction!r}", fix="latency_fraction = 0.5")


#: [ruleset] keys whose value must be a string / a bool / a table of strings (or a string)
_STRING_KEYS = ("file", "ipset")
_BOOL_KEYS = ("measure_rate",)


def _check_table_types(table: dict, where: str) -> None:
    """The [ruleset] table's file names, flags and interfaces are of the right TOML type (one line
    naming the key otherwise, never a TypeError further on)."""
    for k in _STRING_KEYS:
        if k in table and (not isinstance(table[k], str) or not table[k].strip()):
            raise SuiteError(f"{where}: {k} must be a file name (a string), not {table[k]!r}",
                             fix=f'{k} = "my-rules.{"nft" if k == "file" else "ipset"}"')
    for k in _BOOL_KEYS:
        if k in table and not isinstance(table[k], bool):
            raise SuiteError(f"{where}: {k} must be true or false, not {table[k]!r}", fix=f"{k} = false")
    ifs = table.get("interfaces")
    if ifs is not None and not isinstance(ifs, str) and not (
            isinstance(ifs, dict) and all(isinstance(v, str) for v in ifs.values())):
        raise SuiteError(f"{where}: interfaces must be a table NAME = ROLE (or \"NAME=ROLE,NAME=ROLE\"), "
                         f"not {ifs!r}", fix='interfaces = { eth0 = "client", eth1 = "server" }')


def config_from_args(ruleset: str, *, ipset: str | None = None, interfaces: str | None = None,
                     repetitions: int | None = None, no_rate: bool = False, mix: str | None = None,
                     latency_count: int | None = None) -> RulesetRunConfig:
    if repetitions is not None and repetitions < 1:
        raise SuiteError(f"--repetitions {repetitions} must be at least 1", fix="e.g. --repetitions 3")
    lc = LATENCY_COUNT if latency_count is None else latency_count
    _check_latency(lc, LATENCY_FRACTION, "--latency-count")
    return RulesetRunConfig(ruleset=Path(ruleset), ipset=Path(ipset) if ipset else None,
                            interfaces=parse_interfaces(interfaces) if interfaces else dict(DEFAULT_INTERFACES),
                            repetitions=repetitions or 3, measure_rate=not no_rate, latency_count=lc,
                            class_weights=read_mix_file(Path(mix)) if mix else None,
                            mix_source=str(mix) if mix else None)


def config_from_suite_file(path: Path, repetitions: int | None = None) -> RulesetRunConfig | None:
    """A suite file whose [ruleset] table names a rule set -> its config; None when it has none."""
    import tomllib

    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None  # the ordinary suite loader reports it
    table = data.get("ruleset")
    if table is None:
        return None
    where = f"suite {path.name} [ruleset]"
    if not isinstance(table, dict) or "file" not in table:
        raise SuiteError(f"{where} needs file = \"...\"", fix='[ruleset] file = "my-rules.nft"')
    unknown = sorted(set(table) - set(RULESET_KEYS))
    if unknown:
        raise SuiteError(f"{where} has unknown key(s) {', '.join(unknown)}", fix=f"use {', '.join(RULESET_KEYS)}")
    other = sorted(set(data) - {"ruleset", "name", "description", "repetitions"})
    if other:
        raise SuiteError(f"suite {path.name}: a [ruleset] suite takes only name, description, repetitions "
                         f"and [ruleset] (found {', '.join(other)})", fix="move the other keys to another suite")
    base = path.parent
    reps = repetitions or data.get("repetitions", 3)
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 1:
        raise SuiteError(f"suite {path.name}: repetitions must be a positive integer, not {reps!r}",
                         fix="repetitions = 3")
    _check_table_types(table, where)
    ints = {k: table[k] for k in ("rate_count", "probe_count", "seed") if k in table}
    bad = [k for k, v in ints.items() if isinstance(v, bool) or not isinstance(v, int) or v < 1]
    if bad:
        raise SuiteError(f"{where}: {bad[0]} must be a positive integer, not {ints[bad[0]]!r}",
                         fix=f"{bad[0]} = 100000")
    lat = {"latency_count": table.get("latency_count", LATENCY_COUNT),
           "latency_fraction": table.get("latency_fraction", LATENCY_FRACTION)}
    _check_latency(lat["latency_count"], lat["latency_fraction"], where)
    lat["latency_fraction"] = float(lat["latency_fraction"])  # checked: an int or float in (0, 1]
    if "class_weights" in table and "mix" in table:
        raise SuiteError(f"{where}: give class_weights or mix (a file), not both", fix="keep one of them")
    weights, source = None, None
    if "class_weights" in table:
        weights, source = check_weights(table["class_weights"], f"{where} class_weights"), f"suite {path.name}"
    elif "mix" in table:
        if not isinstance(table["mix"], str):
            raise SuiteError(f"{where}: mix must be a file name", fix='mix = "mix.toml"')
        weights, source = read_mix_file(base / table["mix"]), str(base / table["mix"])
    return RulesetRunConfig(
        class_weights=weights, mix_source=source, **lat,
        ruleset=base / table["file"], ipset=(base / table["ipset"]) if table.get("ipset") else None,
        interfaces=parse_interfaces(table.get("interfaces", DEFAULT_INTERFACES)), repetitions=reps,
        measure_rate=table.get("measure_rate", True), **ints)
