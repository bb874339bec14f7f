"""Intervals and the shared 0-rule reference in the report: headline percentages with their
Fieller interval, the % table's intervals, the per-rule cost's slope interval, and linear/set
0-rule repetitions pooled into one reference whose spread is stated as the noise floor. Built on
the recorded run tests/golden/run-tiny (variants with more repetitions). No root."""

from __future__ import annotations

import json
import re

import pytest
from test_analysis_compare import variant

from fwlab.report import write_report
from fwlab.report.overview import headline_sentences, noise_floor_sentences
from fwlab.report.summary import curves, noise_floor, per_rule_costs
from fwlab.results.record import RunRecord


def _curves(run):
    return curves(RunRecord.open(run).trials())


def test_headline_states_each_percentage_with_its_interval(tmp_path):
    cs = _curves(variant(tmp_path / "r", reps=3, jitter=0.03, seed=3))
    lines = headline_sentences(cs)
    assert len(lines) == 2
    for line in lines:
        for pct, lo, hi in re.findall(r"(\d+) % \(95 % CI (\d+)–(\d+) %\)", line):
            assert int(lo) <= int(pct) <= int(hi)
        assert len(re.findall(r"95 % CI", line)) == 2, line   # linear and set, each with its interval
    udp = next(c for c in cs if c.k["traffic"] == "udp" and c.k["layout"] == "linear")
    r = udp.ratio_to_zero("rx_pps", 1000)
    assert r.has_interval and r.low < r.ratio < r.high and r.n_den == 6   # pooled linear + set reference


def test_one_repetition_says_there_is_no_interval(tmp_path):
    lines = headline_sentences(_curves(variant(tmp_path / "r", reps=1)))
    assert lines and all("(no interval: 1 repetition)" in s for s in lines)


def test_linear_and_set_share_one_zero_rule_reference_and_report_its_spread(tmp_path):
    cs = _curves(variant(tmp_path / "r", reps=3, jitter=0.01, seed=4))
    lin = next(c for c in cs if c.k["traffic"] == "udp" and c.k["layout"] == "linear")
    st = next(c for c in cs if c.k["traffic"] == "udp" and c.k["layout"] == "set")
    assert lin.reference() is st.reference() and len(lin.reference().values["rx_pps"]) == 6
    udp = next(r for r in noise_floor(cs) if r["traffic"].startswith("IPv4 UDP"))
    m0 = {c.k["layout"]: sum(c.points[0].values["rx_pps"]) / 3 for c in (lin, st)}
    pooled = (m0["linear"] + m0["set"]) / 2
    # the golden run's two identical 0-rule sets measured 112.9 vs 81.9 kpps: a real noise floor
    assert udp["spread_pct"] == pytest.approx(100 * abs(m0["linear"] - m0["set"]) / pooled)
    assert udp["spread_pct"] > 20 and udp["verdict"] == "significant"
    text = " ".join(noise_floor_sentences(cs))
    assert "load the same rule set at 0 rules" in text and "noise floor" in text


def test_different_zero_rule_sets_are_not_pooled(tmp_path):
    run = variant(tmp_path / "r", reps=2, jitter=0.01, seed=5)
    lines = []
    for line in (run / "trials.jsonl").read_text().splitlines():
        t = json.loads(line)
        if t["layout"] == "set" and t["rules"] == 0:
            t["ruleset_digest"] = "another-rule-set"   # e.g. a backend whose empty set still loads a table
        lines.append(json.dumps(t))
    (run / "trials.jsonl").write_text("\n".join(lines) + "\n")
    cs = _curves(run)
    assert all(c.shared_ref is None for c in cs) and noise_floor(cs) == []
    lin = next(c for c in cs if c.k["traffic"] == "udp" and c.k["layout"] == "linear")
    assert lin.ratio_to_zero("rx_pps", 1000).n_den == 2


def test_cost_fit_slope_interval_and_report_tables(tmp_path):
    run = variant(tmp_path / "r", reps=3, jitter=0.02, seed=6)
    costs = per_rule_costs(_curves(run))
    assert costs and all(r["per_rule_ns_ci"][0] < r["per_rule_ns"] < r["per_rule_ns_ci"][1] for r in costs)
    html = write_report(run).read_text()
    assert "b 95 % interval" in html and "Fieller" in html and "95 % CI" in html
    assert "pooled over linear and set" in html and "Noise floor" in html


def test_summary_rows_carry_the_ratio_interval(tmp_path):
    from fwlab.report.summary import summary_rows

    rows = summary_rows(_curves(variant(tmp_path / "r", reps=3, jitter=0.02, seed=8)))
    row = next(r for r in rows if r["layout"] == "linear" and r["traffic"] == "udp" and r["rules"] == 1000)
    assert row["rx_pps_pct_of_0_rules_ci95_low"] < row["rx_pps_pct_of_0_rules"] < row["rx_pps_pct_of_0_rules_ci95_high"]
