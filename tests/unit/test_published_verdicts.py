"""Every published finding reaches all three verdicts: for each finding of each seed study there are
synthetic records that make it reproduced, not reproduced and inconclusive, both within the noise
and by a limiting flag (the findings this bed cannot decide are 'not testable here' with their
reason instead; `OUTCOMES` says which finding reaches what, and why where it is not all of them).
A limiting quality flag on the trials a finding reads makes any decided verdict inconclusive,
naming the flag and the trials; the verdicts land in findings.json beside the record. No root, no
traffic."""

from __future__ import annotations

import ast
import copy
import fnmatch
import importlib
import inspect
import json
import re
import shutil

import pytest
from goldens import GOLDEN
from test_published import seed002_trials, tr
from test_published_cost import s000_cost, s001_cost
from test_published_intervals import s000_flood
from test_published_intervals import s004 as s004_cv
from test_published_new_kinds import (  # noqa: F401  (fast_probes is a fixture)
    capacity_trial,
    capped_capacity,
    fast_probes,
    probed_during,
    probes_end_early,
    seed000_trials,
    seed004_trials,
    stalled_trials,
)

from fwlab.published.compare import (
    FINDINGS_FILE,
    INCONCLUSIVE,
    LIMIT_FLAGS,
    NOT_MEASURED,
    NOT_REPRODUCED,
    NOT_TESTABLE,
    REPRODUCED,
    Finding,
    compare_study,
    limit_reason,
    write_findings,
)
from fwlab.published.model import study_names
from fwlab.report import write_report

NOISE = "inconclusive: within the noise"
"""Undecided by the figures: an interval across the limit, a difference within the noise, one repetition."""
FLAG = "inconclusive: a limiting flag"
"""Decided by the figures, undone by a limiting quality flag on the trials read (`Finding.judge`)."""
BED = "inconclusive: the bed or the procedure"
"""Undecided for a reason the finding names that is not noise: the bed cannot reach the seed's regime,
the probes ended early, a search's lower bound does not reach past the other mode."""
ALL = {REPRODUCED, NOT_REPRODUCED, NOISE, FLAG}

OUTCOMES: dict[str, set[str]] = {
    # '*': a part of the id taken from the record (the netfilter configuration, the layout)
    "seed-000/tcp-flat/*": ALL,
    "seed-000/udp-flat-to-200/*": ALL,
    "seed-000/udp-collapse/*": ALL,
    # the in-kernel clock's per-rule slope of one-way UDP (fwlab.published.cost)
    "seed-000/udp-rule-walk-cost/*": ALL,
    # the placeholder when the run has no firewall at 0 and more rules: never decided
    "seed-000/rule-count": {NOT_MEASURED},
    "seed-000/attack-about-half": ALL,
    "seed-000/attack-firewall-off-lower": ALL,
    "seed-000/attack-many-rules-worse": ALL,
    "seed-001/flat-up-to-5000/*": ALL,
    "seed-001/effect-above-5000/*": ALL,
    # the in-kernel time 10,000 rules add against 1,000 (fwlab.published.cost)
    "seed-001/effect-above-5000-cost/*": ALL,
    "seed-001/bridge-above-gateway": ALL,
    "seed-001/bidir-half-at-small-frames": ALL,
    "seed-001/bridge-holds-more": ALL | {BED},
    # reads what stopped each search, not a figure with a spread (no noise), and on the host's fixed
    # nf_conntrack_max stopping at the table cannot show that memory sets it: never reproduced here
    "seed-001/sessions-set-by-memory": {NOT_TESTABLE, NOT_REPRODUCED, FLAG},
    "seed-002/100-rules-no-effect": ALL,
    "seed-002/url-blocking-no-effect": ALL,
    "seed-002/more-clients-more-tpm": ALL | {BED},
    "seed-003/ipv6-tcp-higher": ALL,
    "seed-003/ipv4-better": ALL,
    # 1 Mbit/s on a multi-Gbit/s path: decided only where 1 Mbit/s is a fair share of the path
    "seed-003/udp-1m-same": ALL | {NOT_TESTABLE},
    "seed-003/ipv4-less-jitter": ALL,
    "seed-003/ipv4-shorter-delay": ALL,
    # a window limits only a path whose bandwidth-delay product exceeds it
    "seed-003/small-window-slower": ALL | {NOT_TESTABLE},
    "seed-004/small-set-keeps-cross": ALL | {BED},
    "seed-004/large-sets-fall-with-streams": ALL,
    # the longest run against a fixed 2 x, no interval: undecided only when direct runs overran too
    "seed-004/many-streams-stall": {REPRODUCED, NOT_REPRODUCED, BED, FLAG},
    "seed-004/cross-streams-hardly-matter": ALL,
    # counts repetitions that recovered, no interval: undecided when the probes end before 20 s;
    # probes after the load cannot come out negative: not testable here
    "seed-004/probe-recovers-in-20s": {REPRODUCED, NOT_REPRODUCED, BED, FLAG, NOT_TESTABLE},
}
"""Every finding the studies emit and the outcomes its unit tests reach (`test_every_finding_id_is_in_the_table`
keeps it complete: a new finding fails until its tests reach its outcomes here)."""

