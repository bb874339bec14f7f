"""Report section for kind ``ruleset-class`` (``fwlab run --ruleset``, ``fwlab optimize``): the imported rule set,
its derived traffic classes with the functional check (expected vs observed verdict, the rule
counters that moved), the classes not covered and why, and the cost per class against the
run's no-rule-set reference, most expensive first. Reads ``run.json``'s ``ruleset_import``; for
``fwlab optimize`` its ``ruleset_optimize`` (the rewrite, equivalence, gain with its interval)."""

from __future__ import annotations

from fwlab.report.markup import esc, raw, table
from fwlab.report.sections import Section, register

TOP = 3  #: classes named as the most expensive


def _range(d: dict, scale: float = 1.0, digits: int = 0) -> str:
    if not d or d.get("median") is None:
        return "–"
    f = lambda v: f"{v * scale:,.{digits}f}"  # noqa: E731
    if d.get("n", 0) > 1:
        return raw(f"{f(d['median'])} <span class='muted'>[{f(d['min'])} … {f(d['max'])}]</span>")
    return f(d["median"])


def _us(v) -> str:
    return "–" if v is None else f"{v / 1e3:,.1f}"


def _lat(c: dict, cond: str = "rules") -> str:
    """A class's latency cell: p50 / p99 [us], or why it has none."""
    lat = c.get("latency")
    if not lat:
        return "–"
    if lat.get("missing"):
        return raw(f"<span class='muted'>{esc(lat['missing'])}</span>")
    d = lat.get(cond) or {}
    f = d.get("latency_ns")
    if not f:
        return raw(f"<span class='muted'>{esc(d.get('missing') or 'not measured')}</span>")
    return f"{_us(f['p50'])} / {_us(f['p99'])}"


#: (key, key in records before session 9) of the mix's percentiles: p99.9 is ``p999`` as the engine names it
P_KEYS = (("p50", "p50"), ("p90", "p90"), ("p99", "p99"), ("p999", "p99.9"))


def _added(c: dict) -> str:
    """A class's added median latency [us] (same load in both conditions) with its interval, or why none."""
    lat = c.get("latency") or {}
    a = lat.get("added_p50_ns")
    if not isinstance(a, dict):  # records before the same-load mend held a bare number at unlike loads
        return raw(f"<span class='muted'>{esc(lat.get('added_p50_missing') or '–')}</span>") if lat.get("added_p50_missing") else "–"
    short = f", {100 * a['level']:.0f} %" if a.get("level") is not None and a["level"] < 0.95 else ""
    iv = (f" <span class='muted'>[{_us(a['low'])} … {_us(a['high'])}{short}]</span>" if a.get("low") is not None
          else f" <span class='muted'>({esc(a.get('why') or 'no interval')})</span>")
    return raw(_us(a["median"]) + iv)


def _kns(s: dict | None) -> str:
    """A class's in-kernel cost cell: median [low … high] ns (± %), or why it has none."""
    if not s:
        return raw("<span class='muted'>not measured</span>")
    f = s.get("ns_per_packet")
    if not f:
        return raw(f"<span class='muted'>missing: {esc(s.get('missing') or 'no figure')}</span>")
    rel = f", ±{100 * f['half_width_rel']:.1f} %" if f.get("half_width_rel") is not None else ""
    kind = f"<br><span class='warn'>{esc(s['figure_kind'])}</span>" if s.get("figure_kind") else ""
    return raw(f"{f['median']:,.0f} <span class='muted'>[{f['low']:,.0f} … {f['high']:,.0f}{rel}]</span>{kind}")


def _mark_statement(per: dict) -> str:
    """The mark statement's measured time on the marked copy, as a sentence ('' when none was timed)."""
    ms = next((s.get("mark_statement") for s in per.values() if s.get("mark_statement")), None)
    if not ms:
        return ""
    if ms.get("ns") is None:
        return f" The mark statement's own time: missing ({esc(ms.get('missing'))})."
    return (f" The mark statement's own time (included in those figures): {ms['ns']:,.1f} ns "
            f"[{ms['low']:,.1f} … {ms['high']:,.1f}] ({ms['n']} rounds: the copy that marks twice against the one "
            f"that marks once).")


