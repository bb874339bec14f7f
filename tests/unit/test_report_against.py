"""fwlab report RUN --against OLD: a "changed since" section by compare's significance rules."""

from __future__ import annotations

import random
import re
from datetime import datetime

from fwlab.analysis.changed_since import DRIFT, changed_since_html
from fwlab.cli import main
from synthetic_runs import write_run

SLOWER = {("linear", 10000): 0.30}


def _rows(page: str) -> dict[str, str]:
    sec = page[page.index("id='changed-since'"):]
    return {m.group(1): m.group(2) for m in
            re.finditer(r"<tr[^>]*><td>([^<]+)</td><td>[^<]*</td><td>[^<]*</td><td>[^<]*</td><td>([^<]+)</td>", sec)}


def _pair(tmp_path, slower):
    rng = random.Random(5)
    old = write_run(tmp_path, "old", datetime(2026, 11, 1), rng, run_sd=0.0, rep_sd=0.01, repetitions=5)
    new = write_run(tmp_path, "new", datetime(2026, 11, 2), rng, run_sd=0.0, rep_sd=0.01, slower=slower,
                    repetitions=5)
    return old, new


def test_changed_configuration_is_significant_and_only_it(tmp_path, capsys):
    old, new = _pair(tmp_path, SLOWER)
    assert main(["report", str(new), "--against", str(old), "-q"]) == 0
    rows = _rows((new / "report.html").read_text())
    assert len(rows) == 16      # 12 figures over their run's 0-rule reference, and the 4 references (drift)
    assert sum(v == DRIFT for v in rows.values()) == 4
    changed = ["routed nftables linear 10000r ip4 tcp dflt throughput_bps",
               "routed nftables linear 10000r ip4 udp 64B rx_pps"]
    assert all(rows[k] == "significant" for k in changed)
    assert set(changed) <= set(list(rows)[:sum(v == "significant" for v in rows.values())])  # listed first
    page = (new / "report.html").read_text()
    for k in changed:
        change = float(re.search(re.escape(k) + r"</td><td>[^<]*</td><td>[^<]*</td><td>([-+0-9.]+)%", page).group(1))
        assert -33 < change < -27


def test_same_figures_again_are_not_significant(tmp_path):
    import shutil

    old, _ = _pair(tmp_path, None)
    again = tmp_path / "again"
    shutil.copytree(old, again)
    rows = _rows(f"<p id='changed-since'></p>{changed_since_html(again, old)}")
    assert len(rows) == 16 and set(rows.values()) == {"not significant", DRIFT}


def test_single_repetitions_are_insufficient_data(tmp_path):
    old, new = _pair(tmp_path, SLOWER)
    for run in (old, new):
        lines = (run / "trials.jsonl").read_text().splitlines()
        (run / "trials.jsonl").write_text("\n".join(ln for ln in lines if '"repetition":1,' in ln) + "\n")
    rows = _rows(f"<p id='changed-since'></p>{changed_since_html(new, old)}")
    assert rows and set(rows.values()) == {"insufficient data", DRIFT}


def test_bad_against_exits_2(tmp_path, capsys):
    old, new = _pair(tmp_path, None)
    assert main(["report", str(new), "--against", str(tmp_path / "nope"), "-q"]) == 2
    assert main(["report", str(new), "--noise", str(tmp_path / "x.json"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("fwlab: error:") == 2 and "Traceback" not in err
