"""Seed presets at the seed's link rate with the unshaped bed as a second column: a suite's
``link_rate`` list runs every trial at each rate (own beds, own trial ids, own curves and figures),
and a study is compared at the run's own (first) rate with the other rate's tables and findings
beside it. No root, no traffic."""

from __future__ import annotations

import pytest
from test_published import run_of
from test_published_verdicts import s004

from fwlab.analysis.figures import trial_figures
from fwlab.errors import FwlabError
from fwlab.published.compare import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, compare_study
from fwlab.results.curves import curves
from fwlab.linerate import LineRate
from fwlab.results.identity import link_words, trial_id
from fwlab.suites import load_suite
from fwlab.run.plan import expand
from fwlab.suites.schema import Suite

SEED_RATES = {"seed-000": 10 ** 9, "seed-001": 10 ** 9, "seed-002": 10 ** 8, "seed-003": 10 ** 8, "seed-004": 10 ** 8}


@pytest.mark.parametrize("seed", sorted(SEED_RATES))
def test_seed_presets_run_at_the_seeds_rate_and_unshaped(seed):
    full, _ = load_suite(seed)
    assert full.link_rates == [SEED_RATES[seed], None]
    plan = expand(full).trials
    at = {t.link_rate_bps for t in plan}
    assert at == {SEED_RATES[seed], None}
    shaped = [t for t in plan if t.link_rate_bps]
    assert len(shaped) == len(plan) // 2                      # every trial at both rates
    assert all(t.trial_id.endswith(f"-{LineRate(SEED_RATES[seed]).tc}-r{t.repetition}") for t in shaped)
    assert len({t.trial_id for t in plan}) == len(plan)
    assert {t.bed_key[-1] for t in plan} == {SEED_RATES[seed], None}
    # the quick variant: the seed's wire only (both would double its time)
    quick, _ = load_suite(f"{seed}-quick")
    assert quick.link_rates == [SEED_RATES[seed]]
    assert {t.link_rate_bps for t in expand(quick).trials} == {SEED_RATES[seed]}


def test_link_rate_list_is_checked():
    base = {"name": "x", "traffic": [{"kind": "udp", "tool": "iperf3"}]}
    assert Suite(**base, link_rate="100mbit").link_rates == [10 ** 8]
    assert Suite(**base).link_rates == [None]
    assert Suite(**base, link_rate=["1gbit", "none"]).own_link_rate == 10 ** 9
    for bad in ([], ["100mbit", "100mbit"], ["fast"]):
        with pytest.raises((FwlabError, ValueError)):
            Suite(**base, link_rate=bad)


def test_the_link_rate_separates_ids_curves_and_figures():
    t = {"ip_version": 4, "traffic": "tcp", "size_bytes": None, "backend": "nftables", "rules": 5,
         "layout": "linear", "mode": "bridge", "repetition": 1}
    assert trial_id({**t, "link_rate_bps": 10 ** 8}) == "ip4tcp-dflt-nftables-5r-linear-bridge-100mbit-r1"
    assert trial_id(t) == "ip4tcp-dflt-nftables-5r-linear-bridge-r1"            # old ids unchanged
    assert link_words(10 ** 9) == "1 Gbit/s link" and link_words(None) == "unshaped bed"
    ts = both_rates()
    assert len(curves(ts)) == 2 * len(curves(s004()))
    keys = list(trial_figures(ts))
    assert any("@100mbit" in k for k in keys) and any("@" not in k for k in keys)


def both_rates():
    shaped = s004()                                 # a small set keeps 96 % of direct: reproduced
    for t in shaped:
        t["link_rate_bps"] = 10 ** 8
        t["trial_id"] += "-100mbit"
    return shaped + s004(small=0.5, big_drops=False, direct_top=0.5)