def _flows(per: dict) -> str:
    """What the new-flow classes' cost packets were: one flow per packet, or one flow repeated (and why)."""
    how = {}
    for s in per.values():
        f = next((x.get("flows") for x in reversed(s.get("counts") or []) if x.get("flows")), None)
        if f and not f.startswith("an established class"):
            how.setdefault("one flow per packet" if f.startswith("one flow per packet") else f, []).append(s["class_id"])
    if not how:
        return ""
    return "New-flow classes: " + "; ".join(f"{', '.join(sorted(ids))}: {esc(k)}" for k, ids in how.items()) + "."


def render_kernel_cost(kc: dict, classes: dict) -> str:
    """Each class's time inside the firewall, timed in the kernel: the figure, its interval and
    precision, referenced or raw, the hooks and chains timed, the floor, and the probe's counts."""
    parts = ["<h3>Time inside the firewall per class (in-kernel)</h3>"]
    per = kc.get("classes") or {}
    if not per:
        parts.append(f"<p class='muted'>Not measured: {esc(kc.get('missing') or 'no class')}.</p>")
        return "\n".join(parts)

    def key(s):
        f = s.get("ns_per_packet")
        return -f["median"] if f else float("inf")
    rows = []
    for s in sorted(per.values(), key=key):
        c = classes.get(s["class_id"]) or {}
        f = s.get("ns_per_packet") or {}
        counts = s.get("counts") or []
        cnt = "; ".join(f"{x.get('sent')}/{x.get('entered')}/{x.get('timed')}" for x in counts[:4])
        delta = ", ".join("–" if x.get("rule_counter_delta") is None else str(x["rule_counter_delta"]) for x in counts[:4])
        prec = f.get("precision")
        rows.append([esc(s["class_id"]), esc(c.get("rule_id") or s.get("rule_id")), esc(s.get("expected")), _kns(s),
                     raw(f"<span class='{'ok' if prec == 'decided' else 'warn'}'>{esc(prec)}</span>") if prec else "–",
                     ("referenced" if s.get("referenced") else "raw") if s.get("ns_per_packet") else "–",
                     raw(esc(", ".join(s.get("hooks") or [])) + f" <span class='muted'>{esc('; '.join(s.get('chains') or []))}</span>"),
                     "–" if s.get("floor_p50_ns") is None else f"{s['floor_p50_ns']:.0f}", cnt, delta])
    parts.append(table(["class", "rule", "verdict", "ns/packet [95 % interval]", "precision", "figure",
                         "hooks (chains) timed", "probe floor [ns]", "sent/entered/timed per round",
                         "rule counter Δ per round (pilot + trial)"], rows, left=3))
    refs = kc.get("references") or {}
    ref_txt = "; ".join(f"IPv{v}: {esc(r[0]) if r[0] else 'none (' + esc(r[1]) + ')'}" for v, r in refs.items())
    load = kc.get("load") or {}
    parts.append(f"<p class='muted'>{esc(kc.get('method'))}; {load.get('duration_s')} s per trial, "
                 f"{load.get('rounds')} rounds. Same-packet reference: {ref_txt}. Precise (decided): the interval's "
                 f"half width is at most 10 % of the figure or 20 ns. {esc(kc.get('dropped'))}.{_mark_statement(per)} "
                 f"{_flows(per)}</p>")
    meth = next((s.get("method") for s in per.values() if s.get("method")), None)
    if meth:
        parts.append(f"<p class='muted'>{esc(meth)}.</p>")
    return "\n".join(parts)


