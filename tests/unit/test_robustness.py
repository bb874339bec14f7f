"""Issue 34, classes 1 and 2: a record's own files are never written by a reader, every output
path is checked before the work and written atomically, and reading and resuming are exact about
damage. Each test runs the real entry point (``fwlab.cli.main``) on a copy of the golden record;
a failure is exit 2 with one line naming the problem and the fix, and the record is unchanged."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from goldens import GOLDEN
from fwlab.cli import main
from fwlab.errors import FwlabError, RecordError
from fwlab.files import check_output, write_output
from fwlab.results.store import RunRecord


def run_cli(capsys, argv: list[str]) -> tuple[int, str, str]:
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return rc, out, err


def fails(capsys, argv: list[str], *needles: str) -> str:
    rc, out, err = run_cli(capsys, argv)
    assert rc == 2, (rc, out, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fwlab: error: "), err
    assert "(fix: " in lines[0], lines[0]
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def digest(d: Path) -> dict[str, str]:
    """Every file under `d` (names and contents): what 'unchanged' means."""
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(d.rglob("*"))}


@pytest.fixture
def rec(tmp_path) -> Path:
    d = tmp_path / "run"
    shutil.copytree(GOLDEN / "run-tiny", d)
    return d


def lines_of(d: Path) -> list[str]:
    return (d / "trials.jsonl").read_text().splitlines()


def put_lines(d: Path, lines: list[str], newline: bool = True) -> None:
    (d / "trials.jsonl").write_bytes(("\n".join(lines) + ("\n" if newline else "")).encode())


# -- 1. the record's files are sacred ------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["csv", "series", "json"])
@pytest.mark.parametrize("target", ["trials.jsonl", "run.json"])
def test_export_never_writes_over_the_record(capsys, rec, fmt, target):
    before = digest(rec)
    fails(capsys, ["export", str(rec), "--format", fmt, "--out", str(rec / target)], "run record's own", target)
    assert digest(rec) == before


def test_trend_never_writes_over_the_record(capsys, rec, tmp_path):
    other = tmp_path / "run2"
    shutil.copytree(rec, other)
    before = digest(rec)
    fails(capsys, ["trend", str(rec), str(other), "--out", str(rec / "run.json")], "run record's own")
    assert digest(rec) == before


def test_a_symlink_onto_a_record_file_is_refused(capsys, rec, tmp_path):
    link = tmp_path / "out.csv"
    link.symlink_to(rec / "trials.jsonl")
    before = digest(rec)
    fails(capsys, ["export", str(rec), "--format", "csv", "--out", str(link)], "run record's own")
    assert digest(rec) == before


@pytest.mark.parametrize("out, needle", [("/dev/full", "under /dev"), ("/proc/x", "under /proc"),
                                         ("/sys/x", "under /sys"), ("DIR", "is a directory"),
                                         ("MISSING/x.csv", "does not exist")])
def test_unusable_out_is_one_clean_error(capsys, rec, tmp_path, out, needle):
    out = out.replace("DIR", str(tmp_path)).replace("MISSING", str(tmp_path / "nope"))
    before = digest(rec)
    for argv in (["export", str(rec), "--format", "csv", "--out", out],
                 ["export", str(rec), "--format", "json", "--out", out],
                 ["trend", str(rec), str(rec), "--out", out]):
        fails(capsys, argv, needle)
    assert not (tmp_path / "nope").exists()  # no parent directory created silently
    assert digest(rec) == before


def test_a_fifo_as_out_is_refused(capsys, rec, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    fails(capsys, ["export", str(rec), "--format", "csv", "--out", str(fifo)], "not a regular file")


def test_run_out_under_proc_is_refused_before_anything(capsys):
    fails(capsys, ["run", "quick", "--dry-run", "--out", "/proc/version/x"], "under /proc")
    fails(capsys, ["run", "quick", "--dry-run", "--out", "/etc/hostname"], "not a directory")


def test_flent_out_parent_is_not_created(capsys, tmp_path):
    d = tmp_path / "run"
    shutil.copytree(GOLDEN / "run-tiny", d)
    fails(capsys, ["export", str(d), "--format", "flent", "--out", str(tmp_path / "a" / "b")], "does not exist")
    assert not (tmp_path / "a").exists()


def test_export_writes_atomically_and_leaves_the_old_file_on_failure(rec, tmp_path, monkeypatch):
    out = tmp_path / "out.csv"
    out.write_text("old\n")
    import fwlab.files as files

    def broken_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", broken_fsync)
    with pytest.raises(FwlabError, match="No space left"):
        write_output(out, "new\n", "csv output file")
    assert out.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.csv", "run"]  # no temporary file left
    monkeypatch.undo()
    write_output(out, "new\n")
    assert out.read_text() == "new\n"


def test_check_output_takes_an_ordinary_file_beside_a_record(rec):
    assert check_output(rec / "export.csv") == (rec / "export.csv").resolve()


@pytest.mark.parametrize("name", ["x/y", "../..", ".hidden", "a b"])
def test_suite_names_from_a_record_never_build_default_paths(capsys, tmp_path, name):
    runs = []
    for i in range(2):
        d = tmp_path / f"r{i}"
        shutil.copytree(GOLDEN / "run-tiny", d)
        run = json.loads((d / "run.json").read_text())
        run["suite"]["name"] = name
        (d / "run.json").write_text(json.dumps(run))
        runs.append(str(d))
    before = digest(tmp_path)
    fails(capsys, ["trend", *runs], "cannot name a file")
    fails(capsys, ["baseline", "--from-runs", *runs], "cannot name a file")
    assert digest(tmp_path) == before


@pytest.mark.parametrize("parent_mode", [0o700, 0o755])
def test_root_owned_record_read_as_another_user(parent_mode):
    """A record root wrote, read by an ordinary user: one clean error (it cannot be read, or the
    report cannot be written into it), never a PermissionError traceback."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to read as another user")
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="fwlab-perm-", dir="/tmp"))
    try:
        os.chmod(top, parent_mode)
        d = top / "run"
        shutil.copytree(GOLDEN / "run-tiny", d)
        os.chmod(d, 0o755)
        (d / "trials.jsonl").chmod(0o600)
        src = Path(__file__).resolve().parents[2] / "src"
        before = digest(d)
        for argv in (["report", str(d), "-q"], ["export", str(d), "--format", "csv"],
                     ["run", "--resume", str(d), "--dry-run"], ["trend", str(d), str(d)]):
            cp = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable,
                                 "-m", "fwlab", *argv], capture_output=True, text=True, timeout=120,
                                env={**os.environ, "PYTHONPATH": str(src), "HOME": "/tmp", "MPLCONFIGDIR": "/tmp"},
                                cwd="/tmp")
            assert cp.returncode == 2, (argv, cp.returncode, cp.stderr)
            assert len(cp.stderr.splitlines()) == 1 and "fwlab: error: " in cp.stderr, cp.stderr
            assert "Traceback" not in cp.stderr
        assert digest(d) == before
    finally:
        shutil.rmtree(top)


