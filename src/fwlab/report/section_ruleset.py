"""Report section for kind ``ruleset-class`` (``fwlab run --ruleset``): the imported rule set,
its derived traffic classes with the functional check (expected vs observed verdict, the rule
counters that moved), the classes not covered and why, and the cost per class against the
run's no-rule-set reference, most expensive first. Reads ``run.json``'s ``ruleset_import``."""

from __future__ import annotations

from fwlab.report.html import _table, esc
from fwlab.report.sections import Section, register

TOP = 3  #: classes named as the most expensive


def _range(d: dict, scale: float = 1.0, digits: int = 0) -> str:
    if not d or d.get("median") is None:
        return "–"
    f = lambda v: f"{v * scale:,.{digits}f}"  # noqa: E731
    if d.get("n", 0) > 1:
        return f"{f(d['median'])} <span class='muted'>[{f(d['min'])} … {f(d['max'])}]</span>"
    return f(d["median"])


def _pkt(p: dict) -> str:
    return esc(f"IPv{p['ip_version']} {p['proto']} {p['src']}:{p['sport']} → {p['dst']}:{p['dport']} "
               f"({p['iif']} → {p['oif']}, ct {p['ct_state']})")


def render(run: dict, trials: list[dict]) -> str | None:
    imp = run.get("ruleset_import")
    if not imp:
        return None
    der = imp.get("derivation") or {}
    classes = {c["class_id"]: c for c in der.get("classes", [])}
    probes = imp.get("probes") or []
    parts = ["<h2 id='ruleset'>Imported rule set: classes, verdicts, cost per class</h2>",
             _table(None, [["file", esc(imp.get("file"))], ["loaded as", esc(imp.get("family"))],
                           ["interfaces", esc(", ".join(f"{k} = {v}" for k, v in (imp.get("interfaces") or {}).items()))],
                           ["load time", f"{(imp.get('load_s') or 0) * 1e3:.1f} ms"],
                           ["digest (kernel listing)", f"<code>{esc((imp.get('digest') or '')[:16])}</code>"],
                           ["classes", f"{len(classes)} derived, {len(der.get('not_covered', []))} rules not covered"],
                           ["sampling", esc(der.get("sampling"))]])]
    for n in der.get("notes", []):
        parts.append(f"<p class='warn'>{esc(n)}</p>")
    bad = [p for p in probes if p["status"] != "match"]
    if probes:
        verdict = ("<p class='ok'>Every class's observed verdict equals the rule set's.</p>" if not bad else
                   "<p class='err'>Findings: " + "; ".join(
                       f"{esc(p['class_id'])} ({esc(classes[p['class_id']]['rule_id'])}): {esc(p['status'])} — "
                       f"{esc(p['why'])}" for p in bad) + "</p>")
        parts.append("<h3>Functional check (before any rate)</h3>" + verdict)
        rows = []
        for p in probes:
            c = classes[p["class_id"]]
            cls = "ok" if p["status"] == "match" else "err"
            rows.append([esc(c["class_id"]), esc(c["rule_id"]), esc(c["rule_text"]), _pkt(c["packet"]),
                         esc(c["expected"] + (" (reject)" if c["terminal"] == "reject" else "")),
                         f"{esc(p['observed'])} ({p['arrived']}/{p['sent']})",
                         "–" if p["rule_counter_delta"] is None else p["rule_counter_delta"],
                         f"<span class='{cls}'>{esc(p['status'])}</span>"])
        parts.append(_table(["class", "rule", "rule text", "probe packet", "rule set says", "observed (arrived/sent)",
                             "rule counter Δ", "check"], rows, left=4))
    nc = der.get("not_covered") or []
    if nc:
        parts.append("<h3>Not covered</h3>" + _table(["rule", "rule text", "why"],
                                                     [[esc(n["rule_id"]), esc(n["rule_text"]), esc(n["reason"])] for n in nc],
                                                     left=3))
    costs = imp.get("costs") or []
    parts.append("<h3>Cost per class</h3>")
    if not costs:
        parts.append(f"<p class='muted'>Rates not measured: {esc(imp.get('rate_missing') or 'no class')}.</p>")
        return "\n".join(parts)
    rate = imp.get("rate") or {}
    top = [c for c in costs if c["cost_ns_per_packet"]["median"] is not None][:TOP]
    if top:
        parts.append("<p>Most expensive classes: " + "; ".join(
            f"<b>{esc(c['class_id'])}</b> ({esc(c['rule_id'])}: <code>{esc(c['rule_text'])}</code>) "
            f"{_range(c['cost_ns_per_packet'])} ns/packet over {c['traversed_rules']} rules compared"
            for c in top) + ".</p>")
    parts.append(f"<p class='muted'>{esc(rate.get('method'))}; {rate.get('count')} frames per measurement, "
                 f"{rate.get('repetitions')} rounds alternating rule set and reference (no rule set). Cost = "
                 f"1e9/rate − 1e9/reference rate, per round; median [min … max] of the rounds. A dropped class can "
                 f"cost less than forwarding (negative). Taken on a shared machine: compare within this run.</p>")
    if imp.get("cost_note"):
        parts.append(f"<p class='warn'>Note: {esc(imp['cost_note'])}.</p>")
    rows = [[esc(c["class_id"]), esc(c["rule_id"]), esc(c["expected"]), c["traversed_rules"],
             _range(c["rate_pps"], 1e-3, 1), _range(c["reference_rate_pps"], 1e-3, 1),
             _range(c["cost_ns_per_packet"])] for c in costs]
    parts.append(_table(["class", "rule", "verdict", "rules compared", "rate [kpps]", "reference [kpps]",
                         "cost [ns/packet]"], rows, left=3))
    return "\n".join(parts)


register(Section(kind="ruleset-class", title="Imported rule set", render=render, order=5))
