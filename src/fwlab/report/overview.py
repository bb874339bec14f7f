"""The overview at the top of every report: what was tested, on what host, with which rule
sets, and the headline findings in plain sentences computed from the record.

Owns: those sentences and the overview's HTML (templates/overview.html.j2). Reads the record (run.json, the trials, its
``RecordState`` and the curves of ``fwlab.results.curves``) only; the numbers are medians over
repetitions.
"""

from __future__ import annotations

import html
import statistics

from markupsafe import Markup

from fwlab.report.nics import offloads_text
from fwlab.stats.ratio import ratio_to_zero
from fwlab.published.compare import LIMITS
from fwlab.results.curves import METRIC_INFO, Curve, primary_metric
from fwlab.results.store import RecordState, state_without_plan
from fwlab.report import kernel_cost, templating
from fwlab.report.summary import noise_floor
from fwlab.results.trial import TrialRecord, as_records

_RATE_WORD = {"rx_pps": "forwards", "throughput_bps": "carries", "throughput_pps": "passes",
              "transactions_per_s": "completes"}
#: the limits the headline names (`fwlab.published.compare.LIMITS`, the one table): those that
#: undecide a finding, and an emulated wire (testbed.shaping) capping the reference -- the seeds'
#: regime, so it leaves verdicts decided, but a percentage must say it
_NAMED_LIMITS = set(LIMITS)


def reference_limit(codes, reps: int | None = None) -> str:
    """' [0-rule reference sender-CPU-bound (cpu-saturated)]' when a limiting quality flag
    (`fwlab.published.compare.LIMITS`: those of LIMIT_FLAGS, and `link-limited`) is among the 0-rule reference's
    flag `codes`, else ''. Such a percentage is the generator's, a CPU's or the wire's as much as
    the firewall's."""
    hit = sorted({c for c in codes if c in _NAMED_LIMITS})
    if not hit:
        return ""
    if reps:  # with how many of the reference's `reps` repetitions carry each
        return figure_limit(codes, reps).replace(" [figure ", " [0-rule reference ", 1)
    return " [0-rule reference " + ", ".join(f"{LIMITS[c].headline} ({c})" for c in hit) + "]"


AT_LEAST = "max-load-passed"
"""The flag of a figure that only reached the bed's maximum (the search's largest load passed; an
rfc2544 trial's ``throughput_at_least``): the figure is a lower bound, stated "≥ x"."""


def figure_limit(codes, reps: int) -> str:
    """' [figure at the search's maximum load (max-load-passed, 2 of 3 repetitions)]': every limiting
    quality flag (`fwlab.published.compare.LIMITS`) among a figure's repetitions' flag `codes`
    (one entry per flagged repetition), with how many of its `reps` repetitions carry it; '' for none."""
    counts: dict[str, int] = {}
    for c in codes:
        if c in _NAMED_LIMITS:
            counts[c] = counts.get(c, 0) + 1
    if not counts:
        return ""
    return " [figure " + ", ".join(f"{LIMITS[c].headline} ({c}, {min(k, reps) if reps else k} of {reps} "
                                   f"repetition{'s' if reps != 1 else ''})" for c, k in sorted(counts.items())) + "]"


def bound_prefix(figure_at_least: bool, reference_at_least: bool) -> str:
    """How a ratio of a figure to its 0-rule reference is bounded when either only reached the
    bed's maximum (a lower bound): '≥ ' when the figure did, '≤ ' when the reference did, '' when
    neither or both (then neither way is known; the named flags say why)."""
    if figure_at_least and not reference_at_least:
        return "≥ "
    if reference_at_least and not figure_at_least:
        return "≤ "
    return ""


def _e(x) -> str:
    return html.escape(str(x))


def _pct(v: float) -> str:
    return f"{v:.0f} %" if v >= 10 else f"{v:.1f} %"


def _kpps(vals: list[float], at_least: bool) -> str:
    """'≥ 812.3' (kpps) for a mean that only reached the bed's maximum, else '412.0'."""
    return ("≥ " if at_least else "") + f"{statistics.fmean(vals) / 1e3:,.1f}"


