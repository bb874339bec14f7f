"""load (fwlab.analysis.load), the tidy DataFrame, the long-format series export and the docs recipe."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest

from fwlab.analysis.export import IDENTITY_FIELDS, export_run
from fwlab.analysis.load import SERIES_COLUMNS, Trial, load, series_rows
from fwlab.cli import main
from fwlab.errors import FwlabError
from trials import full_trial

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "run-tiny"


def test_load_gives_trials_with_identity():
    run = load(GOLDEN)
    assert run.suite == "tiny" and run.status == "complete" and len(run.trials) == 8
    t = run.trials[0]
    assert isinstance(t, Trial) and t.kind == "stream" and t.backend == "nftables"
    assert t["rules"] == t.rules == 0 and t.ok and t.metric("throughput_bps") > 0
    with pytest.raises(AttributeError):
        t.no_such_field  # noqa: B018
    with pytest.raises(TypeError):
        t["rules"] = 5  # read-only


def test_load_bad_dir_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(FwlabError, match="no fwlab run record"):
        load(tmp_path)


def test_series_rows_long_format():
    rows = series_rows(load(GOLDEN).trials)
    assert rows[0] == ("ip4tcp-dflt-nftables-0r-linear-routed-r1", 1.009, "throughput_bps", 2874054966.5735774)
    assert all(isinstance(v, float) and f != "t_s" for _, _, f, v in rows)
    skipped = series_rows([full_trial(trial_id="x", series=[{"t_s": 1, "a": None, "b": "s", "c": True, "d": 2}])])
    assert skipped == [("x", 1.0, "d", 2.0)]


def test_export_series_csv(tmp_path):
    text, _ = export_run(GOLDEN, "series")
    rows = list(csv.reader(io.StringIO(text)))
    assert tuple(rows[0]) == SERIES_COLUMNS
    assert len(rows) - 1 == len(series_rows(load(GOLDEN).trials)) > 0
    out = tmp_path / "s.csv"
    assert main(["export", str(GOLDEN), "--format", "series", "--out", str(out)]) == 0
    assert out.read_text() == text


def test_dataframe_identity_first():
    pd = pytest.importorskip("pandas")
    run = load(GOLDEN)
    df = run.to_dataframe()
    assert isinstance(df, pd.DataFrame) and len(df) == 8
    assert list(df.columns[:len(IDENTITY_FIELDS)]) == list(IDENTITY_FIELDS)
    assert list(df.columns[-2:]) == ["flags", "error"]
    assert df.loc[0, "metrics.throughput_bps"] == run.trials[0].metric("throughput_bps")
    s = run.series_dataframe()
    assert list(s.columns) == list(SERIES_COLUMNS) and len(s) == len(series_rows(run.trials))


def _blocks() -> list[str]:
    text = (ROOT / "docs" / "analysis.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_docs_recipe_runs(tmp_path, capsys):
    pytest.importorskip("pandas")
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from synthetic_runs import write_series

    blocks = _blocks()
    assert len(blocks) >= 4
    ns: dict = {"RUN_DIR": str(GOLDEN)}
    for code in blocks:
        exec(compile(code, "docs/analysis.md", "exec"), ns)  # noqa: S102
    out = capsys.readouterr().out
    assert "tiny complete 8 trials" in out and "linear" in out
    write_series(tmp_path, 4, change_at=None)
    assert ns["changes_of"](tmp_path) == []


def test_without_pandas_the_frame_says_how_to_get_it(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas -> ImportError
    run = load(GOLDEN)
    with pytest.raises(FwlabError, match="pandas is not installed") as exc:
        run.to_dataframe()
    assert "fwlab[analysis]" in exc.value.one_line()
    assert len(run.trials) == 8  # everything else works without pandas


def test_package_root_load_returns_typed_frames():
    """``fwlab.load`` is the loader; timestamps are UTC datetimes, flags lists of codes."""
    import pandas as pd

    import fwlab
    from fwlab.analysis.load import load as loader

    assert fwlab.load is loader
    run = fwlab.load(GOLDEN)
    df = run.to_dataframe()
    assert isinstance(df["started_utc"].dtype, pd.DatetimeTZDtype) and str(df["started_utc"].dt.tz) == "UTC"
    assert (df["ended_utc"] > df["started_utc"]).all()
    assert df["rules"].dtype == "int64"
    assert all(isinstance(f, list) for f in df["flags"]) and ["receiver-bound"] in df["flags"].tolist()
    s = run.summary_dataframe()
    assert len(s) == 8 and all(isinstance(f, list) for f in s["quality_flags"])


def test_series_rows_carry_the_link_and_cpu_series():
    """The series export holds a trial's link counters (link.*) and CPU use per role (cpu.*)
    beside its own series, each in time order; a trial without them gives only its own."""
    t = full_trial(trial_id="x", series=[{"t_s": 1, "throughput_bps": 5.0}],
                   extra={"link_series": [{"t_s": 0.5, "server_rx_pps": 10.0, "note": "s"},
                                          {"t_s": 1.5, "server_rx_pps": 12.0}],
                          "cpu_series": {"interval_s": 1.0, "dut_cpu": 1, "missing": {},
                                         "samples": [{"t_s": 1.0, "dut_busy_pct": 40.0, "client_busy_pct": 90.5}]}})
    assert series_rows([t]) == [("x", 1.0, "throughput_bps", 5.0), ("x", 0.5, "link.server_rx_pps", 10.0),
                                ("x", 1.5, "link.server_rx_pps", 12.0), ("x", 1.0, "cpu.dut_busy_pct", 40.0),
                                ("x", 1.0, "cpu.client_busy_pct", 90.5)]
    assert series_rows([full_trial(trial_id="y", series=[], extra={"cpu_series": {"samples": "bad"}})]) == []


def test_frames_are_typed():
    """fwlab.load (the package root): datetimes, integer rule counts, flags as lists, series values
    as floats."""
    pd = pytest.importorskip("pandas")
    import fwlab

    run = fwlab.load(GOLDEN)
    df = run.to_dataframe()
    assert isinstance(df["started_utc"].dtype, pd.DatetimeTZDtype) and str(df["started_utc"].dt.tz) == "UTC"
    assert (df["ended_utc"] >= df["started_utc"]).all()
    assert df["rules"].dtype == "int64" and all(isinstance(f, list) for f in df["flags"])
    s = run.series_dataframe()
    assert s["t_s"].dtype == "float64" and s["value"].dtype == "float64"
    summary = run.summary_dataframe()
    assert all(isinstance(f, list) for f in summary["quality_flags"])
    assert isinstance(pd.Timestamp(df.loc[0, "started_utc"]), pd.Timestamp)
