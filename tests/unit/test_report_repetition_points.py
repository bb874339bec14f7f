"""The report's rate-vs-rules plot draws every repetition as a point beside the median."""

from __future__ import annotations

import json
import random
from datetime import datetime

import matplotlib.axes

from fwlab.report.plots import rate_vs_rules
from fwlab.report.summary import curves
from synthetic_runs import write_run


def test_every_repetition_is_a_point(tmp_path, monkeypatch):
    run = write_run(tmp_path, "r", datetime(2026, 11, 1), random.Random(3), repetitions=3)
    trials = [json.loads(line) for line in (run / "trials.jsonl").read_text().splitlines()]
    trials[0]["metrics"] = None  # a failed repetition has no point
    trials[0]["error"] = "boom"
    cs = [c for c in curves(trials) if c.k["traffic"] == "tcp"]
    drawn: list[float] = []
    real = matplotlib.axes.Axes.scatter

    def spy(self, x, y, *a, **kw):
        drawn.extend(y)
        return real(self, x, y, *a, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, "scatter", spy)
    svg = rate_vs_rules(cs, "throughput_bps", "TCP")
    expected = sorted(v * 1e-9 for c in cs for p in c.points.values() for v in p.values["throughput_bps"])
    assert sorted(drawn) == expected and len(drawn) == 2 * 4 * 3 - 1
    assert "<svg" in svg and "each repetition" in svg