def _pct_ci(r) -> str:
    """'7 % (95 % CI 5–9 %)' from a `RatioInterval` (mean over the 0-rule reference's mean)."""
    v, lo, hi = r.pct()
    if min(r.n_num, r.n_den) < 2:
        return f"{_pct(v)} (no interval: {min(r.n_num, r.n_den)} repetition)"
    if lo is None or hi is None:
        return f"{_pct(v)} (no interval: {r.why})"
    return f"{_pct(v)} (95 % CI {_pct(lo).removesuffix(' %')}–{_pct(hi)})"


def noise_floor_sentences(cs: list[Curve]) -> list[str]:
    """Per shared 0-rule reference: how far apart the layouts' identical 0-rule sets measured."""
    out = []
    for r in noise_floor(cs):
        if r["spread_pct"] is None:
            continue
        what = METRIC_INFO[r["metric"]][0]
        p = f"Welch p = {r['p_value']:.2g}" if r["p_value"] is not None else r["verdict"]
        out.append(f"{r['traffic']}: {r['backend']} {' and '.join(r['layouts'])} load the same rule set at 0 "
                   f"rules, yet their 0-rule {what} measured {r['spread_pct']:.1f} % apart ({p}): the run's noise "
                   f"floor; they share one 0-rule reference ({r['n']} repetitions).")
    return out


def headline_sentences(cs: list[Curve], limit: int = 12) -> list[str]:
    """Per traffic and configuration with rules: a rule count's rate as % of the same
    configuration's 0-rule reference, with the Fieller interval, e.g. 'nftables linear at 10000
    rules forwards 7 % (95 % CI 5–9 %) of its 0-rule packet rate (IPv4 UDP 64 B, routed)'. One
    sentence never sets configurations at different rule counts side by side: all are stated at
    the largest rule count they all measured; with none in common (e.g. a truncated record), one
    sentence per rule count."""
    out: list[str] = []
    by_traffic: dict[str, list[Curve]] = {}
    for c in cs:
        if c.k["backend"] != "none":
            by_traffic.setdefault(c.traffic_label, []).append(c)
    for tl, group in by_traffic.items():
        measured = []  # (curve, metric, rule counts > 0 with a ratio to the 0-rule point)
        for c in group:
            m = primary_metric(c)
            ns = {n for n in c.points if n > 0 and ratio_to_zero(c, m, n) is not None}
            if ns:
                measured.append((c, m, ns))
        if not measured:
            continue
        common = set.intersection(*(ns for _, _, ns in measured))
        by_rules: dict[int, list[tuple]] = {}
        for c, m, ns in measured:
            n = max(common) if common else max(ns)
            p, ref = c.points[n], c.reference()
            up, ref_up = AT_LEAST in p.flags, AT_LEAST in ref.flags
            pct = bound_prefix(up, ref_up) + _pct_ci(ratio_to_zero(c, m, n))
            lim = ""
            if m == "throughput_pps":  # the search's figures themselves, "≥" where only the bed's maximum
                lim += f" ({_kpps(p.values[m], up)} vs {_kpps(ref.values[m], ref_up)} kpps, means)"
            if up and ref_up:
                lim += " (both have searches that only reached the bed's maximum: the ratio is bounded neither way)"
            lim += figure_limit(p.flags, len(p.values.get(m) or [])) + reference_limit(ref.flags,
                                                                                     len(ref.values.get(m) or []))
            by_rules.setdefault(n, []).append((c.label, n, pct, m, lim))
        for n in sorted(by_rules, reverse=True):
            out.append(_headline(tl, by_rules[n]))
            if len(out) >= limit:
                return out
    return out


def _headline(tl: str, parts: list[tuple]) -> str:
    """One sentence over configurations at one rule count: (label, rules, % of the 0-rule
    reference with its interval as text, metric, reference limit)."""
    m = parts[0][3]
    what = METRIC_INFO[m][0]
    first = parts[0]
    s = (f"{first[0]} at {first[1]:,} rules {_RATE_WORD.get(m, 'reaches')} {first[2]} of its 0-rule {what}"
         f"{first[4]}")
    rest = [f"{lab} at {n:,} rules {p}{lim}" for lab, n, p, _, lim in parts[1:]]
    if rest:
        s += "; " + "; ".join(rest)
    return f"{tl}: {s}."