def test_a_study_is_judged_at_the_runs_own_rate_with_the_unshaped_bed_beside():
    ts = both_rates()
    cmp = compare_study(run_of("seed-004"), ts)
    got = {f.id: f.verdict for f in cmp.findings}
    assert got["seed-004/small-set-keeps-cross"] == REPRODUCED
    assert got["seed-004/small-set-keeps-cross@unshaped"] == NOT_REPRODUCED
    assert got["seed-004/large-sets-fall-with-streams"] == REPRODUCED
    assert got["seed-004/large-sets-fall-with-streams@unshaped"] == NOT_REPRODUCED
    titles = [t.title for t in cmp.tables]
    assert any(x.endswith("[100 Mbit/s link]") and x.startswith("fwlab:") for x in titles)
    assert any(x.endswith("[unshaped bed]") and x.startswith("fwlab:") for x in titles)
    # the published-only table is shown once
    assert sum("as published" in x and "% of the cross" in x for x in titles) == 1
    assert "verdicts are read on the 100 Mbit/s link" in cmp.scaling[0]
    # each rate's findings read only its own trials
    shaped_ids = {t["trial_id"] for t in ts if t.get("link_rate_bps")}
    for f in cmp.findings:
        assert (set(f.trial_ids) <= shaped_ids) != f.id.endswith("@unshaped") or not f.trial_ids
    # the unshaped partition knows it is unshaped (seed 004's regime check reads the link rate)
    unshaped_zero = [t for t in s004(small=0.5, zero=0.55)]
    shaped = s004(small=0.5, zero=0.55)
    for t in shaped:
        t["link_rate_bps"] = 10 ** 8
        t["trial_id"] += "-100mbit"
    got = {f.id: f for f in compare_study(run_of("seed-004"), shaped + unshaped_zero).findings}
    assert got["seed-004/small-set-keeps-cross"].verdict == NOT_REPRODUCED
    f = got["seed-004/small-set-keeps-cross@unshaped"]
    assert f.verdict == INCONCLUSIVE and "cannot reach the seed's regime" in f.reason


def test_link_speeds_are_worded_in_one_place():
    from fwlab.report.line_rate import render
    from fwlab.linerate import speed_words
    from fwlab.results.identity import link_words

    assert (speed_words(1e8), speed_words(1e9), speed_words(2.5e10)) == ("100 Mbit/s", "1 Gbit/s", "25 Gbit/s")
    assert link_words(10 ** 8) == "100 Mbit/s link" and link_words(None) == "unshaped bed"
    from trials import full_trial

    t = full_trial(kind="stream", traffic="engine", size_bytes=64, metrics={
        "frame_size": 64, "line_rate_pct": 50.0, "line_rate_bps": 1e9, "line_rate_link": "client:c0"})
    assert "client:c0 at 1 Gbit/s" in render([t])


def test_the_link_rate_is_typed_once_and_keeps_its_form():
    """"100mbit" is parsed once, by the suite model, into a LineRate; the plan, the bed's key, the
    topology and the shaper carry that LineRate; the record stores the same number as before and
    the suite's own record the text as written; a trial read back from the record is typed again."""
    import json
    import pickle

    from fwlab.results.trial import TrialRecord
    from fwlab.run.beds import topology
    from fwlab.testbed.shaping import LinkShape

    base = dict(name="t", rules=[5], traffic=[{"kind": "tcp"}])
    suite = Suite(**base, link_rate=["0.1gbit", "none"])
    rate = suite.own_link_rate
    assert isinstance(rate, LineRate) and rate == 10 ** 8 and rate.tc == "100mbit" and rate.words == "100 Mbit/s"
    assert suite.model_dump()["link_rate"] == ["0.1gbit", "none"]           # the suite as written
    assert Suite(**suite.model_dump()).link_rates == [10 ** 8, None]         # ... and read back (resume)
    plan = expand(suite).trials
    shaped = [t for t in plan if t.link_rate_bps]
    assert shaped and all(type(t.link_rate_bps) is LineRate for t in shaped)
    assert all(type(t.bed_key[2]) is LineRate for t in shaped)
    topo = topology(suite, "bridge", shaped[0].link_rate_bps)
    assert type(topo.link_rate_bps) is LineRate and topo.to_dict()["link_rate_bps"] == 10 ** 8
    assert type(LinkShape(topo.link_rate_bps).rate_bps) is LineRate
    assert str(rate) == "100000000" and f"{rate}bit" == "100000000bit" and json.dumps(rate) == "100000000"
    assert pickle.loads(pickle.dumps(rate)).text == "0.1gbit"
    ident = shaped[0].to_dict()
    assert json.loads(json.dumps(ident))["link_rate_bps"] == 10 ** 8 and ident["trial_id"].endswith("-100mbit-r1")
    line = {**ident, "kind": "stream", "metrics": {}}
    back = TrialRecord.from_json(json.loads(json.dumps(line)))
    assert type(back.link_rate_bps) is LineRate and back.model_dump(mode="json")["identity"]["link_rate_bps"] == 10 ** 8
    for bad in ("fast", "10kbit", "1tbit"):
        with pytest.raises(ValueError):
            LineRate.parse(bad)