FLAG_CODES = sorted(LIMIT_FLAGS)


def run_of(study):
    return {"suite": {"name": study, "parsed": {"name": study, "study": study}}}


def spread(k, noise):
    return 1.0 + noise * (k - 1)


def flagged(trials, code="cpu-saturated"):
    out = copy.deepcopy(trials)
    for t in out:
        t["flags"] = list(t.get("flags") or []) + [{"code": code, "severity": "warning", "message": "test"}]
    return out


def failed(trials):
    """The trials as the orchestrator records them when their runner fails: the same identity and
    kind, metrics null, an error, no kind-specific extra."""
    out = copy.deepcopy(trials)
    for k, t in enumerate(out):
        t.update(metrics=None, series=[], raw={}, extra={}, error="the runner failed (test)",
                 trial_id=f"{t.get('trial_id') or k}-failed")
    return out


def outcome(f: Finding) -> str:
    if f.verdict != INCONCLUSIVE:
        return f.verdict
    if "the numbers alone would say" in f.reason:          # Finding.judge undid a decided verdict
        return FLAG
    if any(w in f.reason for w in ("within noise", "no interval", "no spread")):
        return NOISE
    return BED


def template(fid: str) -> str:
    """The OUTCOMES key a finding id falls under (a second link rate's '@1gbit' suffix dropped)."""
    fid = fid.split("@")[0]
    return next((k for k in OUTCOMES if fnmatch.fnmatchcase(fid, k)), fid)


def reached(study, scenarios) -> dict[str, set[str]]:
    """{OUTCOMES key: outcomes reached} over scenarios (trial lists, or (run, trials) pairs), an empty
    run and a flagged copy of each scenario (every trial carrying a limiting flag, the codes taken in
    turn), in which no finding may be decided."""
    got: dict[str, set[str]] = {}
    scenarios = [ts if isinstance(ts, tuple) else (run_of(study), ts) for ts in [*scenarios, []]]
    for i, (run, ts) in enumerate(scenarios):
        code = FLAG_CODES[i % len(FLAG_CODES)]
        for f in compare_study(run, ts).findings:
            got.setdefault(template(f.id), set()).add(outcome(f))
        for f in compare_study(run, flagged(ts, code)).findings:
            assert f.verdict not in (REPRODUCED, NOT_REPRODUCED), f"{f.id} is {f.verdict} with {code} on every trial"
            got.setdefault(template(f.id), set()).add(outcome(f))
        # failed trials (of every kind) beside measured ones are read without a traceback, and
        # trials that all failed decide nothing
        compare_study(run, ts + failed(ts))
        for f in compare_study(run, failed(ts)).findings:
            assert f.verdict not in (REPRODUCED, NOT_REPRODUCED), f"{f.id} is {f.verdict} with every trial failed"
    return got


def check_outcomes(study: str, got: dict[str, set[str]]) -> None:
    """Every finding of `study` in OUTCOMES reached its outcomes, and no other finding was emitted."""
    assert set(got) <= set(OUTCOMES), f"findings missing from OUTCOMES: {sorted(set(got) - set(OUTCOMES))}"
    for key, want in OUTCOMES.items():
        if key.startswith(study + "/"):
            have = got.get(key, set())
            assert want <= have, f"{key} reaches only {sorted(have)}, needs {sorted(want - have)} too"


def emitted_ids() -> set[str]:
    """Every finding id the study modules can emit, read from their source: each string or f-string
    starting 'seed-NNN/' (a module constant filled in, '*' for a part taken from the record). A
    Finding built without an id (its id would come from its claim) fails here."""
    ids = set()
    for name in study_names():
        mod = importlib.import_module(f"fwlab.published.study_{name.split('-')[1]}")
        tree = ast.parse(inspect.getsource(mod))
        parts = {id(p) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for p in node.values}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("Finding", "Finding.judge"):
                assert any(k.arg == "id" for k in node.keywords), f"{mod.__name__}:{node.lineno}: a Finding without an id"
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts:
                text = node.value
            elif isinstance(node, ast.JoinedStr):
                text = "".join(p.value if isinstance(p, ast.Constant) else
                               str(getattr(mod, p.value.id)) if isinstance(p.value, ast.Name)
                               and isinstance(getattr(mod, p.value.id, None), (int, str)) else "*"
                               for p in node.values)
            else:
                continue
            if re.match(r"seed-\d{3}/", text):
                ids.add(text)
    return ids


