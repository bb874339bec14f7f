"""Seed findings about a rule set's per-packet cost, decided from the in-kernel clock's cost trials
(fwlab.published.cost): seed 000's rule walk (the per-rule slope) and seed 001's 'above 5,000
rules' (the time 10,000 rules add against 1,000), each reproduced, not reproduced and
inconclusive from its inputs, not measured with the probe's reason, and absent without cost trials."""

from __future__ import annotations

from test_published import tr

from fwlab.published.compare import INCONCLUSIVE, NOT_MEASURED, NOT_REPRODUCED, REPRODUCED, compare_study


def run_of(study):
    return {"suite": {"name": study, "parsed": {"name": study, "study": study}}}


def cost(backend, n, rep, p50, *, half=3.0, sc=False, layout="linear", size=64, missing=None, flags=()):
    """One cost trial: p50 [ns] with a per-packet interval of ±half, raw (no reference)."""
    m = {"fw_p50_ns": None if missing else p50, "fw_p50_low_ns": None if missing else p50 - half,
         "fw_p50_high_ns": None if missing else p50 + half, "fw_missing": missing}
    t = tr("cost", "cost", backend, n, layout=layout, size=size, sc=sc, rep=rep, **m)
    t["flags"] = [{"code": c, "severity": "warning", "message": "test"} for c in flags]
    return t


def s000_cost(per_rule: float, *, noise: float = 0.0, half: float = 3.0, **kw):
    """iptables-legacy +established cost trials at 0/200/1000 rules, 2 repetitions: 180 ns plus
    `per_rule` ns per rule; `noise` ns added to repetition 2 at 1000 rules and taken off at 0."""
    return [cost("iptables-legacy", n, r, 180 + per_rule * n + (noise if (r, n) == (2, 1000) else
                                                                 -noise if (r, n) == (2, 0) else 0),
                 half=half, sc=True, size=1446, **kw)
            for r in (1, 2) for n in (0, 200, 1000)]


FID0 = "seed-000/udp-rule-walk-cost/iptables-legacy linear +established"


def f000(trials):
    return next(f for f in compare_study(run_of("seed-000"), trials).findings if f.id == FID0)


def test_seed_000_rule_walk_reproduced_on_a_clear_slope():
    f = f000(s000_cost(3.8))
    assert f.verdict == REPRODUCED and "3.80 ns/rule" in f.fwlab and "in-kernel cost" in f.fwlab
    assert len(f.trial_ids) == 6


def test_seed_000_rule_walk_not_reproduced_when_flat():
    f = f000(s000_cost(0.0, half=1.0))
    assert f.verdict == NOT_REPRODUCED


def test_seed_000_rule_walk_inconclusive_when_the_repetitions_disagree():
    f = f000(s000_cost(0.05, noise=400.0))
    assert f.verdict == INCONCLUSIVE and "within noise" in f.reason


def test_seed_000_rule_walk_a_limiting_flag_undoes_the_verdict():
    f = f000([dict(t, flags=[{"code": "generator-short", "severity": "warning", "message": "x"}])
              for t in s000_cost(3.8)])
    assert f.verdict == INCONCLUSIVE and "the numbers alone would say 'reproduced'" in f.reason


def test_seed_000_rule_walk_not_measured_says_the_probes_reason():
    f = f000([cost("iptables-legacy", n, 1, 0, sc=True, missing="the kernel refused the link (EPERM)")
              for n in (0, 1000)])
    assert f.verdict == NOT_MEASURED and "missing: the kernel refused the link (EPERM)" in f.fwlab


def test_seed_000_without_cost_trials_has_no_cost_finding():
    assert not any("cost" in f.id for f in compare_study(run_of("seed-000"), []).findings)


def s001_cost(added: float, *, half: float = 3.0, noise: float = 0.0):
    """nftables linear gateway cost trials at 0/1000/10000 rules, 2 repetitions: 10,000 rules add
    `added` ns per packet to the 1,000-rule time; `noise` ns on repetition 2 at 10,000 rules."""
    base = {0: 180.0, 1000: 7000.0}
    return [cost("nftables", n, r, base.get(n, base[1000] + added + (noise if r == 2 else -noise)), half=half)
            for r in (1, 2) for n in (0, 1000, 10000)]


FID1 = "seed-001/effect-above-5000-cost/linear"


def f001(trials):
    return next(f for f in compare_study(run_of("seed-001"), trials).findings if f.id == FID1)


def test_seed_001_above_5000_reproduced_not_reproduced_and_inconclusive():
    yes = f001(s001_cost(60000.0))
    assert yes.verdict == REPRODUCED and "10,000 rules add" in yes.fwlab and "against 1,000 rules" in yes.fwlab
    assert f001(s001_cost(0.0, half=2.0)).verdict == NOT_REPRODUCED
    no = f001(s001_cost(5.0, half=2.0, noise=40.0))
    assert no.verdict == INCONCLUSIVE and "within noise" in no.reason


def test_seed_001_above_5000_needs_a_cost_trial_above_5000():
    ts = [t for t in s001_cost(60000.0) if t["rules"] != 10000]
    f = f001(ts)
    assert f.verdict == NOT_MEASURED and "above 5,000" in f.fwlab
