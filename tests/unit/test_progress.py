"""The run's progress display (fwlab.run.progress) and a search followed trial by trial
(fwlab.search.watch): plain lines in a log, rich's live display on a terminal, nothing when
quiet, and nothing beside the one JSON document of 'fwlab run --json'."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pytest

from fwlab import cli
from fwlab.run.plan import expand
from fwlab.run.progress import Progress
from fwlab.search import BinaryGoal, run_search
from fwlab.search.mlr import SearchGoal, bounds_after_each_trial
from fwlab.search.simulated import FixedCapacity
from fwlab.search.watch import SearchWatch, load_text
from fwlab.suites import load_suite

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "run-tiny"


@pytest.fixture(scope="module")
def specs():
    return list(expand(load_suite("quick")[0]).trials[:2])


class Log(io.StringIO):
    """A stream that is not a terminal (a CI log)."""

    def isatty(self) -> bool:
        return False


def test_a_log_gets_plain_lines_one_per_trial_step_and_note(specs):
    log = Log()
    p = Progress(total=2, stream=log)
    p.note("test bed x: routed")
    p.trial_started(specs[0])
    p.step("binary trial 1 (rep1): 1.000 Mpps for 1 s, loss 3 %, failed")
    p.trial_done(specs[0], "812.3 kpps")
    p.trial_started(specs[1])
    p.trial_done(specs[1], "ERROR boom")
    p.close()
    lines = log.getvalue().splitlines()
    assert lines[0] == "test bed x: routed"
    assert lines[1] == "  binary trial 1 (rep1): 1.000 Mpps for 1 s, loss 3 %, failed"
    assert re.fullmatch(r"\[#{12}\.{12}\] 1/2 left \d+m\d\ds  " + re.escape(specs[0].trial_id) + ": 812.3 kpps",
                        lines[2])
    assert re.fullmatch(r"\[#{24}\] 2/2 left 0m00s  " + re.escape(specs[1].trial_id) + ": ERROR boom", lines[3])
    assert len(lines) == 4
    assert "\x1b" not in log.getvalue() and "\r" not in log.getvalue()  # no escape codes in a log


def test_quiet_writes_nothing(specs):
    log = Log()
    p = Progress(total=1, stream=log, quiet=True)
    p.note("n")
    p.trial_started(specs[0])
    p.step("s")
    p.trial_done(specs[0], "x")
    p.close()
    assert log.getvalue() == ""


def test_a_terminal_gets_the_live_display(specs):
    term = io.StringIO()
    p = Progress(total=2, stream=term, live=True)
    p.trial_started(specs[0])
    p.step("mlr trial 4 (goal0): 900.0 kpps for 0.25 s, loss 0 %, passed; bounds 900.0 kpps .. 1.000 Mpps")
    p.trial_done(specs[0], "812.3 kpps")
    p.note("a note between trials")
    p.close()
    p.close()  # idempotent: every exit path of a run may call it
    out = term.getvalue()
    assert "\x1b[" in out  # rich drew it
    assert f"1/2 {specs[0].trial_id}: 812.3 kpps" in out  # the finished trial stays, above the bar
    assert "a note between trials" in out and "bounds 900.0" in out and "1.000 Mpps" in out  # (wrapped at 80)


def test_eta_counts_the_trials_left():
    p = Progress(total=4, started=100.0)
    assert p.eta_text() == "?"
    p.done_here, p.last_done = 1, 160.0  # one trial of 60 s, three left
    assert p.eta_text() == "3m00s"


def test_the_watch_shows_each_trial_and_the_goals_bounds():
    """A binary search on a simulated DUT of 1 Mpps: one line per trial, the load tried, and the
    bounds the report's search trace shows after that trial (the last ones bracket 1 Mpps)."""
    lines: list[str] = []
    goal = SearchGoal(final_trial_duration_s=1.0, duration_sum_s=1.0, initial_trial_duration_s=1.0,
                      preceding_targets=0, loss_ratio=0.0, exceed_ratio=0.0, relative_width=0.01, name="binary")
    watch = SearchWatch(lines.append, label="binary", goal=goal)
    res = run_search("binary", FixedCapacity(1e6), 2e6, 1e4,
                     BinaryGoal(trial_duration_s=1.0, final_trial_duration_s=1.0, relative_width=0.01),
                     on_trial=watch)[0]
    assert len(lines) == res.trial_count > 3
    bounds = bounds_after_each_trial([t.result for t in res.trials], goal)
    for line, t, (lo, hi) in zip(lines, res.trials, bounds):
        assert line.startswith(f"binary trial {t.index + 1} ({t.phase}): {load_text(t.result.intended_load_pps)} "
                               f"for 1 s, ")
        assert ("passed;" in line) == t.passed
        assert line.endswith(f"bounds {'-' if lo is None else load_text(lo)} .. "
                             f"{'-' if hi is None else load_text(hi)} (binary)")
    lo, hi = bounds[-1]
    assert lo <= 1e6 <= hi


def test_without_a_goal_the_bounds_are_per_trial_duration():
    lines: list[str] = []
    watch = SearchWatch(lines.append, label="conn rate", unit="connections/s")
    run_search("binary", FixedCapacity(5000), 20000, 100,
               BinaryGoal(trial_duration_s=1.0, final_trial_duration_s=1.0, relative_width=0.05), on_trial=watch)
    lo, hi = watch.bounds[1.0]
    assert lo <= 5000 <= hi
    assert lines[-1].endswith(f"at 1 s passed up to {lo:,.0f} connections/s, failed from {hi:,.0f} connections/s")


def test_run_json_is_one_document_and_no_progress(monkeypatch, tmp_path, capsys):
    """Under --json the run gets quiet=True (no display on stderr) and stdout is one document."""
    import fwlab.run.start as run_start
    import fwlab.suites as suites
    from fwlab.results.record import RunRecord

    run = tmp_path / "run"
    shutil.copytree(GOLDEN, run)
    seen = {}

    def fake_start(suite, text, out, quiet=False, **kw):
        seen["quiet"] = quiet
        p = Progress(total=1, quiet=quiet)  # writes to sys.stderr, as the run's does
        p.note("test bed x")
        p.step("binary trial 1: ...")
        return RunRecord.open(run)

    monkeypatch.setattr(run_start, "start", fake_start)
    monkeypatch.setattr(suites, "check_cpus", lambda suite: None)
    assert cli.main(["run", "quick", "--json", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert seen["quiet"] is True and captured.err == ""
    assert json.loads(captured.out)["record"] == str(run)
    assert cli.main(["run", "quick", "--out", str(tmp_path)]) == 0  # without --json: progress on stderr
    assert seen["quiet"] is False and "test bed x" in capsys.readouterr().err