def render_mix(mix: dict) -> str:
    """The whole mix: its weighting, rate, cost and latency."""
    w = mix.get("weights") or {}
    used = {k: v for k, v in w.items() if v > 0}
    how = ("every class alike" if mix.get("source") == "even" else
           f"the profile {esc(mix.get('profile_source') or '')}: " + ", ".join(
               f"{esc(k)} {v:.1%}" for k, v in sorted(used.items(), key=lambda kv: -kv[1])[:12])
           + (" ..." if len(used) > 12 else ""))
    parts = [f"<h3>The whole mix</h3><p>Weighting: {how} ({len(used)} of {len(w)} classes).</p>"]
    lat = mix.get("latency") or {}
    ref_lat = mix.get("reference_latency") or {}

    def pcts(d: dict) -> str:
        f = d.get("latency_ns")
        return " / ".join(_us(f.get(k, f.get(old))) for k, old in P_KEYS) if f else "–"

    kc = mix.get("kernel_cost") or {}
    if kc:
        f = kc.get("ns_per_packet")
        left_k = "; ".join(f"{esc(k)} ({esc(v)})" for k, v in list((kc.get("left_out") or {}).items())[:6])
        parts.append(f"<p><b>Time inside the firewall (in-kernel)</b>: " + (
            f"{f['median']:,.0f} ns/packet <span class='muted'>[{f['low']:,.0f} … {f['high']:,.0f}]</span> "
            f"({esc(f['precision'])}; {kc.get('weight_covered', 0):.0%} of the mix's weight timed"
            + (f"; of which {kc.get('weight_to_drop_verdict', 0):.0%} ({esc(', '.join(kc['to_drop_verdict']))}) "
               f"time to the drop verdict (timed on a marked copy)" if kc.get("to_drop_verdict") else "") + ")" if f else
            f"<span class='muted'>missing: {esc(kc.get('missing'))}</span>") + "</p>"
            + (f"<p class='muted'>Not in the in-kernel mix: {left_k}.</p>" if left_k else ""))
    rows = [["with the rule set", _range(mix.get("rate_pps") or {}, 1e-3, 1), _range(mix.get("cost_ns_per_packet") or {}),
             pcts(lat)],
            ["reference (each class's own: forwarding or drop)", _range(mix.get("reference_rate_pps") or {}, 1e-3, 1),
             "", pcts(ref_lat)]]
    parts.append(table(["", "rate [kpps] (capacity)", "rate-based Δ 1e9/rate [ns/packet]",
                        "latency p50 / p90 / p99 / p99.9 [µs]"], rows, left=1))
    if mix.get("rate_ratio"):
        parts.append(f"<p>Mix rate with the rule set / without: {_gain(mix['rate_ratio'])} (95 %, Fieller).</p>")
    notes = [esc(mix.get("method") or "")]
    if lat:
        notes.append(esc(lat.get("method") or ""))
    for name, d in (("latency", lat), ("reference latency", ref_lat)):
        if d.get("left_out"):
            notes.append(f"{name} leaves out " + "; ".join(f"{esc(k)} ({esc(v)})" for k, v in
                                                          list(d["left_out"].items())[:6])
                         + f" — {d.get('weight_covered', 0):.0%} of the mix's weight is timed")
    parts.append("<p class='muted'>" + ". ".join(n for n in notes if n) + ".</p>")
    return "\n".join(parts)


def render_established(est: dict, costs: list[dict], kernel: dict | None = None, pairs: list | None = None) -> str:
    """New flow and established, side by side: each twin's in-kernel cost beside its new-flow
    class's, then the rate-based figures."""
    kernel = kernel or {}
    pairs = {p["established"]: p["new"] for p in pairs or []}
    twins = list((est or {}).get("classes") or [])
    have = {t["class_id"] for t in twins}
    twins += [{"class_id": e, "rule_id": (kernel.get(e) or {}).get("rule_id"), "expected": (kernel.get(e) or {}).get("expected")}
              for e in pairs if e not in have]
    if not twins and not (est or {}).get("none"):
        return ""
    by_id = {c["class_id"]: c for c in costs}
    rows = []
    for t in twins:
        reply = (t.get("packet") or {}).get("ct_direction") == "reply"  # c3er: the reply direction of c3e
        new, old = pairs.get(t["class_id"], t["class_id"][:-2 if reply else -1]), by_id.get(t["class_id"])
        n = by_id.get(new)
        rows.append([esc(new), esc(t["class_id"]) + (" (reply direction)" if reply else ""), esc(t["rule_id"]),
                     esc(t["expected"]), _kns(kernel.get(new)), _kns(kernel.get(t["class_id"])),
                     _range(n["rate_pps"], 1e-3, 1) if n else "–", _range(old["rate_pps"], 1e-3, 1) if old else "–",
                     _range(n["cost_ns_per_packet"]) if n else "–",
                     _range(old["cost_ns_per_packet"]) if old else raw("<span class='muted'>not measured</span>")])
    parts = ["<h3>New flow and established</h3>"]
    if rows:
        parts.append("<p>Where the rule set tracks connections: each established class (a flow's later packets, "
                     "its flow opened before each trial) beside the new-flow class that opens it.</p>")
        parts.append(table(["new-flow class", "established twin", "twin decided by", "twin verdict",
                             "new, in-kernel [ns/packet]", "established, in-kernel [ns/packet]",
                             "new [kpps]", "established [kpps]", "new, rate-based Δ [ns/packet]",
                             "established, rate-based Δ [ns/packet]"], rows, left=4))
        if (est or {}).get("method") and (est or {}).get("classes"):
            parts.append(f"<p class='muted'>{esc(est.get('method') or '')}.</p>")
    none = (est or {}).get("none") or {}
    if none:
        reasons: dict[str, list[str]] = {}
        for k, v in none.items():
            reasons.setdefault(v, []).append(k)
        parts.append("<p class='muted'>No established twin: " + "; ".join(
            f"{esc(', '.join(ids[:8]))}{' ...' if len(ids) > 8 else ''} ({esc(why)})" for why, ids in reasons.items())
            + ".</p>")
    return "\n".join(parts)