def test_every_finding_id_is_in_the_table():
    """A new finding fails here until OUTCOMES names it, and then its study's reach test until its
    unit tests reach those outcomes."""
    assert {template(fid) for fid in emitted_ids()} == set(OUTCOMES)


# --- seed 000 -------------------------------------------------------------------------------------

def s000(tcp_top: float = 1.0, udp: dict | None = None, noise: float = 0.01, udp_noise: float | None = None):
    """Rule-count trials of one netfilter configuration, 3 repetitions: TCP (64 and 1400 B writes)
    at `tcp_top` x the 0-rule rate at 1000 rules; one-way UDP of 1400 B payload at `udp` x."""
    udp = udp or {0: 1.0, 10: 1.0, 200: 0.95, 1000: 0.05}
    un = noise if udp_noise is None else udp_noise
    ts = []
    for k in range(3):
        for n in (0, 10, 200, 1000):
            for s in (64, 1400):
                f = tcp_top if n == 1000 else 1.0
                ts.append(tr("stream", "tcp", "iptables-legacy", n, size=s, sc=True, rep=k,
                             throughput_bps=3e9 * f * spread(k, noise)))
            ts.append(tr("stream", "engine", "iptables-legacy", n, size=1446, sc=True, rep=k,
                         throughput_bps=4e9 * udp[n] * spread(k, un if n in (0, 200) else 0.01)))
    return ts


def test_seed_000_every_finding_reaches_its_outcomes():
    scenarios = [
        s000(),                                                        # flat TCP, flat UDP to 200, collapse
        s000(tcp_top=0.5, udp={0: 1.0, 10: 1.0, 200: 0.5, 1000: 0.49}),  # TCP drops, UDP drops early, no collapse
        s000(tcp_top=0.8, noise=0.6, udp={0: 1.0, 10: 1.0, 200: 0.85, 1000: 0.05}, udp_noise=0.9),  # noisy
        seed000_trials(0.5, 0.2, 0.6), seed000_trials(0.97, 1.0, 1.1),
        seed000_trials(0.5, 0.5 * 2.8 / 3.0, 1.0),   # under the flood: no firewall as fast as netfilter, 1000 rules as 200
        s000_flood(0.66, cv=0.15),                                     # about half, its interval across 70 %
        s000() + s000_cost(3.8), s000_cost(0.0, half=1.0), s000_cost(0.05, noise=400.0),  # in-kernel rule walk
    ]
    check_outcomes("seed-000", reached("seed-000", scenarios))
    noisy = {f.id: f for f in compare_study(run_of("seed-000"), scenarios[2]).findings}
    assert "within noise at 3 repetitions" in noisy["seed-000/tcp-flat/iptables-legacy linear +established"].reason


def test_seed_000_udp_table_is_in_payload_bits_like_netperf():
    cmp = compare_study(run_of("seed-000"), s000())
    t = next(t for t in cmp.tables if t.title.startswith("fwlab: throughput"))
    assert t.header[2] == "0 rules [payload Mbit/s]"
    row = next(r for r in t.rows if r[0] == "UDP one-way 1400 B")
    assert row[2] == f"{4e9 * 1400 / 1446 / 1e6:,.0f}"          # frame bits incl. FCS -> payload bits
    pub = next(t for t in cmp.tables if "as published" in t.title)
    assert "payload" in pub.header[1]


# --- seed 001 -------------------------------------------------------------------------------------

def s001(mid: float, high: float, *, bridge: float = 1.2, noise: float = 0.0, reps: int = 1,
         bidir: float | None = None):
    """Throughput searches, frames 64/512/1518 B, both layouts: 1000 rules at `mid` x 0 rules and
    10000 rules at `high` x the 1000-rule figure; bridge mode at `bridge` x routed, 0 rules;
    with `bidir`: a bidirectional search (per direction) at `bidir` x routed, 0 rules, 64 B."""
    ts = []
    for k in range(reps):
        j = spread(k, noise)
        if bidir is not None:
            ts.append(tr("rfc2544", "throughput", "nftables", 0, size=64, rep=k, label="bidir", direction="bidir",
                         throughput_pps=500e3 * bidir * spread(k, noise)))
        for size, mx in ((64, 500e3), (512, 450e3), (1518, 300e3)):
            for lay in ("linear", "set"):
                for n, f in ((0, 1.0), (1000, mid), (10000, mid * high)):
                    ts.append(tr("rfc2544", "throughput", "nftables", n, layout=lay, size=size, rep=k,
                                 throughput_pps=mx * f * j))
                ts.append(tr("rfc2544", "throughput", "nftables", 0, layout=lay, size=size, mode="bridge", rep=k,
                             throughput_pps=mx * bridge * j))
    return ts


