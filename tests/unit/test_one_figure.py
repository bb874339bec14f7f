"""One figure, one value: a rebuilt record's figures agree across report.html, summary.csv,
``fwlab report --json``, the JSON export and ``fwlab.load`` (all read fwlab.stats.run_summary).

The record is the quick suite's shape with 3 repetitions per point and enough noise that a
symmetric t interval of the mean would go below 0 at some points (tests/unit/synthetic_runs.py),
and the golden record tests/golden/run-tiny (1 repetition: no intervals)."""

from __future__ import annotations

import csv
import json
import math
import random
import re
import shutil
from datetime import datetime
from pathlib import Path

import pytest

import fwlab
from fwlab import cli
from fwlab.analysis.export import export_run
from fwlab.report import write_report
from fwlab.results.curves import METRIC_INFO, METRICS
from fwlab.stats.run_summary import SUMMARY_COLUMNS, row_key

from synthetic_runs import GOLDEN, write_run

#: the columns the page shows, with the digits it shows them to and the scale to its unit
SHOWN = {**{f"{m}_pct_of_0_rules{s}": (1, 1.0) for m in METRICS for s in ("", "_ci95_low", "_ci95_high")},
         **{f"{m}_median": (2, METRIC_INFO[m][2]) for m in ("throughput_bps", "rx_pps", "transactions_per_s")}}
NUMERIC = [c for c in SUMMARY_COLUMNS if any(c.startswith(m + "_") for m in METRICS)]


@pytest.fixture(params=["synthetic", "golden"])
def record(request, tmp_path) -> Path:
    if request.param == "golden":
        run = tmp_path / "run-tiny"
        shutil.copytree(GOLDEN, run)
        return run
    # a per-repetition spread of 30 %: t(2 df) = 4.3 puts a symmetric interval below 0 at some points
    return write_run(tmp_path, "run", datetime(2026, 11, 1, 3), random.Random(5), repetitions=3,
                     run_sd=0.0, rep_sd=0.3)


def _num(v) -> float | None:
    if v is None or v == "":
        return None
    f = float(v)
    return None if math.isnan(f) else f


def test_every_figure_agrees_across_outputs(record, capsys):
    write_report(record)
    with (record / "summary.csv").open() as f:
        csv_rows = {row_key(r): r for r in csv.DictReader(f)}
    assert cli.main(["report", str(record), "--json", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    json_rows = {r["key"]: r for r in doc["figures"]}
    export_rows = {r["key"]: r for r in json.loads(export_run(record, "json")[0])["summary"]}
    frame = fwlab.load(record).summary_dataframe()
    load_rows = {r["key"]: r for r in frame.to_dict("records")}
    assert set(csv_rows) == set(json_rows) == set(export_rows) == set(load_rows) and csv_rows

    compared = 0
    for key, c in csv_rows.items():
        assert set(json_rows[key]) - {"key"} == set(SUMMARY_COLUMNS)
        for col in NUMERIC:
            want = _num(c[col])
            for name, rows in (("json", json_rows), ("export", export_rows), ("load", load_rows)):
                got = _num(rows[key].get(col))
                assert (got is None) == (want is None), (name, key, col, got, want)
                if want is not None:
                    assert got == pytest.approx(want, rel=1e-12), (name, key, col)
                    compared += 1
    assert compared > 100

    # the page: every figure it marks (data-fig) is the CSV's value as shown
    page = (record / "report.html").read_text()
    shown = re.findall(r"<span data-fig='([^#']+)#([a-z0-9_]+)'>([^<]*)</span>", page)
    assert shown
    seen = set()
    for key, col, text in shown:
        key = key.replace("&#x27;", "'")
        digits, scale = SHOWN[col]
        want = _num(csv_rows[key][col])
        assert want is not None, (key, col)
        assert float(text) == pytest.approx(round(want * scale, digits), abs=10 ** -digits / 2 + 1e-9), (key, col)
        seen.add((key, col))
    # every point's primary median and every point with rules its % of the 0-rule reference are on it
    for key, c in csv_rows.items():
        m = "rx_pps" if c["traffic"] == "udp" else "throughput_bps"
        assert (key, f"{m}_median") in seen
        if int(c["rules"]) > 0:
            assert (key, f"{m}_pct_of_0_rules") in seen
            if c[f"{m}_pct_of_0_rules_ci95_low"]:  # else the page says 'no interval'
                assert (key, f"{m}_pct_of_0_rules_ci95_low") in seen


def test_intervals_of_a_rate_never_go_below_zero(tmp_path):
    run = write_run(tmp_path, "run", datetime(2026, 11, 1, 3), random.Random(5), repetitions=2,
                    run_sd=0.0, rep_sd=0.3)
    write_report(run)
    rows = list(csv.DictReader((run / "summary.csv").open()))
    assert min(_num(r["rx_pps_min"]) for r in rows) > 0  # rates, all positive
    # the symmetric t interval of the mean would go below 0 at some of these points
    from fwlab.stats.summary import summarize

    trials = [json.loads(line) for line in (run / "trials.jsonl").read_text().splitlines()]
    by_point: dict = {}
    for t in trials:
        by_point.setdefault((t["layout"], t["rules"], t["traffic"]), []).append(t["metrics"]["rx_pps"])
    assert any(summarize(v).ci_mean[0] < 0 for v in by_point.values())
    lows = [_num(r[f"{m}_{s}"]) for r in rows for m in METRICS
            for s in ("ci95_low", "pct_of_0_rules_ci95_low")]
    lows = [v for v in lows if v is not None]
    assert lows and min(lows) >= 0.0
    # and each interval holds its own estimate (the mean; the ratio of means)
    for r in rows:
        for m in METRICS:
            lo, mean, hi = (_num(r[f"{m}_{s}"]) for s in ("ci95_low", "mean", "ci95_high"))
            if lo is not None:
                assert lo <= mean <= hi
            lo, pct, hi = (_num(r[f"{m}_pct_of_0_rules{s}"]) for s in ("_ci95_low", "", "_ci95_high"))
            if lo is not None:
                assert lo <= pct <= hi


def test_mean_interval_is_on_the_log_scale_for_rates():
    from fwlab.stats.summary import mean_interval, summarize

    vals = [10.0, 100.0]
    lo, hi = mean_interval(vals)
    assert lo > 0 and summarize(vals).ci_mean[0] < 0  # the symmetric t interval goes below 0
    assert math.log(55.0) - math.log(lo) == pytest.approx(math.log(hi) - math.log(55.0))
    assert mean_interval([-1.0, 2.0]) == summarize([-1.0, 2.0]).ci_mean  # a signed figure: plain t
    assert mean_interval([5.0]) is None and mean_interval([3.0, 3.0]) == (3.0, 3.0)