def transaction_sentences(trials: list[TrialRecord], limit: int = 6) -> list[str]:
    """Per firewall configuration with rules: TPM at the largest rule count as % of 0 rules,
    at the largest client load measured."""
    trials = as_records(trials)
    tx = [t for t in trials if t.kind == "transactions" and not t.error and t.metrics]
    if not tx:
        return []
    load = max(int(t.streams or 1) for t in tx)
    acc: dict[tuple, dict[int, list[float]]] = {}
    ref_flags: dict[tuple, list[str]] = {}
    for t in tx:
        if int(t.streams or 1) != load or t.metric("tpm") is None or t.backend == "none":
            continue
        key = (t.backend, t.layout, t.size_bytes, t.traffic)
        acc.setdefault(key, {}).setdefault(t.rules, []).append(float(t.metric("tpm")))
        if t.rules == 0:
            ref_flags.setdefault(key, []).extend(t.flag_codes)
    out = []
    for key, top, base, v in _largest_vs_zero(acc, limit):
        be, lay, size, traffic = key
        what = "blocked URLs" if be == "proxy" else "rules"
        out.append(f"{be} {lay} at {top:,} {what} completes {_pct(100 * v / base)} of the transactions per "
                   f"minute it completes with 0 {what}{reference_limit(ref_flags.get(key, []))}, at {load} clients "
                   f"({traffic}" + (f", {size / 1000:g} kB objects)." if size else ")."))
    return out


