"""Work for after the run (``start_run(prepare=...)``, e.g. importing the report's plotting
library) runs on a thread beside the first bed's set-up and is finished before any trial's
traffic; its failure does not fail the run. No root."""

from __future__ import annotations

import threading
import time

import pytest

import fwlab.run.executor as orch
from fwlab.results.overhead import Phases
from fwlab.run.progress import Progress


def executor(prepare) -> orch.Executor:
    ex = orch.Executor.__new__(orch.Executor)
    ex.prepare, ex._preparing, ex.run_phases = prepare, None, Phases()
    ex.progress = Progress(total=1, quiet=True)
    return ex


def test_prepare_runs_beside_the_caller_and_is_waited_for():
    started, release, done = threading.Event(), threading.Event(), []

    def work():
        started.set()
        release.wait(5)
        done.append(True)

    ex = executor(work)
    ex._start_prepare()
    assert started.wait(5) and not done  # running while the caller goes on (the bed's set-up)
    threading.Timer(0.05, release.set).start()
    ex._finish_prepare()
    assert done == [True] and "prepare_wait" in ex.run_phases.to_dict()
    ex._finish_prepare()  # once finished, nothing left to wait for


def test_a_failing_prepare_does_not_fail_the_run():
    def work():
        raise ImportError("no plotting library")

    ex = executor(work)
    ex._start_prepare()
    ex._finish_prepare()


def test_no_prepare_no_thread():
    ex = executor(None)
    ex._start_prepare()
    assert ex._preparing is None


class Stop(Exception):
    pass


def test_a_trial_waits_for_prepare_before_anything_else(monkeypatch):
    done = []

    def work():
        time.sleep(0.1)
        done.append(True)

    seen = []

    def get_runner(name):
        seen.append(list(done))
        raise Stop

    import fwlab.run.trial
    monkeypatch.setattr(fwlab.run.trial, "get_runner", get_runner)
    ex = executor(work)
    ex._start_prepare()
    ex.suite, ex.pacing = None, None
    with pytest.raises(Stop):
        ex._trial(None, None, type("Spec", (), {"tool": "iperf3", "trial_id": "t"})(), None, {})
    assert seen == [[True]]