# -- 2. exact about damage -------------------------------------------------------------------------------
def test_a_garbage_last_line_with_its_newline_is_damage_not_a_torn_write(capsys, rec):
    put_lines(rec, lines_of(rec) + ['{"garbage": 1}'])
    r = RunRecord.open(rec).read()
    assert r.bad_lines == [9] and not r.torn_tail
    state = RunRecord.open(rec).state()
    assert state.status == "damaged" and "cut off" not in state.sentence()
    before = digest(rec)
    fails(capsys, ["run", "--resume", str(rec), "--dry-run"], "lines 9", "--repair")
    fails(capsys, ["run", "--resume", str(rec)], "lines 9", "--repair")
    assert digest(rec) == before


def test_a_torn_tail_is_only_a_last_line_without_its_newline(rec):
    lines = lines_of(rec)
    put_lines(rec, lines + [lines[0][:40]], newline=False)
    r = RunRecord.open(rec).read()
    assert r.torn_tail and not r.bad_lines and len(r.trials) == 8
    RunRecord.open(rec).repair_torn_tail()
    assert lines_of(rec) == lines


def test_a_whole_last_trial_without_its_newline_is_kept(rec):
    lines = lines_of(rec)
    put_lines(rec, lines, newline=False)
    r = RunRecord.open(rec).read()
    assert not r.torn_tail and len(r.trials) == 8 and r.unterminated
    RunRecord.open(rec).repair_torn_tail()
    assert (rec / "trials.jsonl").read_text() == "\n".join(lines) + "\n"


def test_invalid_utf8_is_damage_named_with_its_line(rec):
    raw = (rec / "trials.jsonl").read_bytes().split(b"\n")
    raw[2] = raw[2].replace(b'"tiny"', b'"ti\xffny"', 1)
    (rec / "trials.jsonl").write_bytes(b"\n".join(raw))
    r = RunRecord.open(rec).read()
    assert r.bad_lines == [3] and "UTF-8" in r.bad_reasons[3]
    with pytest.raises(RecordError, match="line 3 .*UTF-8"):
        RunRecord.open(rec).trials()


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_a_non_finite_metric_is_that_trials_damage(capsys, rec, tmp_path, value):
    lines = lines_of(rec)
    tid = json.loads(lines[2])["trial_id"]
    lines[2] = lines[2].replace('"throughput_bps":', f'"throughput_bps":{value},"was":', 1)
    put_lines(rec, lines)
    rc, out, err = run_cli(capsys, ["report", str(rec)])
    assert rc == 0, err  # the report is written, the trial named as damaged
    assert "damaged" in out and tid in out and "metrics.throughput_bps is not a finite number" in out
    out_json = tmp_path / "x.json"
    fails(capsys, ["export", str(rec), "--format", "json", "--out", str(out_json)], tid)
    assert not out_json.exists()


