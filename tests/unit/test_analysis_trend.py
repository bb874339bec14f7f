"""fwlab trend: jumpavg grouping of 8 recorded runs of `quick`, verdicts, ordering, CLI."""

from __future__ import annotations

import json
import random
import shutil
from datetime import datetime

import pytest

from fwlab.analysis.trend import (INCONCLUSIVE, NOT_SIGNIFICANT, PROGRESSION, REGRESSION, classify_series,
                                  figure_trend, trend)
from fwlab.analysis.trend_page import render
from fwlab.cli import main
from fwlab.errors import FwlabError
from fwlab.stats.compare import SIGNIFICANT
from synthetic_runs import write_run, write_series

AFFECTED = {"routed nftables linear 1000r ip4 tcp dflt throughput_bps",
            "routed nftables linear 1000r ip4 udp 64B rx_pps",
            "routed nftables linear 10000r ip4 tcp dflt throughput_bps",
            "routed nftables linear 10000r ip4 udp 64B rx_pps"}


def test_rule_set_change_halfway_is_marked_on_the_affected_configurations_only(tmp_path):
    paths = write_series(tmp_path, 8, change_at=4)
    random.Random(1).shuffle(paths)  # order given must not matter, nor directory names
    tr = trend(paths)
    assert tr.suite == "quick" and len(tr.runs) == 8 and len(tr.figures) == 16
    assert [r.started_utc[:10] for r in tr.runs] == [f"2026-11-0{d}" for d in range(1, 9)]
    assert {c.figure for c in tr.changes} == AFFECTED
    for c in tr.changes:
        assert (c.run_index, c.direction, c.verdict) == (4, REGRESSION, SIGNIFICANT)
        assert c.before_runs == c.after_runs == 4
        lo, hi = c.change_ci95_pct
        assert lo < c.change_pct < hi < 0  # the interval excludes 0: a drop
        assert c.bits_saved > 0
    unaffected = [f for f in tr.figures if f.figure not in AFFECTED]
    assert all(len(f.groups) == 1 and not f.changes for f in unaffected)


def test_results_directory_equals_the_run_list(tmp_path):
    paths = write_series(tmp_path, 8, change_at=4)
    a, b = trend([tmp_path]).to_dict(), trend(paths).to_dict()
    assert a == b


def test_no_change_no_mark(tmp_path):
    write_series(tmp_path, 8, change_at=None)
    tr = trend([tmp_path])
    assert tr.changes == [] and all(len(f.groups) == 1 for f in tr.figures)


def test_change_in_the_last_run_only_is_inconclusive(tmp_path):
    write_series(tmp_path, 8, change_at=7)
    tr = trend([tmp_path])
    assert {c.figure for c in tr.changes} == AFFECTED
    assert all(c.verdict == INCONCLUSIVE and c.after_runs == 1 and "re-run" in c.reason for c in tr.changes)


def test_faster_configuration_is_a_progression(tmp_path):
    write_series(tmp_path, 8, change_at=4, slower={("set", 100): -0.10})
    changes = trend([tmp_path]).changes
    assert changes and {c.figure.split(" ip4")[0] for c in changes} == {"routed nftables set 100r"}
    assert all(c.direction == PROGRESSION and c.change_pct > 0 for c in changes)


def test_split_not_confirmed_by_two_sigma_is_not_significant():
    # repetitions 0.5 apart give jumpavg a fine resolution, so it splits after run 2; the per-run
    # medians before (97.0, 106.7, 99.4: one outlying run) spread too much for 2 sigma to confirm it
    meds = [97.0, 106.7, 99.4, 95.3, 95.6, 95.9, 95.0, 94.8]
    ft = figure_trend("x rx_pps", "rx_pps", [[m, m + 0.5] for m in meds])
    [c] = ft.changes
    assert (c.run_index, c.direction, c.verdict) == (3, REGRESSION, NOT_SIGNIFICANT)
    assert abs(c.change_pct) <= c.threshold_pct and c.change_ci95_pct[0] < 0 < c.change_ci95_pct[1]


def test_loss_ratio_rising_is_a_regression():
    vals = [[0.01, 0.011], [0.012, 0.01], [0.011, 0.012], [0.01, 0.011],
            [0.05, 0.051], [0.052, 0.05], [0.051, 0.05], [0.05, 0.052]]
    ft = figure_trend("x loss_ratio", "loss_ratio", vals)
    assert [(c.run_index, c.direction, c.verdict) for c in ft.changes] == [(4, REGRESSION, SIGNIFICANT)]


def test_classify_series_flat_and_step():
    assert classify_series([100.0, 101.0, 99.0, 100.5, 100.2, 99.6], unit=1.0) == [(0, 5)]
    assert classify_series([100.0, 101.0, 99.0, 80.0, 80.5, 79.6], unit=1.0) == [(0, 2), (3, 5)]


