"""`fwlab trend` on two short real runs of one suite: the record's own start times order them,
every figure has a value in both, and with one run on each side any change jumpavg finds is
inconclusive (never significant). No assertion on rates: they depend on the machine."""

import json

from fwlab import cli
from fwlab.analysis.trend import INCONCLUSIVE, trend
from fwlab.run.start import start as start_run
from fwlab.suites import parse_suite

SUITE = """
name = "trend-live"
description = "two short runs for a trend"
mode = "routed"
backends = ["nftables"]
layouts = ["linear"]
rules = [0, 1000]
duration_s = 1
repetitions = 2
settle_s = 0
[[traffic]]
kind = "udp"
sizes = [64]
"""


def test_trend_of_two_real_runs(tmp_path, capsys):
    import tomllib

    suite = parse_suite(tomllib.loads(SUITE), "trend test")
    a = start_run(suite, SUITE, tmp_path / "res", quiet=True).path
    b = start_run(suite, SUITE, tmp_path / "res", quiet=True).path

    tr = trend([b, a])
    assert [r.path for r in tr.runs] == [str(a), str(b)]
    assert [f.figure for f in tr.figures] == ["routed nftables linear 0r ip4 udp 64B rx_pps",
                                              "routed nftables linear 1000r ip4 udp 64B rx_pps"]
    for f in tr.figures:
        assert all(m is not None and m > 0 for m in f.medians) and all(len(v) == 2 for v in f.run_values)
        assert all(c.verdict == INCONCLUSIVE and c.before_runs == c.after_runs == 1 for c in f.changes)

    out = tmp_path / "trend.html"
    assert cli.main(["trend", str(tmp_path / "res"), "--out", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["suite"] == "trend-live" and len(data["runs"]) == 2
    assert out.read_text().count("<svg") == 2