def test_export_json_never_writes_nan(capsys, rec, tmp_path):
    out = tmp_path / "x.json"
    rc, _, err = run_cli(capsys, ["export", str(rec), "--format", "json", "--out", str(out)])
    assert rc == 0, err
    json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the export"))


@pytest.mark.parametrize("field, value, needle", [("ip_version", 7, "ip_version"), ("rules", -1, "rules"),
                                                  ("streams", 0, "streams"), ("duration_s", -2, "duration_s"),
                                                  ("repetition", "1", "repetition")])
def test_record_fields_are_validated_on_read(rec, field, value, needle):
    lines = lines_of(rec)
    t = json.loads(lines[1])
    t[field] = value
    lines[1] = json.dumps(t)
    put_lines(rec, lines)
    r = RunRecord.open(rec).read()
    assert r.bad_lines == [2] and needle in r.bad_reasons[2]


def test_run_json_status_is_an_enumeration(capsys, rec):
    run = json.loads((rec / "run.json").read_text())
    run["status"] = "done-ish"
    (rec / "run.json").write_text(json.dumps(run))
    fails(capsys, ["report", str(rec)], "status")


def test_trials_jsonl_a_directory_is_refused_everywhere(capsys, rec):
    (rec / "trials.jsonl").unlink()
    (rec / "trials.jsonl").mkdir()
    fails(capsys, ["run", "--resume", str(rec), "--dry-run"], "is a directory")
    fails(capsys, ["run", "--resume", str(rec)], "is a directory")
    fails(capsys, ["export", str(rec), "--format", "csv"], "is a directory")
    assert RunRecord.open(rec).state().status == "damaged"


def test_repair_moves_bad_lines_aside_and_keeps_them(rec):
    lines = lines_of(rec)
    bad = ['{"garbage": 1}', "not json at all"]
    put_lines(rec, lines[:3] + [bad[0]] + lines[3:6] + [bad[1]] + lines[6:])
    r = RunRecord.open(rec)
    side = r.set_aside_bad_lines()
    assert lines_of(rec) == lines
    kept = side.read_text()
    assert bad[0] in kept and bad[1] in kept and "# line 4:" in kept and "# line 8:" in kept
    assert RunRecord.open(rec).read().bad_lines == []


def test_a_refused_resume_changes_nothing(rec, monkeypatch):
    """A record holding a trial the suite does not plan: refused before the resume event and the
    'running' status are written (nothing is measured: the test bed steps are replaced)."""
    import fwlab.run.start as ex

    lines = lines_of(rec)
    t = json.loads(lines[0])
    t["trial_id"] = "ip4tcp-dflt-nftables-999r-linear-routed-r1"
    put_lines(rec, lines + [json.dumps(t)])
    monkeypatch.setattr("fwlab.run.preflight.preflight", lambda *a, **k: None)
    monkeypatch.setattr(ex, "execute", lambda *a, **k: pytest.fail("the resume went on to run trials"))
    before = digest(rec)
    with pytest.raises(RecordError, match="does not plan"):
        ex.resume(rec, quiet=True)
    assert digest(rec) == before


def test_repair_with_resume_runs_only_after_every_check(rec, monkeypatch):
    import fwlab.run.start as ex

    lines = lines_of(rec)
    put_lines(rec, lines + ['{"garbage": 1}'])
    monkeypatch.setattr("fwlab.run.preflight.preflight", lambda *a, **k: None)
    ran = []
    monkeypatch.setattr(ex, "execute", lambda suite, plan, r, *a, **k: ran.append(r))
    ex.resume(rec, quiet=True, repair=True)
    assert ran and lines_of(rec) == lines
    assert any(p.name.startswith("trials.damaged-") for p in rec.iterdir())
    assert json.loads((rec / "run.json").read_text())["resume_events"]


@pytest.mark.parametrize("sample, needle", [({"t_s": 1.0, "throughput_bps": "fast"}, "'throughput_bps' is str"),
                                            ({"t_s": "x", "throughput_bps": 1}, "'t_s' is str"),
                                            (7, "valid dictionary")])
def test_series_values_of_the_wrong_type_are_that_trials_damage(capsys, rec, sample, needle):
    """Series values as strings crashed the report (report/timeseries.py: TypeError); now the
    trial is named as damaged and the report is written."""
    lines = lines_of(rec)
    t = json.loads(lines[0])
    t["series"] = [sample]
    lines[0] = json.dumps(t)
    put_lines(rec, lines)
    rc, out, err = run_cli(capsys, ["report", str(rec)])
    assert rc == 0, err
    assert "damaged" in out and needle in out


def test_a_parsed_suite_of_the_wrong_shape_is_damage_on_read(capsys, rec):
    """Found by the fuzz suite: run.json's suite.parsed.traffic as a table crashed the overview."""
    run = json.loads((rec / "run.json").read_text())
    run["suite"]["parsed"]["traffic"] = {"a": "b"}
    (rec / "run.json").write_text(json.dumps(run))
    fails(capsys, ["report", str(rec)], "suite.parsed.traffic")
