import json
import statistics
import shutil

import pytest

from goldens import GOLDEN
from fwlab.stats.ratio import ratio_to_zero
from fwlab.errors import RecordError
from fwlab.report import write_report
from fwlab.report.summary import curves, per_rule_costs, summary_rows
from fwlab.results import RunRecord, TrialIdentity, trial_record


def _ident(trial_id: str, rep: int = 1) -> dict:
    ident = TrialIdentity(suite="s", mode="routed", backend="nftables", layout="linear", rules=0,
                          stateful_shortcut=False, ip_version=4, traffic="udp", tool="iperf3", size_bytes=64,
                          streams=1, rate_bps=None, duration_s=1.0, repetition=rep).to_dict()
    return {**ident, "trial_id": trial_id}


def test_append_read_and_torn_tail(tmp_path):
    rec = RunRecord.create(tmp_path, "s", {"suite": {"name": "s"}})
    for i in range(3):
        rec.append_trial(trial_record(_ident(f"t{i}"), metrics={"x": i}, started_utc="now"))
    rec.append_trial(trial_record(_ident("t1"), metrics=None, started_utc="now", error="boom"))
    with open(rec.path / "trials.jsonl", "a") as fh:
        fh.write('{"trial_id": "t9", "kind"')  # killed mid-write
    again = RunRecord.open(rec.path)
    ids = [t["trial_id"] for t in again.trials()]
    assert ids == ["t0", "t2", "t1"]  # last line per id wins
    assert again.finished_ids() == {"t0", "t2"}  # the failed trial runs again on resume
    again.repair_torn_tail()
    assert (rec.path / "trials.jsonl").read_text().endswith("\n")
    assert len(again.trials()) == 3


def test_terminal_summary_names_the_pooled_reference_its_percentages_are_of(tmp_path):
    import io

    from fwlab.report import print_summary

    rec = RunRecord.create(tmp_path, "s", {"suite": {"name": "s"}})
    # linear's own 0-rule median 320 kpps, set's 400: pooled reference mean 360; 100r at 252 = 70 %
    rates = {("linear", 0): [300e3, 320e3, 340e3], ("set", 0): [380e3, 400e3, 420e3],
             ("linear", 100): [252e3, 252e3, 252e3], ("set", 100): [360e3, 360e3, 360e3]}
    for (layout, rules), values in rates.items():
        for rep, v in enumerate(values, 1):
            ident = {**_ident(f"{layout}-{rules}-{rep}", rep), "layout": layout, "rules": rules}
            rec.append_trial(trial_record(ident, metrics={"rx_pps": v}, started_utc="now"))
    out = io.StringIO()
    print_summary(rec.path, out)
    lin = [line for line in out.getvalue().splitlines() if "nftables linear" in line][0]
    assert "0-rule reference (pooled linear+set, mean of 6) 360.0" in lin
    assert "own 0r median 320.0" in lin and " 0r 320.0" not in lin
    assert "100r 252.0 (70%" in lin


def test_open_rejects_unknown_versions(tmp_path):
    with pytest.raises(RecordError):
        RunRecord.open(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps({"record_version": 999}))
    with pytest.raises(RecordError, match="version 999"):
        RunRecord.open(tmp_path)


def test_report_from_recorded_run(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(GOLDEN / "run-tiny", run)
    out = write_report(run)
    page = out.read_text()
    assert page.count("<svg") >= 3
    assert "nftables linear" in page and "Per-rule cost" in page and "Rule-set load time" in page
    csv = (run / "summary.csv").read_text().splitlines()
    assert csv[0].startswith("mode,backend,layout")
    assert len(csv) == 1 + 8  # 4 curves x 2 rule counts


def test_summary_ratios_use_the_shared_zero_rule_reference():
    rec = RunRecord.open(GOLDEN / "run-tiny")
    cs = curves(rec.trials())
    lin = [c for c in cs if c.k["layout"] == "linear" and c.k["traffic"] == "udp"][0]
    st = [c for c in cs if c.k["layout"] == "set" and c.k["traffic"] == "udp"][0]
    # linear and set load the same rule set at 0 rules (same digest): one pooled reference
    assert lin.shared_ref is st.shared_ref and lin.shared_with == ("linear", "set")
    pooled = lin.points[0].values["rx_pps"] + st.points[0].values["rx_pps"]
    p1 = lin.points[1000].median("rx_pps")
    r = ratio_to_zero(lin, "rx_pps", 1000)      # one repetition at 1000 rules: no interval
    assert r.ratio == pytest.approx(p1 / statistics.fmean(pooled)) and not r.has_interval
    rows = summary_rows(cs)
    assert all("rx_pps_median" in r for r in rows)
    # the CSV's percentage is that same ratio of means (the one its interval is built around)
    row = [r for r in rows if r["layout"] == "linear" and r["traffic"] == "udp" and r["rules"] == 1000][0]
    assert row["rx_pps_pct_of_0_rules"] == pytest.approx(100 * p1 / statistics.fmean(pooled))
    costs = per_rule_costs(cs)
    assert costs and all(r["per_rule_ns"] > 0 for r in costs)