def _ref_kind(c: dict) -> str:
    """Which reference a class's cost is against (records before the drop reference: forwarding)."""
    kind = c.get("reference")
    return "" if kind in (None, "reference") else " <span class='muted'>(drop ref.)</span>"


def _seen(c: dict, p: dict) -> str:
    """Where the probe's packets arrived translated (DNAT, SNAT): the addresses the far side saw."""
    pk = c["packet"]
    other = [a for a in p.get("seen_as") or [] if (a["src"], a["dst"]) != (pk["src"], pk["dst"])]
    if not other:
        return ""
    a = other[0]
    return f" <span class='muted'>seen as {esc(a['src'])} → {esc(a['dst'])}:{a['dport']}</span>"


def _pkt(p: dict) -> str:
    return esc(f"IPv{p['ip_version']} {p['proto']} {p['src']}:{p['sport']} → {p['dst']}:{p['dport']} "
               f"({p['iif']} → {p['oif']}, ct {p['ct_state']})")


def _gain(g: dict | None) -> str:
    if not g or g.get("ratio") is None:
        return "–"
    if g.get("low") is None:
        return raw(f"×{g['ratio']:.2f} <span class='muted'>(no interval: {esc(g.get('why'))})</span>")
    return raw(f"×{g['ratio']:.2f} <span class='muted'>[{g['low']:.2f} … {g['high']:.2f}]</span>")