def test_seed_001_every_finding_reaches_its_outcomes():
    scenarios = [
        s001(0.99, 0.5, bridge=1.2, noise=0.01, reps=3, bidir=0.5),   # flat to 5000, effect above, bridge above
        s001(0.6, 1.0, bridge=0.8, noise=0.002, reps=3, bidir=0.97),  # an effect at 1000, none above, bridge below
        s001(0.85, 0.97, bridge=1.02, noise=0.5, reps=3, bidir=0.5),  # all within the noise
        [capacity_trial("routed", r, c) for r, c in ((1, 200000), (2, 201000))]
        + [capacity_trial("bridge", r, c) for r, c in ((1, 250000), (2, 251000))],
        [capacity_trial("routed", 1, 259000), capacity_trial("bridge", 1, 260000)],
        [capacity_trial("routed", 1, 100000, table_full=False), capacity_trial("bridge", 1, 150000)],
        [capacity_trial(m, r, c + 1000 * r, table_full=False) for m, c in (("routed", 150000), ("bridge", 151000))
         for r in (1, 2)],
        capped_capacity("bridge", 300000, 290000),           # a lower bound short of the other mode: the search's
        s001_cost(60000.0), s001_cost(0.0, half=2.0), s001_cost(5.0, half=2.0, noise=40.0),  # in-kernel, above 5000
    ]
    check_outcomes("seed-001", reached("seed-001", scenarios))


def test_seed_001_bidirectional_is_read_per_direction_and_kept_apart():
    ts = s001(0.99, 0.5, noise=0.01, reps=3, bidir=0.5)
    cmp = compare_study(run_of("seed-001"), ts)
    f = next(f for f in cmp.findings if f.id == "seed-001/bidir-half-at-small-frames")
    assert f.verdict == REPRODUCED and "per direction" in f.fwlab and "both ways" in f.fwlab
    # the bidirectional searches never enter the unidirectional findings (Table 1's 0-rule figures)
    flat = next(f for f in cmp.findings if f.id == "seed-001/flat-up-to-5000/linear")
    assert not set(flat.trial_ids) & {t["trial_id"] for t in ts if t["label"] == "bidir"}
    assert not any("Bi-directional" in m for m in cmp.missing)
    assert any("Bi-directional" in m for m in compare_study(run_of("seed-001"), s001(0.99, 0.5, reps=3)).missing)


def test_seed_001_leaves_out_a_frame_size_the_generator_capped():
    """1518 B searches that passed the generator's maximum at every rule count say nothing about the
    rule count: the rule-count findings are decided on the other sizes and say what was left out."""
    ts = s001(0.6, 0.5, noise=0.002, reps=3)
    for t in ts:
        if t["size_bytes"] == 1518:
            t["flags"] = [{"code": "max-load-passed", "severity": "info", "message": "passed the maximum"}]
    cmp = compare_study(run_of("seed-001"), ts)
    flat = next(f for f in cmp.findings if f.id == "seed-001/flat-up-to-5000/linear")
    assert flat.verdict == NOT_REPRODUCED and "Left out: 1518 B (max-load-passed" in flat.fwlab
    assert not {t["trial_id"] for t in ts if t["size_bytes"] == 1518} & set(flat.trial_ids)
    # every size capped (the rfc2544 search's flag as an older record wrote it, read as the one code
    # max-load-passed): nothing to decide on, the finding says which flag
    for t in ts:
        t["flags"] = [{"code": "search-max-load-passed", "severity": "warning", "message": "passed the maximum"}]
    flat = next(f for f in compare_study(run_of("seed-001"), ts).findings if f.id == "seed-001/flat-up-to-5000/linear")
    assert flat.verdict == INCONCLUSIVE and "max-load-passed on 18 of 18" in flat.reason
    # undecided by the numbers (one repetition) and capped: the reason names both
    one = [t for t in ts if t["repetition"] == 0]
    flat = next(f for f in compare_study(run_of("seed-001"), one).findings if f.id == "seed-001/flat-up-to-5000/linear")
    assert flat.verdict == INCONCLUSIVE and "1 repetition" in flat.reason and "max-load-passed on" in flat.reason


