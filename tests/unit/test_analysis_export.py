"""fwlab.analysis.export on the recorded run tests/golden/run-tiny: CSV one row per trial, the JSON
document round-trips, and flent files carry what flent's loader requires (tohojo/flent,
flent/resultset.py: ResultSet.unserialise) and load with our reader that follows it."""

from __future__ import annotations

import csv
import gzip
import io
import json
import shutil
from datetime import datetime

import pytest
from goldens import GOLDEN

from fwlab import cli
from fwlab.analysis.export import (
    FLENT_FILEFORMAT_VERSION,
    FLENT_SUFFIX,
    export_run,
    read_flent,
    trials_csv,
)
from fwlab.errors import FwlabError
from fwlab.results import RunRecord
from trials import full_trial


@pytest.fixture
def run(tmp_path):
    dst = tmp_path / "run-tiny"
    shutil.copytree(GOLDEN / "run-tiny", dst)
    return dst


# --- CSV -------------------------------------------------------------------------------------------

def test_csv_has_one_row_per_trial(run):
    text, paths = export_run(run, "csv")
    assert not paths
    rows = list(csv.DictReader(io.StringIO(text)))
    trials = RunRecord.open(run).trials()
    assert len(rows) == len(trials) == 8
    assert [r["trial_id"] for r in rows] == [t["trial_id"] for t in trials]
    cols = rows[0].keys()
    assert {"kind", "mode", "backend", "layout", "rules", "traffic", "size_bytes", "repetition",
            "metrics.rx_pps", "metrics.throughput_bps", "metrics.loss_ratio", "flags", "error"} <= set(cols)
    assert not any(c.startswith("raw") or c == "series" for c in cols)
    udp = next(r for r in rows if r["trial_id"] == "ip4udp-64B-nftables-1000r-linear-routed-r1")
    assert float(udp["metrics.rx_pps"]) == pytest.approx(23468.936408413574)
    tcp = next(r for r in rows if r["traffic"] == "tcp")
    assert tcp["metrics.loss_ratio"] == ""  # null for TCP: an empty cell, never 0


def test_csv_flags_and_errors():
    trials = [
        full_trial({"kind": "stream", "trial_id": "a", "metrics": {"rx_pps": 1.0},
                    "flags": [{"code": "cpu-saturated"}, {"code": "high-cv"}], "error": None, "raw": {"x": 1}}),
        full_trial({"kind": "stream", "trial_id": "b", "metrics": None, "flags": [], "error": "iperf3 died"}),
    ]
    rows = list(csv.DictReader(io.StringIO(trials_csv(trials))))
    assert rows[0]["flags"] == "cpu-saturated;high-cv" and rows[0]["error"] == ""
    assert rows[1]["metrics.rx_pps"] == "" and rows[1]["error"] == "iperf3 died"


# --- JSON ------------------------------------------------------------------------------------------

def test_json_round_trips(run, tmp_path):
    out = tmp_path / "x" / "run.json"  # a file named run.json outside any record is an ordinary output
    (tmp_path / "x").mkdir()  # no parent directory is created for an output (fwlab.files)
    text, paths = export_run(run, "json", out)
    assert text is None and paths == [out]
    doc = json.loads(out.read_text())
    rec = RunRecord.open(run)
    assert {k: doc[k] for k in ("run", "trials")} == {"run": rec.run, "trials": rec.trials()}
    assert len(doc["summary"]) == 8 and all(r["key"] and "rules" in r for r in doc["summary"])
    assert doc["trials"][0]["raw"]  # the JSON document keeps everything, raw output included


# --- flent -----------------------------------------------------------------------------------------

def test_flent_files_have_what_flents_loader_requires(run, tmp_path):
    _, paths = export_run(run, "flent", tmp_path / "flent")
    stream = [t for t in RunRecord.open(run).trials("stream") if t["series"]]
    assert len(paths) == len(stream) == 8
    for path in paths:
        assert path.name.endswith(FLENT_SUFFIX)
        with gzip.open(path, "rt") as fh:
            obj = json.load(fh)  # gzipped JSON
        assert set(obj) >= {"version", "metadata", "x_values", "results", "raw_values"}
        assert obj["version"] == FLENT_FILEFORMAT_VERSION == 3
        md = obj["metadata"]
        assert md["NAME"] in ("tcp_1up_noping", "udp_flood", "command-output")  # flent tests with fitting plots
        for key in ("TIME", "T0"):
            datetime.strptime(md[key], "%Y-%m-%dT%H:%M:%S.%fZ")  # flent's UTC format
        assert md["TOTAL_LENGTH"] == max(obj["x_values"]) and md["STEP_SIZE"] > 0
        assert md["DATA_FILENAME"] == path.name
        for name, ys in obj["results"].items():
            assert len(ys) == len(obj["x_values"])  # flent's add_result asserts this
            assert all("t" in v and "val" in v for v in obj["raw_values"][name])