def render_optimize(opt: dict) -> str:
    """``fwlab optimize``'s record: the rewrite, the equivalence check, the gain."""
    eq = opt.get("equivalence") or {}
    rw = opt.get("rewrite") or {}
    parts = ["<h2 id='optimize'>Rewrite: equivalence and measured gain</h2>",
             table(None, [["original", esc(opt.get("file"))],
                           ["proposal", esc(opt.get("proposal_file")) + (
                               "" if opt.get("proposal_source") == "fwlab" else " (hand-made)")],
                           ["rules", f"{opt.get('rules_before')} → {opt.get('rules_after')}"],
                           ["probes", str(len(opt.get("probes") or []))]])]
    if rw.get("merges"):
        parts.append("<ul>" + "".join(f"<li>{esc(m['text'])}</li>" for m in rw["merges"][:20]) + "</ul>")
    if eq.get("verdict") == "equivalent":
        parts.append(f"<p class='ok'>Equivalent on all {eq.get('probes')} derived probes: identical verdicts in the "
                     f"model and on the real data path.</p>")
    elif eq:
        parts.append(f"<p class='err'>Not equivalent ({esc(eq.get('level'))}, {eq.get('differences')} of "
                     f"{eq.get('probes')} probes differ); first: {esc(eq.get('first_difference'))}. The suggestion "
                     f"is withdrawn.</p>")
    nc = ((opt.get("derivation") or {}).get("original") or {}).get("not_covered") or []
    if nc:
        parts.append("<p class='warn'>Rules no probe covers (equivalence not proven for them): "
                     + "; ".join(f"{esc(n['rule_id'])}: {esc(n['reason'])}" for n in nc[:10]) + "</p>")
    gain = opt.get("gain")
    kg = (gain or {}).get("kernel")
    if kg:
        krows = []
        for g in kg.get("probes") or gain["classes"]:
            pc = (kg.get("per_class") or {}).get(g["class_id"]) or {}
            kgain = (kg.get("classes") or {}).get(g["class_id"]) or {}
            krows.append([esc(g["class_id"]), esc(g["rule_text"] or g["rule_id"]), esc(g["expected"]),
                          _kns(pc.get("original")), _kns(pc.get("proposal")), _gain(kgain),
                          esc(kgain.get("verdict") or "–")])
        mx = kg.get("mix") or {}
        krows.append(["mix", raw(f"{len(mx.get('classes') or [])} classes, evenly"
                      + (f" <span class='muted'>(left out: {esc(', '.join(mx['left_out']))})</span>"
                         if mx.get("left_out") else "")), "", "", "", _gain(mx), esc(mx.get("verdict") or "–")])
        parts.append("<h3>Gain inside the firewall (in-kernel)</h3>" + table(
            ["probe", "rule", "verdict", "original [ns/packet]", "proposal [ns/packet]",
             "gain = original / proposal time (interval)", "decided"], krows, left=3))
        if kg.get("missing"):
            parts.append(f"<p class='warn'>Missing: {esc(kg['missing'])}.</p>")
        parts.append(f"<p class='muted'>The probes the rule sets accept (a drop is entered and never timed inside "
                     f"the firewall). {esc(mx.get('method') or '')}. {esc(kg.get('method'))}.</p>")
        parts.append("<h3>Capacity: gain in rate (secondary)</h3>")
    if gain:
        rows = [[esc(g["class_id"]), esc(g["rule_text"] or g["rule_id"]), esc(g["expected"]),
                 f"{g['traversed_original']} → {g['traversed_proposal']}", _range(g["original_rate_pps"], 1e-3, 1),
                 _range(g["proposal_rate_pps"], 1e-3, 1), _gain(g["gain"])] for g in gain["classes"]]
        mx = gain["mix"]
        rows.append(["mix", f"{len(mx['classes'])} classes, evenly", "", "", _range(mx["original_rate_pps"], 1e-3, 1),
                     _range(mx["proposal_rate_pps"], 1e-3, 1), _gain(mx["gain"])])
        parts.append(table(["probe", "rule", "verdict", "rules compared", "original [kpps]", "proposal [kpps]",
                             "gain (95 % interval)"], rows, left=3))
        parts.append(f"<p class='muted'>{esc(gain.get('method'))}; rounds alternate original and proposal "
                     f"(A B, B A, ...). Taken on a shared machine: compare within this run.</p>")
    elif opt.get("rate_missing"):
        parts.append(f"<p class='muted'>Gain not measured: {esc(opt['rate_missing'])}.</p>")
    return "\n".join(parts)