def test_seed_001_quotes_the_study_and_names_the_goal():
    ts = s001(0.99, 0.5)
    for t in ts:
        t["extra"] = {"rfc2544": {"results": [{"algorithm": "mlr", "goal": {"name": "csit", "loss_ratio": 0.0,
                                                                             "exceed_ratio": 0.5}}]}}
    cmp = compare_study(run_of("seed-001"), ts)
    claims = {f.claim for f in cmp.findings}
    assert "Up to 5,000 rules the rule count has almost no effect on throughput (§3.3)" in claims
    assert "Above 5,000 rules the rule count affects throughput (conclusion)" in claims
    per_rule = next(t for t in cmp.tables if t.title.startswith("fwlab:"))
    assert per_rule.title == "fwlab: NDR, exceed 0.5 throughput as % of 0 rules, per rule count"
    assert "zero-loss" not in per_rule.title


# --- seed 002 -------------------------------------------------------------------------------------

def s002(noise=0.01, rules_effect=1.0, url_effect=1.0, many_clients=4.0):
    ts = seed002_trials(noise, url_effect)
    for t in ts:
        if t["backend"] == "nftables" and t["rules"] == 100:
            t["metrics"]["tpm"] *= rules_effect
        if t["backend"] == "proxy" and t["rules"] == 0 and t["streams"] == 72:
            t["metrics"]["tpm"] *= many_clients / 4.0
    return ts


def test_seed_002_every_finding_reaches_its_outcomes():
    delayed = run_of("seed-002")
    delayed["suite"]["parsed"]["link_delay"] = "0.5ms"
    scenarios = [s002(), (delayed, s002(rules_effect=0.7, url_effect=0.7, many_clients=1.2)), s002(noise=0.3),
                 s002(many_clients=1.02)]                    # a flat client curve with no link delay: the bed's
    check_outcomes("seed-002", reached("seed-002", scenarios))


def test_seed_002_flat_client_curve_without_link_delay_is_the_beds_regime():
    f = next(f for f in compare_study(run_of("seed-002"), s002(many_clients=1.02)).findings
             if f.id == "seed-002/more-clients-more-tpm")
    assert f.verdict == INCONCLUSIVE and "cannot reach the seed's regime" in f.reason


def test_seed_002_no_effect_needs_the_studys_own_threshold():
    # a spread giving fwlab thresholds between 7.76 % and 15.5 % no longer confirms 'no effect'
    cmp = compare_study(run_of("seed-002"), s002(noise=0.06))
    f = next(f for f in cmp.findings if f.id == "seed-002/100-rules-no-effect")
    assert f.verdict == INCONCLUSIVE and "wider than the seed's 7.76 %" in f.reason
    assert "at most 7.76 %" in f.criterion


# --- seed 003 -------------------------------------------------------------------------------------

def s003(tcp6=1.2, jit6=2.0, rtt6=1.25, udp6=1.0, path_bps=5e6, noise=0.01, win=None, win_noise=None):
    """IPv4 and IPv6, no firewall, 3 repetitions: TCP on a path of `path_bps`, UDP at 1 Mbit/s,
    jitter and idle round trips (0.4 ms over IPv4); the IPv6 figures at the given multiples of IPv4's.
    `win`: also TCP with an 8 KiB window (label w8k) at `win` x the default window's figure, and the
    round trip beside the default-window stream (rtt_probe) as the idle one."""
    ts = []
    for k in range(3):
        j = spread(k, noise)
        for ipv, f_tcp, f_j, f_rtt, f_udp in ((4, 1, 1, 1, 1), (6, tcp6, jit6, rtt6, udp6)):
            ts.append(tr("stream", "tcp", "none", 0, ipv=ipv, rep=k, throughput_bps=path_bps * f_tcp * j))
            if win is not None:
                ts[-1]["metrics"]["rtt_p50_ms"] = 0.4 * f_rtt * j
                w = tr("stream", "tcp", "none", 0, ipv=ipv, rep=k, label="w8k",
                       throughput_bps=path_bps * f_tcp * win * spread(k, noise if win_noise is None else win_noise))
                w["options"] = {"window_bytes": 8192}
                ts.append(w)
            ts.append(tr("stream", "udp", "none", 0, ipv=ipv, rep=k, size=1470, label="1m",
                         throughput_bps=1e6 * f_udp * j, jitter_ms=0.05 * f_j * j))
            ts.append(tr("rtt", "rtt", "none", 0, ipv=ipv, rep=k, rtt_p50_ms=0.4 * f_rtt * j))
    return ts


