"""``fwlab export --format parquet``: trials.parquet and series.parquet, read back with pyarrow,
hold the same rows and values as the CSV exports (``--format csv`` and ``--format series``) of
the same record, typed (numbers as numbers, a missing value as null). The record is the golden
tiny run with a recorded trial of every other kind appended, so dict-valued metrics, text and
booleans all occur."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
from pathlib import Path

import pytest
from goldens import GOLDEN

from fwlab import cli
from fwlab.analysis.export import PARQUET_FILES, export_run

pq = pytest.importorskip("pyarrow.parquet")


@pytest.fixture
def run(tmp_path):
    dst = tmp_path / "run"
    shutil.copytree(GOLDEN / "run-tiny", dst)
    with (dst / "trials.jsonl").open("a") as fh:
        for f in sorted((GOLDEN / "kinds").glob("*.json")):
            fh.write(json.dumps(json.loads(f.read_text())) + "\n")
    return dst


def _same(csv_text: str, value) -> bool:
    """A CSV cell and the Parquet value of the same cell agree."""
    if value is None:
        return csv_text == ""
    if isinstance(value, bool):
        return csv_text == str(value)
    if isinstance(value, (int, float)):
        return math.isclose(float(csv_text), value, rel_tol=0, abs_tol=0)
    return csv_text == value


def test_parquet_holds_the_csv_exports_values(run, tmp_path):
    _, paths = export_run(run, "parquet", tmp_path / "pq")
    assert [p.name for p in paths] == list(PARQUET_FILES)
    trials = pq.read_table(paths[0])
    text, _ = export_run(run, "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert trials.num_rows == len(rows) == len((run / "trials.jsonl").read_text().splitlines())
    assert trials.column_names == list(rows[0])
    got = trials.to_pylist()
    kinds = {r["kind"] for r in rows}
    assert {"stream", "rfc2544", "connections", "transactions"} <= kinds
    for want, have in zip(rows, got):
        for col, cell in want.items():
            assert _same(cell, have[col]), (want["trial_id"], col, cell, have[col])
    types = {f.name: str(f.type) for f in trials.schema}
    assert types["rules"] == "int64" and types["metrics.rx_pps"] == "double" and types["trial_id"] == "string"

    series = pq.read_table(paths[1])
    stext, _ = export_run(run, "series")
    srows = list(csv.reader(io.StringIO(stext)))
    assert series.column_names == srows[0]
    assert series.num_rows == len(srows) - 1 > 0
    for want, have in zip(srows[1:], series.to_pylist()):
        assert want[0] == have["trial_id"] and want[2] == have["field"]
        assert float(want[1]) == have["t_s"] and float(want[3]) == have["value"]


def test_cli_writes_parquet_beside_the_record(run, capsys):
    assert cli.main(["export", str(run), "--format", "parquet", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [Path(p).name for p in doc["files"]] == list(PARQUET_FILES)
    assert all(Path(p).parent == run / "parquet" for p in doc["files"])
    pd = pytest.importorskip("pandas")
    frame = pd.read_parquet(doc["files"][0])
    assert len(frame) == len((run / "trials.jsonl").read_text().splitlines())