def test_flent_round_trip_through_the_reader(run, tmp_path):
    _, paths = export_run(run, "flent", tmp_path)
    by_id = {t["trial_id"]: t for t in RunRecord.open(run).trials()}
    for path in paths:
        data = read_flent(path)
        trial = by_id[data.metadata["TITLE"]]
        assert data.x_values == [s["t_s"] for s in trial["series"]]
        series = "TCP upload" if trial["traffic"] == "tcp" else "UDP upload"
        assert data.series(series) == pytest.approx([s["throughput_bps"] / 1e6 for s in trial["series"]])
        assert isinstance(data.metadata["T0"], datetime)
        t0 = data.metadata["T0"]
        assert t0.strftime("%Y-%m-%dT%H:%M:%S.%fZ") == trial["started_utc"]
        raw_t = [v["t"] for v in data.raw_values[series]]
        assert raw_t == sorted(raw_t)
        assert data.metadata["TEST_PARAMETERS"]["rules"] == trial["rules"]
        if trial["traffic"] == "tcp":
            assert data.series("TCP retransmits") == [s["retransmits"] for s in trial["series"]]
        else:
            assert data.series("tx packet rate") == [s["tx_pps"] for s in trial["series"]]


def _rewrite(path, change):
    with gzip.open(path, "rt") as fh:
        obj = json.load(fh)
    change(obj)
    with gzip.open(path, "wt") as fh:
        json.dump(obj, fh)


def test_reader_refuses_what_flents_loader_refuses(run, tmp_path):
    _, paths = export_run(run, "flent", tmp_path)
    p = paths[0]
    _rewrite(p, lambda o: o.update(version=5))
    with pytest.raises(FwlabError, match="too new"):
        read_flent(p)
    _rewrite(p, lambda o: (o.update(version=3), o["metadata"].pop("NAME")))
    with pytest.raises(FwlabError, match="no NAME"):
        read_flent(p)
    _rewrite(p, lambda o: (o["metadata"].update(NAME="x"), o["x_values"].append(3.0)))
    with pytest.raises(FwlabError, match="x values"):
        read_flent(p)
    _rewrite(p, lambda o: (o["x_values"].pop(), o["metadata"].update(TIME="yesterday")))
    with pytest.raises(FwlabError, match="not an ISO time"):
        read_flent(p)
    _rewrite(p, lambda o: (o["metadata"].update(TIME="2026-01-01T00:00:00", TOTAL_LENGTH=None),
                           o.update(version=4)))
    data = read_flent(p)  # flent 2.x files (version 4) read too; TOTAL_LENGTH defaults to max(x)
    assert data.metadata["TOTAL_LENGTH"] == max(data.x_values)


def test_flent_needs_series(tmp_path):
    dst = tmp_path / "r"
    shutil.copytree(GOLDEN / "run-tiny", dst)
    lines = [json.loads(line) for line in (dst / "trials.jsonl").read_text().splitlines()]
    for t in lines:
        t["series"] = []
    (dst / "trials.jsonl").write_text("".join(json.dumps(t) + "\n" for t in lines))
    with pytest.raises(FwlabError, match="no stream/parallel/attack/rtt trial with a per-interval series"):
        export_run(dst, "flent", tmp_path / "out")


# --- CLI -------------------------------------------------------------------------------------------

def test_cli_export(run, tmp_path, capsys):
    assert cli.main(["export", str(run), "--format", "csv"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 9  # header + 8 trials
    assert cli.main(["export", str(run), "--format", "flent"]) == 0
    assert capsys.readouterr().out.strip() == f"8 flent files in {run / 'flent'}"
    assert cli.main(["export", str(run), "--format", "json", "--out", str(tmp_path / "r.json")]) == 0
    assert json.loads((tmp_path / "r.json").read_text())["run"]["suite"]["name"] == "tiny"
    assert cli.main(["export", str(tmp_path / "nothing"), "--format", "csv"]) == 2
    assert "no fwlab run record" in capsys.readouterr().err


def test_flent_itself_loads_the_files(run, tmp_path):
    """flent's own loader reads every file (flent is in the test extra; skipped only without it)."""
    resultset = pytest.importorskip("flent.resultset")
    _, paths = export_run(run, "flent", tmp_path)
    for path in paths:
        rs = resultset.load(str(path))
        ours = read_flent(path)
        assert rs.meta("NAME") == ours.metadata["NAME"]
        assert list(rs.x_values) == ours.x_values
        for name in ours.results:
            assert rs.series(name) == ours.results[name]