def test_seed_003_every_finding_reaches_its_outcomes():
    scenarios = [
        s003(), s003(tcp6=0.8, jit6=0.5, rtt6=0.8, udp6=0.8),
        s003(tcp6=1.0, jit6=1.0, rtt6=1.0, udp6=0.9, noise=0.3),
        s003(path_bps=5e9),                                   # 1 Mbit/s on a 5 Gbit/s path
        # an 8 KiB window per 0.4 ms round trip carries 164 Mbit/s: it limits a 5 Gbit/s path
        s003(path_bps=5e9, win=0.03), s003(path_bps=5e9, win=1.0), s003(path_bps=5e9, win=0.93, win_noise=0.3),
        s003(win=0.5),                                        # ... but not a 5 Mbit/s one: not testable
    ]
    check_outcomes("seed-003", reached("seed-003", scenarios))
    small = {f.id: f for f in compare_study(run_of("seed-003"), scenarios[-1]).findings}["seed-003/small-window-slower"]
    assert small.verdict == NOT_TESTABLE and "164 Mbit/s" in small.reason and "link_delay" in small.reason
    wide = {f.id: f for f in compare_study(run_of("seed-003"), scenarios[3]).findings}
    assert wide["seed-003/udp-1m-same"].verdict == NOT_TESTABLE
    assert "5,000 Mbit/s" in wide["seed-003/udp-1m-same"].reason


# --- seed 004 -------------------------------------------------------------------------------------

def s004(small=0.96, big_drops=True, direct_top=1.0, zero=None, noise=0.01):
    ts = []
    for rep in range(3):
        j = spread(rep, noise)
        for s in (1, 100, 128):
            if zero is not None:
                ts.append(tr("stream", "tcp", "nftables", 0, mode="bridge", streams=s, rep=rep,
                             throughput_bps=10e9 * zero * j))
            ts.append(tr("stream", "tcp", "none", 0, mode="direct", streams=s, rep=rep,
                         throughput_bps=10e9 * (direct_top if s == 128 else 1.0) * j))
            ts.append(tr("stream", "tcp", "nftables", 5, mode="bridge", streams=s, rep=rep, throughput_bps=10e9 * small * j))
            big = {1: 6e9, 100: 4e9, 128: 2e9}[s] if big_drops else 6e9
            ts.append(tr("stream", "tcp", "nftables", 10000, mode="bridge", streams=s, rep=rep,
                         throughput_bps=big * (direct_top if s == 128 else 1.0) * j))
    return ts


def test_seed_004_every_finding_reaches_its_outcomes(fast_probes):
    scenarios = [
        s004(), s004(small=0.5, big_drops=False, direct_top=0.5),
        s004(small=0.9, noise=0.1), s004_cv(0.6, 0.43, cv=0.15),     # within the noise
        s004_cv(0.6, 0.3, direct_top=0.93, cv=0.08),
        s004(small=0.5, zero=0.55),                          # the unshaped hop itself costs: the bed's
        stalled_trials(stall=True), stalled_trials(stall=False),
        stalled_trials(stall=True, direct_x=2.5),            # direct overran too: the bed's
        probed_during(seed004_trials([0.4e9, 0.7e9, 0.95e9])), probed_during(seed004_trials([0.3e9] * 5)),
        seed004_trials([0.4e9, 0.7e9, 0.95e9]),              # probes after the load: not testable here
        probes_end_early(),
    ]
    check_outcomes("seed-004", reached("seed-004", scenarios))


def test_seed_004_small_set_on_an_unshaped_bed_whose_hop_itself_costs():
    def small(run, ts):
        return next(f for f in compare_study(run, ts).findings if f.id == "seed-004/small-set-keeps-cross")

    ts = s004(small=0.5, zero=0.55)
    f = small(run_of("seed-004"), ts)
    assert f.verdict == INCONCLUSIVE and "cannot reach the seed's regime" in f.reason and "55 %" in f.reason
    shaped = run_of("seed-004")
    shaped["suite"]["parsed"]["link_rate"] = "100mbit"
    assert small(shaped, ts).verdict == NOT_REPRODUCED
    assert small(run_of("seed-004"), s004(small=0.5, zero=0.99)).verdict == NOT_REPRODUCED


# --- the rule: limiting flags, reasons, findings.json ---------------------------------------------

@pytest.mark.parametrize("code", sorted(LIMIT_FLAGS))
def test_a_limit_flag_on_a_used_trial_makes_a_decided_verdict_inconclusive(code):
    ts = s000()
    clean = compare_study(run_of("seed-000"), ts)
    assert {f.verdict for f in clean.findings if f.trial_ids} == {REPRODUCED}
    bad = flagged(ts[:1], code) + ts[1:]                      # one flagged trial
    cmp = compare_study(run_of("seed-000"), bad)
    for f in cmp.findings:
        if ts[0]["trial_id"] in f.trial_ids:
            assert f.verdict == INCONCLUSIVE and f.reason.startswith(f"{code} on 1 of {len(f.trial_ids)} trials used")
            assert ts[0]["trial_id"] in f.reason and "would say 'reproduced'" in f.reason
        else:
            assert f.verdict == REPRODUCED or not f.trial_ids


