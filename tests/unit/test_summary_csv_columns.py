"""summary.csv: the same columns in the same documented order whatever the suite."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

from fwlab.report.summary import CURVE_FIELDS, METRICS, SUMMARY_COLUMNS, curves, summary_csv

ROOT = Path(__file__).resolve().parents[2]
TRIALS = [json.loads(line) for line in (ROOT / "tests/golden/run-tiny/trials.jsonl").read_text().splitlines()]


def _header_and_rows(trials):
    rows = list(csv.reader(io.StringIO(summary_csv(curves(trials)))))
    return rows[0], rows[1:]


def test_columns_fixed_whatever_the_suite():
    full, rows = _header_and_rows(TRIALS)
    assert tuple(full) == SUMMARY_COLUMNS and len(rows) == 8
    tcp_only, _ = _header_and_rows([t for t in TRIALS if t["traffic"] == "tcp"])
    udp_first, _ = _header_and_rows(sorted(TRIALS, key=lambda t: t["traffic"] != "udp"))
    failed = [{**t, "metrics": None, "error": "boom"} for t in TRIALS]
    none_ok, rows_failed = _header_and_rows(failed)
    empty, no_rows = _header_and_rows([])
    assert full == tcp_only == udp_first == none_ok == empty and no_rows == []
    assert all(r[full.index("errors")] == "1" and r[full.index("throughput_bps_median")] == "" for r in rows_failed)


def test_tcp_rows_leave_loss_empty():
    header, rows = _header_and_rows(TRIALS)
    tcp = [r for r in rows if r[header.index("traffic")] == "tcp"]
    assert tcp and all(r[header.index("loss_ratio_median")] == "" for r in tcp)
    assert all(float(r[header.index("throughput_bps_median")]) > 0 for r in tcp)


def test_order_is_the_documented_one():
    assert SUMMARY_COLUMNS[:len(CURVE_FIELDS) + 3] == CURVE_FIELDS + ("rules", "n", "errors")
    assert SUMMARY_COLUMNS[-1] == "quality_flags"
    doc = (ROOT / "docs/record-format.md").read_text()
    section = doc[doc.index("## summary.csv"):]
    section = section[:section.index("\n## ") if "\n## " in section else None]
    flat = re.sub(r"\s+", " ", section)
    assert ", ".join(CURVE_FIELDS) in flat and ", ".join(METRICS) in flat