def test_run_missing_a_figure_leaves_a_gap(tmp_path):
    paths = write_series(tmp_path, 8, change_at=4)
    lines = (paths[2] / "trials.jsonl").read_text().splitlines()
    kept = [ln for ln in lines if '"layout":"set","rules":100,' not in ln]
    assert len(kept) < len(lines)
    (paths[2] / "trials.jsonl").write_text("\n".join(kept) + "\n")
    tr = trend([tmp_path])
    f = next(f for f in tr.figures if f.figure.startswith("routed nftables set 100r ip4 tcp"))
    assert f.medians[2] is None and f.run_values[2] == [] and not f.changes
    assert {c.figure for c in tr.changes} == AFFECTED


def test_two_suites_need_a_choice(tmp_path):
    write_series(tmp_path, 3, change_at=None)
    other = write_run(tmp_path, "zz", datetime(2026, 12, 1), random.Random(2))
    run = json.loads((other / "run.json").read_text())
    run["suite"]["name"] = "other"
    (other / "run.json").write_text(json.dumps(run))
    with pytest.raises(FwlabError, match="2 suites") as exc:
        trend([tmp_path])
    assert "--suite" in exc.value.one_line()
    assert len(trend([tmp_path], suite="quick").runs) == 3
    with pytest.raises(FwlabError, match="at least 2 runs"):
        trend([tmp_path], suite="other")


def test_cli_writes_page_and_json(tmp_path, capsys):
    write_series(tmp_path / "res", 8, change_at=4)
    out = tmp_path / "t.html"
    assert main(["trend", str(tmp_path / "res"), "--out", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {c["figure"] for c in data["changes"]} == AFFECTED
    page = out.read_text()
    assert page.count("<svg") == 16 and page.count("significant") >= 4
    assert main(["trend", str(tmp_path / "res")]) == 0
    text = capsys.readouterr().out
    assert "4 change(s)" in text and (tmp_path / "res" / "trend-quick.html").exists()


def test_cli_bad_input_exits_2(tmp_path, capsys):
    assert main(["trend", str(tmp_path / "missing")]) == 2
    (tmp_path / "empty").mkdir()
    assert main(["trend", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert err.count("fwlab: error:") == 2 and "Traceback" not in err


def test_page_says_when_nothing_changed(tmp_path):
    write_series(tmp_path, 4, change_at=None)
    assert "No change" in render(trend([tmp_path]))


def test_golden_shape_is_used(tmp_path):
    # the synthetic runs are real records: the same reader as every other command opens them
    p = write_series(tmp_path, 2, change_at=None)[0]
    shutil.copytree(p, tmp_path / "copy")
    assert main(["export", str(tmp_path / "copy"), "--format", "csv", "--out", str(tmp_path / "x.csv")]) == 0


def test_page_is_the_same_bytes_when_built_twice(tmp_path):
    """Two processes (each with its own matplotlib state) build the same page from the same runs."""
    import subprocess
    import sys
    write_series(tmp_path / "runs", 4, change_at=2)
    for name in ("a.html", "b.html"):
        subprocess.run([sys.executable, "-m", "fwlab.cli", "trend", str(tmp_path / "runs"), "--out",
                        str(tmp_path / name)], check=True, capture_output=True)
    assert (tmp_path / "a.html").read_bytes() == (tmp_path / "b.html").read_bytes()


def test_dashboard_puts_regressions_first_and_marks_them_in_their_plots(tmp_path):
    """CSIT's trending layout: a dashboard row per figure (the regressed ones first, with their
    status and count), the table of changes, then one interactive plot per figure whose change
    is a ring at the run where the new group starts, beside the static SVG."""
    import re

    write_series(tmp_path, 8, change_at=4)
    tr = trend([tmp_path])
    page = render(tr)
    rows = re.findall(r'<tr class="(\w+)"><td><a href="#([^"]+)">([^<]+)</a>', page)
    assert len(rows) == len(tr.figures) == 16
    assert [r[0] for r in rows[:4]] == ["regression"] * 4 and {r[2] for r in rows[:4]} == AFFECTED
    assert all(r[0] == "normal" for r in rows[4:])
    for status, anchor, figure in rows:  # every row links to its figure's plot
        assert f'<section id="{anchor}"><h3>{figure}</h3>' in page
    boxes = re.findall(r"<figure class='plot iplot-box'><div class='static'><svg.*?</svg>\s*</div>"
                       r"<div class='iplot' id='([^']+)'></div><script type='application/json' id='\1-data'>(.*?)</script>",
                       page, flags=re.S)
    assert len(boxes) == 16
    rings = {}
    for ident, doc in boxes:
        marks = [t for t in json.loads(doc)["data"] if t.get("name") == "regressions"]
        if marks:
            rings[ident] = marks[0]["x"]
    assert len(rings) == 4
    label = tr.runs[4].started_utc[:16].replace("T", " ")
    assert all(x == [label] for x in rings.values())  # the change is at run 4 (its first run)
    figs = {f.figure: f for f in tr.figures}
    assert all(figs[f].status == "regression" and figs[f].count("regression") == 1 for f in AFFECTED)
    assert page.count("plotly.min.js") == 1