def test_a_flag_that_is_not_a_limit_leaves_the_verdict_alone():
    ts = flagged(s000(), "high-cv")
    assert limit_reason(ts) == ""
    assert all(f.verdict == REPRODUCED for f in compare_study(run_of("seed-000"), ts).findings if f.trial_ids)


def test_the_wire_cannot_refute_a_fall_but_leaves_no_effect_decided():
    """link-limited (the seeds' own regime: a wire capped their figures too) leaves decided verdicts
    alone, except that figures the emulated wire capped cannot refute a claim that a figure falls."""
    def verdicts(ts):
        return {f.id: f for f in compare_study(run_of("seed-001"), flagged(ts, "link-limited")).findings}

    no_fall = verdicts(s001(0.99, 1.0, noise=0.002, reps=3))              # 10000 rules as fast as 1000
    assert no_fall["seed-001/flat-up-to-5000/linear"].verdict == REPRODUCED
    f = no_fall["seed-001/effect-above-5000/linear"]
    assert f.verdict == INCONCLUSIVE and f.reason.startswith("link-limited on 18 of 18 trials used")
    assert "would say 'not reproduced'" in f.reason
    fall = verdicts(s001(0.99, 0.5, noise=0.01, reps=3))                  # half at 10000 rules: shown anyway
    assert fall["seed-001/effect-above-5000/linear"].verdict == REPRODUCED


def test_an_undecided_verdict_needs_its_reason():
    from fwlab.errors import FwlabError

    with pytest.raises(FwlabError, match="without a reason"):
        Finding(claim="x", published="p", fwlab="f", criterion="c", verdict=INCONCLUSIVE)
    with pytest.raises(FwlabError, match="without a reason"):
        Finding(claim="x", published="p", fwlab="f", criterion="c", verdict=NOT_TESTABLE)


def test_findings_json_is_written_with_the_report(tmp_path):
    run = tmp_path / "r"
    shutil.copytree(GOLDEN / "run-tiny", run)
    write_report(run)
    assert not (run / FINDINGS_FILE).exists()                 # no study named
    meta = json.loads((run / "run.json").read_text())
    meta["suite"]["parsed"]["study"] = "seed-000"
    (run / "run.json").write_text(json.dumps(meta))
    write_report(run)
    doc = json.loads((run / FINDINGS_FILE).read_text())
    trials = [json.loads(x) for x in (run / "trials.jsonl").read_text().splitlines() if x.strip()]
    ids = {t["trial_id"] for t in trials}
    assert doc["study"] == "seed-000" and doc["findings"]
    for f in doc["findings"]:
        assert {"id", "statement", "verdict", "reason", "trial_ids"} <= set(f)
        assert f["verdict"] in doc["verdicts"] and set(f["trial_ids"]) <= ids
        assert f["reason"] or f["verdict"] in (REPRODUCED, NOT_REPRODUCED)
    assert len({f["id"] for f in doc["findings"]}) == len(doc["findings"])
    # the same record gives the same file
    before = (run / FINDINGS_FILE).read_text()
    assert write_findings(run, meta, trials).read_text() == before


def test_seed_001_bridge_above_gateway_reads_only_the_sizes_run_in_both_modes():
    """seed-001-quick runs bridge mode at 64 B only; routed 1518 B searches capped by the generator
    (search-max-load-passed) were never compared with bridge mode and must not make it inconclusive."""
    def quick(bridge, noise):
        ts = [t for t in s001(1.0, 1.0, bridge=bridge, noise=noise, reps=3)
              if t["mode"] != "bridge" or t["size_bytes"] == 64]
        for t in ts:
            if t["size_bytes"] == 1518:
                t["flags"] = [{"code": "search-max-load-passed", "severity": "warning", "message": "passed the maximum"}]
        return ts
    got = {}
    for bridge, noise in ((1.2, 0.01), (0.8, 0.01), (1.02, 0.5)):
        ts = quick(bridge, noise)
        f = next(f for f in compare_study(run_of("seed-001"), ts).findings if f.id == "seed-001/bridge-above-gateway")
        assert not {t["trial_id"] for t in ts if t["size_bytes"] != 64} & set(f.trial_ids)
        assert "search-max-load-passed" not in f.reason and "64 B" in f.fwlab and "1518 B" not in f.fwlab
        got[bridge] = f.verdict
    assert got == {1.2: REPRODUCED, 0.8: NOT_REPRODUCED, 1.02: INCONCLUSIVE}


