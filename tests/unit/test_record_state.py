"""Reports say what the record is (complete / incomplete / damaged / interrupted / resumed),
never compare configurations at different rule counts in a headline, and rebuild byte-identical."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from goldens import GOLDEN
from fwlab import cli
from fwlab.report import write_report
from fwlab.report.overview import headline_sentences
from fwlab.results import RunRecord, TrialIdentity, trial_record
from fwlab.results.curves import curves

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def run(tmp_path) -> Path:
    """The golden record as this fwlab writes it (1.1: the planned trial ids stored)."""
    d = tmp_path / "run"
    shutil.copytree(GOLDEN / "run-tiny", d)
    data = json.loads((d / "run.json").read_text())
    ids = [json.loads(x)["trial_id"] for x in (d / "trials.jsonl").read_text().splitlines()]
    data.update(record_version="1.1", plan={**data["plan"], "trial_ids": ids})
    (d / "run.json").write_text(json.dumps(data))
    return d


def _lines(run: Path) -> list[str]:
    return (run / "trials.jsonl").read_text().splitlines(keepends=True)


def test_the_golden_record_is_complete(run, capsys):
    state = RunRecord.open(run).state()
    assert state.status == "complete" and state.present == state.planned == 8 and not state.missing_ids
    assert cli.main(["report", str(run)]) == 0
    assert "record: complete: 8 of 8 planned trials" in capsys.readouterr().out
    assert "complete: 8 of 8 planned trials in the record" in (run / "report.html").read_text()


def test_a_truncated_record_is_incomplete_and_names_the_missing_trials(run, capsys):
    lines = _lines(run)
    gone = [json.loads(x)["trial_id"] for x in lines[5:]]
    (run / "trials.jsonl").write_text("".join(lines[:5]) + lines[5][:40])  # cut mid-line, as a kill does
    state = RunRecord.open(run).state()
    assert state.status == "incomplete" and state.present == 5 and state.torn_tail and not state.bad_lines
    assert state.missing_ids == gone
    assert cli.main(["report", str(run)]) == 0
    out = capsys.readouterr().out
    assert "record: incomplete: 5 of 8 planned trials" in out and gone[0] in out
    page = (run / "report.html").read_text()
    assert "incomplete: 5 of 8 planned trials" in page and all(i in page for i in gone)
    assert "run.json says &#x27;complete&#x27;" in page
    assert "From an incomplete record (5 of 8 planned trials)" in page


def test_a_damaged_line_is_named_not_fatal(run):
    lines = _lines(run)
    lines[2] = "{not json\n"
    lines[4] = "[1, 2]\n"
    lines[6] = json.dumps({**json.loads(lines[6]), "metrics": "fast"}) + "\n"  # JSON, but not a trial record
    (run / "trials.jsonl").write_text("".join(lines))
    state = RunRecord.open(run).state()
    assert state.status == "damaged" and state.bad_lines == [3, 5, 7] and len(state.missing_ids) == 3
    page = write_report(run).read_text()
    assert "damaged: 5 of 8 planned trials" in page
    assert "lines 3 (not JSON: " in page and ", 5 (a JSON list, not an object), 7 (trial " in page
    assert "could not be read" in page


def test_a_missing_trials_file_is_not_complete(run, capsys):
    (run / "trials.jsonl").unlink()
    state = RunRecord.open(run).state()
    assert state.status == "damaged" and state.file_missing and state.present == 0
    assert cli.main(["report", str(run)]) == 0
    out = capsys.readouterr().out
    assert "record: damaged: 0 of 8 planned trials in the record; trials.jsonl is missing" in out
    assert "complete: 0" not in out


def test_interrupted_and_resumed_runs_say_so(run):
    f = run / "run.json"
    data = json.loads(f.read_text())
    f.write_text(json.dumps({**data, "status": "interrupted"}))
    assert RunRecord.open(run).state().status == "interrupted"
    f.write_text(json.dumps({**data, "record_version": "1.1", "plan": {**data["plan"], "trial_ids": []},
                             "resume_events": [{"at_utc": "2026-11-21T07:00:00Z", "trials_done": 3},
                                               {"at_utc": "2026-11-21T08:00:00Z", "trials_done": 6}]}))
    page = write_report(run).read_text()
    assert "resumed 2 times (2026-11-21T07:00:00Z, 2026-11-21T08:00:00Z)" in page


def test_resume_is_recorded_as_an_event(run):
    rec = RunRecord.open(run)
    rec.note_resume()
    again = json.loads((run / "run.json").read_text())
    assert again["record_version"] == "1.1" and again["status"] == "running"
    assert [e["trials_done"] for e in again["resume_events"]] == [8]
    assert len(again["resumed_utc"]) == 1


def _trial(layout: str, rules: int, rx_pps: float) -> dict:
    ident = TrialIdentity(suite="s", mode="routed", backend="nftables", layout=layout, rules=rules,
                          stateful_shortcut=False, ip_version=4, traffic="udp", tool="iperf3", size_bytes=64,
                          streams=1, rate_bps=None, duration_s=1.0, repetition=1).to_dict()
    return trial_record(ident, metrics={"rx_pps": rx_pps}, started_utc="t")


def test_headline_never_compares_different_rule_counts():
    full = [_trial("linear", n, v) for n, v in ((0, 100.0), (100, 90.0), (10000, 7.0))]
    full += [_trial("set", n, v) for n, v in ((0, 100.0), (100, 99.0), (10000, 98.0))]
    (s,) = headline_sentences(curves(full))
    assert "linear at 10,000 rules" in s and "set at 10,000 rules" in s
    # the set's 10000-rule trial is missing (a truncated record): both are stated at 100 rules
    cut = [t for t in full if not (t["layout"] == "set" and t["rules"] == 10000)]
    (s,) = headline_sentences(curves(cut))
    assert "linear at 100 rules" in s and "set at 100 rules" in s and "10,000" not in s
    # no rule count in common: one sentence per rule count, never side by side
    apart = [t for t in full if (t["layout"], t["rules"]) not in (("linear", 100), ("set", 10000))]
    out = headline_sentences(curves(apart))
    assert len(out) == 2
    assert "linear at 10,000 rules" in out[0] and "set" not in out[0]
    assert "set at 100 rules" in out[1] and "linear" not in out[1]


def test_two_builds_of_one_report_are_byte_identical(tmp_path):
    pages = []
    for i in range(2):  # separate processes: matplotlib salts SVG ids per process unless told
        d = tmp_path / f"r{i}"
        shutil.copytree(GOLDEN / "run-tiny", d)
        subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                        "from fwlab.report import write_report; write_report(Path(sys.argv[1]))", str(d)],
                       check=True, env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
        pages.append(((d / "report.html").read_bytes(), (d / "summary.csv").read_bytes()))
    assert pages[0] == pages[1]
    assert b"<svg" in pages[0][0] and b"dc:date" not in pages[0][0]


def test_a_truncated_version_1_record_is_incomplete_by_count(tmp_path):
    d = tmp_path / "old"
    shutil.copytree(GOLDEN / "run-tiny", d)
    lines = _lines(d)
    (d / "trials.jsonl").write_text("".join(lines[:6]))
    state = RunRecord.open(d).state()
    assert state.status == "incomplete" and state.planned_ids is None and state.missing_ids == []
    assert "incomplete: 6 of 8 planned trials" in state.sentence()
    assert "does not store the planned trial ids" in state.sentence()
