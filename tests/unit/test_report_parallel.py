"""The report's plot-drawing parts computed in forked workers (fwlab.report.parallel): results in
the parts' order, a part's error raised to the caller, and the page the same bytes whether its
parts are drawn side by side or one after the other. No root."""

from __future__ import annotations

import os
import random
import signal
from datetime import datetime

import pytest

import fwlab.report.parallel as parallel
from fwlab.report import write_report
from fwlab.results.record import REPORT_FILE

from synthetic_runs import write_run


def test_results_come_back_in_the_parts_order_from_other_processes():
    parts = [lambda k=k: (k, os.getpid()) for k in range(5)]
    out = parallel.render_parts(parts, workers=2)
    assert [k for k, _ in out] == list(range(5))
    assert all(pid != os.getpid() for _, pid in out)  # drawn in the forked workers


def test_one_worker_runs_the_parts_here():
    out = parallel.render_parts([lambda: os.getpid(), lambda: os.getpid()], workers=1)
    assert out == [os.getpid()] * 2


def test_a_parts_error_reaches_the_caller():
    def broken():
        raise ValueError("no such curve")

    with pytest.raises(ValueError, match="no such curve"):
        parallel.render_parts([lambda: "ok", broken], workers=2)


def test_the_page_is_the_same_drawn_side_by_side_or_in_turn(tmp_path, monkeypatch):
    run = write_run(tmp_path, "r", datetime(2026, 11, 1, 12), random.Random(3))
    monkeypatch.setattr(parallel, "default_workers", lambda: 2)  # whatever this machine has
    write_report(run)
    side_by_side = (run / REPORT_FILE).read_bytes()
    monkeypatch.setattr(parallel, "default_workers", lambda: 1)
    write_report(run)
    in_turn = (run / REPORT_FILE).read_bytes()
    assert side_by_side == in_turn and b"<svg" in in_turn


def test_workers_end_quietly_under_the_clis_sigterm_handler(capfd):
    def as_interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, as_interrupt)
    try:
        out = parallel.render_parts([lambda: signal.getsignal(signal.SIGTERM)] * 2, workers=2)
    finally:
        signal.signal(signal.SIGTERM, old)
    assert out == [signal.SIG_DFL] * 2
    assert "Traceback" not in capfd.readouterr().err