def _largest_vs_zero(acc: dict[tuple, dict[int, list[float]]], limit: int) -> list[tuple]:
    """(key, largest count, median at 0, median at the largest count) for each key of
    `acc` = {key: {count: [values]}} that has a non-zero 0-count median and a larger count; sorted
    by key, at most `limit`."""
    out = []
    for key, pts in sorted(acc.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        if 0 not in pts or len(pts) < 2:
            continue
        top = max(pts)
        base, v = statistics.median(pts[0]), statistics.median(pts[top])
        if base:
            out.append((key, top, base, v))
        if len(out) >= limit:
            break
    return out


def connection_sentences(trials: list[TrialRecord], limit: int = 6) -> list[str]:
    """Per firewall configuration with rules: the connection setup rate at the largest rule count
    as % of 0 rules (medians over repetitions)."""
    trials = as_records(trials)
    acc: dict[tuple, dict[int, list[float]]] = {}
    ref_flags: dict[tuple, list[str]] = {}
    for t in trials:
        if t.kind != "connections" or t.error or t.metric("conn_rate_cps") is None \
                or t.backend == "none":
            continue
        key = (t.mode, t.backend, t.layout, bool(t.stateful_shortcut))
        acc.setdefault(key, {}).setdefault(t.rules, []).append(float(t.metric("conn_rate_cps")))
        if t.rules == 0:
            ref_flags.setdefault(key, []).extend(t.flag_codes)
    return [f"{key[1]} {key[2]} ({key[0]}{', stateful shortcut on' if key[3] else ''}) at {top:,} rules sets up "
            f"{_pct(100 * v / base)} of the connections per second it sets up with 0 rules "
            f"({v:,.0f} vs {base:,.0f}/s){reference_limit(ref_flags.get(key, []))}."
            for key, top, base, v in _largest_vs_zero(acc, limit)]


def quality_sentence(trials: list[TrialRecord]) -> str:
    trials = as_records(trials)
    n = len(trials)
    err = sum(1 for t in trials if t.error)
    codes: dict[str, int] = {}
    for t in trials:
        for c in t.flag_codes:
            codes[c] = codes.get(c, 0) + 1
    s = f"{n - err} of {n} trials measured"
    s += f", {err} missing (reasons under Quality flags)" if err else ""
    if codes:
        s += "; flagged: " + ", ".join(f"{k} ({v})" for k, v in sorted(codes.items()))
    else:
        s += "; no trial was flagged"
    return s + "."


def trial_length(suite: dict) -> str:
    """A trial's length as the suite states it: its duration [s], or what a count-based trial holds
    (``trial_length``: an imported rule set's class trials), never 'None s'."""
    if suite.get("duration_s") is not None:
        return f"{suite['duration_s']} s"
    return suite.get("trial_length") or "length not recorded"


def _rule_sets(run: dict, trials: list[TrialRecord]) -> str:
    trials = as_records(trials)
    acc: dict[tuple, set[int]] = {}
    for t in trials:
        acc.setdefault((t.backend, t.layout, bool(t.stateful_shortcut)), set()).add(t.rules)
    parts = []
    for (be, lay, sc), ns in sorted(acc.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        if be == "none":
            parts.append("no firewall (reference)")
            continue
        if be == "imported":  # a user's file loaded verbatim: its size is the file's, not a generated count
            parts.append("the imported rule set" + ("" if lay == "imported" else f" ({lay})"))
            continue
        if be == "drop-reference":
            parts.append("drop reference (a forward-hook chain with policy drop, no rule)")
            continue
        what = "blocked URLs" if be == "proxy" else "rules"
        parts.append(f"{be} {lay}{' with established,related accept first' if sc else ''}: "
                     f"{', '.join(f'{n:,}' for n in sorted(ns))} {what}")
    return "; ".join(parts) or "–"


def _traffic(suite: dict) -> str:
    items = []
    for t in suite.get("traffic") or []:
        sizes = [s for s in t.get("sizes") or [] if s]
        s = f"{t.get('kind')} ({t.get('tool')})"
        if sizes:
            s += " " + "/".join(str(x) for x in sizes) + " B"
        if (t.get("streams") or 1) > 1:
            s += f" x{t['streams']} streams"
        if t.get("rate_bps"):
            s += f" at {t['rate_bps'] / 1e6:g} Mbit/s"
        items.append(s)
    return "; ".join(items)


def _wires(suite: dict) -> str:
    """'; emulated wires: 100mbit, 250us one-way delay each' when the suite emulates its wires
    (a list of link rates: '100mbit / unshaped (a bed each)')."""
    rate = suite.get("link_rate")
    if isinstance(rate, list):
        rate = " / ".join("unshaped" if r in (None, "none") else str(r) for r in rate) + " (a bed each)"
    parts = [p for p in (rate, suite.get("link_delay") and
                         f"{suite['link_delay']} one-way delay (delay line)") if p]
    return f"; emulated wires: {', '.join(parts)} each" if parts else ""


def render_overview(run: dict, trials: list[TrialRecord], cs: list[Curve], published_html: list[str],
                    state: RecordState | None = None) -> str:
    trials = as_records(trials)
    suite = (run.get("suite") or {}).get("parsed") or {}
    host = run.get("host") or {}
    state = state or state_without_plan(run, trials)
    rows = [
        ("record", Markup(f"<span class='{'ok' if state.complete else 'warn'}'>{_e(state.sentence())}</span>")),
        ("tested", suite.get("description") or suite.get("name")),
        ("test bed", f"modes {', '.join(suite.get('mode') or [])}; IPv{'/'.join(str(v) for v in suite.get('ip_versions') or [])}; "
                     f"device model {suite.get('device_model', 'veth')}; offloads {offloads_text(suite.get('offloads'))}"
                     f"{_wires(suite)}"),
        ("traffic", f"{_traffic(suite)}; {trial_length(suite)} x {suite.get('repetitions')} repetitions"),
        ("rule sets", _rule_sets(run, trials)),
        ("host", f"{host.get('cpu_model')}, {host.get('cpus')} CPUs, {(host.get('memory_kib') or 0) // 1048576} GiB, "
                 f"Linux {host.get('kernel')}; fwlab {host.get('fwlab_version')} ({host.get('fwlab_git_revision')})"),
        ("quality", quality_sentence(trials)),
    ]
    # the firewall's own time per packet first: timed in the kernel, it is the run's steadiest cost figure
    in_kernel = kernel_cost.sentences(trials)
    sentences = in_kernel + headline_sentences(cs) + transaction_sentences(trials) + connection_sentences(trials)
    return str(templating.render("overview.html.j2", rows=rows, state=state, sentences=sentences,
                                 floor=noise_floor_sentences(cs), in_kernel=bool(in_kernel),
                                 published=bool(published_html)))