def bidir_run(ratios: dict[int, float], *, bidir_s: float = 1.0, uni_s=(1.0,), noise: float = 0.01,
              noisy: tuple[int, ...] = (), reps: int = 3):
    """Routed 0-rule throughput searches at 64 and 128 B: unidirectional ones at each final trial
    length in `uni_s` (100 % at the first, twice that at any other), bidirectional ones (`bidir_s`) at
    `ratios[size]` x the unidirectional figure, with a spread of 50 % at the sizes in `noisy`."""
    def goal(t, secs):
        t["extra"] = {"rfc2544": {"test": "throughput", "results": [{"goal": {"final_trial_duration_s": secs}}]}}
        return t
    ts = []
    for k in range(reps):
        for size, mx in ((64, 500e3), (128, 450e3)):
            for i, secs in enumerate(uni_s):
                ts.append(goal(tr("rfc2544", "throughput", "nftables", 0, size=size, rep=k,
                                  throughput_pps=mx * (1.0 if i == 0 else 2.0) * spread(k, noise)), secs))
            if size in ratios:
                ts.append(goal(tr("rfc2544", "throughput", "nftables", 0, size=size, rep=k, label="bidir",
                                  direction="bidir", throughput_pps=mx * ratios[size]
                                  * spread(k, 0.5 if size in noisy else noise)), bidir_s))
    return ts


def bidir_finding(ts):
    return next(f for f in compare_study(run_of("seed-001"), ts).findings
                if f.id == "seed-001/bidir-half-at-small-frames")


def test_seed_001_bidirectional_judges_every_frame_size_at_like_trial_lengths():
    ok = bidir_finding(bidir_run({64: 0.5, 128: 0.5}))
    assert ok.verdict == REPRODUCED and "64 B" in ok.fwlab and "128 B" in ok.fwlab and "1 s final trials" in ok.fwlab
    # 64 B alone would say reproduced: the 128 B pair is judged too
    assert bidir_finding(bidir_run({64: 0.5, 128: 0.97})).verdict == NOT_REPRODUCED
    f = bidir_finding(bidir_run({64: 0.5, 128: 0.5}, noisy=(128,)))
    assert f.verdict == INCONCLUSIVE and "within noise" in f.reason


def test_seed_001_bidirectional_never_compares_unlike_trial_lengths():
    # 1 s bidirectional searches beside 0.5 s unidirectional ones only: not compared, and the reason says so
    f = bidir_finding(bidir_run({64: 0.5, 128: 0.5}, uni_s=(0.5,)))
    assert f.verdict == NOT_MEASURED and "unlike final trial lengths" in f.fwlab
    assert "bidirectional final trials 1 s, unidirectional 0.5 s" in f.fwlab and not f.trial_ids
    # unidirectional searches at 0.5 s and 1 s: only the 1 s ones are read (beside the 0.5 s figures,
    # twice as high, the ratio would be 25 %: not reproduced)
    ts = bidir_run({64: 0.5, 128: 0.5}, uni_s=(1.0, 0.5))
    f = bidir_finding(ts)
    half = {t["trial_id"] for t in ts if t["extra"]["rfc2544"]["results"][0]["goal"]["final_trial_duration_s"] == 0.5}
    assert f.verdict == REPRODUCED and not half & set(f.trial_ids) and len(f.trial_ids) == 12


def test_seed_001_table_1_marks_the_capped_cells():
    """1518 B searches that passed the generator's maximum: their Table 1 cells say so (a lower
    bound, the flag named), the other sizes' cells stay plain, the note says what the mark means."""
    ts = s001(0.6, 0.5, noise=0.002, reps=3)
    for t in ts:
        if t["size_bytes"] == 1518 and t["rules"] == 0:
            t["flags"] = [{"code": "search-max-load-passed", "severity": "warning", "message": "passed the maximum"}]
    table = next(t for t in compare_study(run_of("seed-001"), ts).tables if t.title.startswith("Table 1"))
    row = {r[0]: r for r in table.rows}
    z, top, ratio = row["1518"][4:7]
    assert z.startswith("≥ ") and z.endswith("⚑ max-load-passed")
    assert "⚑" not in top and ratio.endswith("⚑ max-load-passed") and not ratio.startswith("≥")
    assert not any("⚑" in c for c in row["64"])
    assert "⚑ marks" in table.note and "max-load-passed: the search passed its largest load" in table.note
    plain = next(t for t in compare_study(run_of("seed-001"), s001(0.6, 0.5, noise=0.002, reps=3)).tables
                 if t.title.startswith("Table 1"))
    assert "⚑" not in plain.note and not any("⚑" in c for r in plain.rows for c in r)