def render(run: dict, trials: list[dict]) -> str | None:
    if run.get("ruleset_optimize"):
        return render_optimize(run["ruleset_optimize"])
    imp = run.get("ruleset_import")
    if not imp:
        return None
    der = imp.get("derivation") or {}
    classes = {c["class_id"]: c for c in der.get("classes", [])}
    est = imp.get("established") or {}
    classes.update({c["class_id"]: c for c in est.get("classes") or []})
    probes = imp.get("probes") or []
    parts = ["<h2 id='ruleset'>Imported rule set: classes, verdicts, cost per class</h2>",
             table(None, [["file", esc(imp.get("file"))], ["loaded as", esc(imp.get("family"))],
                           ["interfaces", esc(", ".join(f"{k} = {v}" for k, v in (imp.get("interfaces") or {}).items()))],
                           ["load time", f"{(imp.get('load_s') or 0) * 1e3:.1f} ms"],
                           ["digest (kernel listing)", raw(f"<code>{esc((imp.get('digest') or '')[:16])}</code>")],
                           ["classes", f"{len(classes)} derived, {len(der.get('not_covered', []))} rules not covered"],
                           ["sampling", esc(der.get("sampling"))]])]
    if not classes:
        parts.append("<p class='err'>No traffic class was derived: nothing was checked or measured (the run exits "
                     "1). The table below says why each rule is not covered.</p>")
    for n in list(imp.get("interface_notes") or []) + list(der.get("notes", [])):
        parts.append(f"<p class='warn'>{esc(n)}</p>")
    bad = [p for p in probes if p["status"] != "match"]
    if imp.get("not_sent"):
        parts.append("<p class='warn'>Derived but not sent: " + "; ".join(
            f"{esc(k)} ({esc(v)})" for k, v in imp["not_sent"].items()) + ".</p>")
    if probes:
        verdict = ("<p class='ok'>Every class's observed verdict equals the rule set's.</p>" if not bad else
                   "<p class='err'>Findings: " + "; ".join(
                       f"{esc(p['class_id'])} ({esc(classes.get(p['class_id'], {}).get('rule_id', 'class not in the record'))}): {esc(p['status'])} — "
                       f"{esc(p['why'])}" for p in bad) + "</p>")
        parts.append("<h3>Functional check (before any rate)</h3>" + verdict)
        rows = []
        for p in probes:
            c = classes.get(p["class_id"])
            if c is None:  # a record without the class it checked: the findings above name it
                continue
            cls = "ok" if p["status"] == "match" else "err"
            rows.append([esc(c["class_id"]), esc(c["rule_id"]), esc(c["rule_text"]), _pkt(c["packet"]),
                         esc(c["expected"] + (" (reject)" if c["terminal"] == "reject" else "")),
                         raw(f"{esc(p['observed'])} ({p['arrived']}/{p['sent']})" + _seen(c, p)),
                         "–" if p["rule_counter_delta"] is None else p["rule_counter_delta"],
                         raw(f"<span class='{cls}'>{esc(p['status'])}</span>")])
        parts.append(table(["class", "rule", "rule text", "probe packet", "rule set says", "observed (arrived/sent)",
                             "rule counter Δ", "check"], rows, left=4))
        if any("interface_rx_delta" in p for p in probes):
            parts.append("<p class='muted'>Arrived: the probe's own packets, counted exactly at the far side's bed "
                         "host (an nft set keyed by addresses and ports, tcp/udp/icmp only), so the DUT's ARP and "
                         "neighbour discovery on the link are not counted; a class that fails its check is left "
                         "out of the costs and the mix.</p>")
    nc = der.get("not_covered") or []
    if nc:
        parts.append("<h3>Not covered</h3>" + table(["rule", "rule text", "why"],
                                                     [[esc(n["rule_id"]), esc(n["rule_text"]), esc(n["reason"])] for n in nc],
                                                     left=3))
    elif not classes:
        parts.append("<h3>Not covered</h3><p class='muted'>No rule on the forward path to list: "
                     + esc("; ".join(der.get("notes") or []) or "the rule set holds no rule a forwarded packet meets")
                     + ".</p>")
    costs = imp.get("costs") or []
    parts.append("<h3>Cost per class</h3>")
    kc = imp.get("kernel_cost") or {}
    kper = kc.get("classes") or {}
    ktop = sorted((s for s in kper.values() if s.get("ns_per_packet")), key=lambda s: -s["ns_per_packet"]["median"])[:TOP]
    if ktop:
        parts.append("<p>Most expensive classes inside the firewall (in-kernel): " + "; ".join(
            f"<b>{esc(s['class_id'])}</b> ({esc((classes.get(s['class_id']) or {}).get('rule_id') or s.get('rule_id'))}: "
            f"<code>{esc((classes.get(s['class_id']) or {}).get('rule_text') or '')}</code>) {_kns(s)} ns/packet"
            for s in ktop) + ".</p>")
    if kc:
        parts.append(render_kernel_cost(kc, classes))
    if not costs:
        parts.append(f"<p class='muted'>Rates not measured: {esc(imp.get('rate_missing') or 'no class')}.</p>")
        if kper:
            parts.append(render_established(est, [], kper, kc.get("established")))
        if (imp.get("mix") or {}).get("kernel_cost"):
            parts.append(render_mix(imp["mix"]))
        return "\n".join(parts)
    rate = imp.get("rate") or {}
    parts.append("<h3>Capacity: rates at the engine's maximum (rate-based figures)</h3>")
    top = sorted((c for c in costs if c["cost_ns_per_packet"]["median"] is not None),
                 key=lambda c: -c["cost_ns_per_packet"]["median"])[:TOP]
    if top and not ktop:
        parts.append("<p>Most expensive classes (rate-based): " + "; ".join(
            f"<b>{esc(c['class_id'])}</b> ({esc(c['rule_id'])}: <code>{esc(c['rule_text'])}</code>) "
            f"{_range(c['cost_ns_per_packet'])} ns/packet over {c['traversed_rules']} rules compared"
            for c in top) + ".</p>")
    parts.append(f"<p class='muted'>These are rates of the whole path (generator and DUT share the host's CPUs), "
                 f"kept as the capacity figure; the cost per class is the in-kernel figure above. "
                 f"{esc(rate.get('method'))}; {rate.get('count')} frames per measurement, "
                 f"{rate.get('repetitions')} rounds alternating the rule set and the references. Each class is "
                 f"measured against its own reference: a class the rule set accepts against no rule set "
                 f"(forwarding), a class it drops or rejects against the drop reference (one forward-hook chain "
                 f"with policy drop), so a drop's cost is the cost of deciding to drop, never a saving against "
                 f"forwarding. Rate-based Δ = 1e9/rate − 1e9/reference rate, per round; median [min … max] of the rounds. "
                 f"A rule set that drops earlier than the forward hook (prerouting, ingress) can still come out "
                 f"below the drop reference. Taken on a shared machine: compare within this run.</p>")
    if imp.get("cost_note"):
        parts.append(f"<p class='warn'>Note (rate-based figures): {esc(imp['cost_note'])}; the in-kernel cost times "
                     f"the rule set's chains only, not conntrack's own hooks.</p>")
    rows = [[esc(c["class_id"]), esc(c["rule_id"]), esc(c["expected"]), c["traversed_rules"],
             _kns(c.get("kernel_cost") or kper.get(c["class_id"])) if kc else "–",
             _range(c["rate_pps"], 1e-3, 1),
             raw(_range(c["reference_rate_pps"], 1e-3, 1) + _ref_kind(c)),
             _range(c["cost_ns_per_packet"]), _lat(c), _lat(c, "reference"), _added(c)] for c in costs]
    parts.append(table(["class", "rule", "verdict", "rules compared", "in-kernel [ns/packet]", "rate [kpps]",
                         "reference [kpps]", "rate-based Δ 1e9/rate [ns/packet]", "latency p50 / p99 [µs]",
                         "reference latency [µs]", "added p50 [µs] (95 %)"], rows, left=3))
    parts.append(render_established(est, costs, kper, kc.get("established")))
    lt = imp.get("latency") or {}
    if any(c.get("latency") for c in costs):
        parts.append(f"<p class='muted'>Latency: {esc(lt.get('method'))}; {lt.get('count')} frames per trial at "
                     f"{lt.get('fraction')} of the lower of the class's two rates in the round, the same load with "
                     f"and without the rule set; one-way, percentiles of the rounds' merged histograms; added p50 = "
                     f"median over the rounds of p50 with the rule set − p50 without, with its 95 % interval.</p>")
    elif imp.get("latency_missing"):
        parts.append(f"<p class='muted'>Latency not measured: {esc(imp['latency_missing'])}.</p>")
    if (imp.get("mix") or {}).get("rate_pps"):
        parts.append(render_mix(imp["mix"]))
    left = {**(imp.get("left_out") or {}), **((imp.get("mix") or {}).get("left_out") or {})}
    if left:
        parts.append("<p class='err'>Left out of the costs and the mix: " + "; ".join(
            f"{esc(k)} ({esc(v)})" for k, v in left.items()) + ".</p>")
    return "\n".join(parts)


#: run-level: a run whose rule set gave no class has no trial, and its report still shows why
register(Section(kind="ruleset-class", title="Imported rule set", render=render, order=5, run_level=True))
