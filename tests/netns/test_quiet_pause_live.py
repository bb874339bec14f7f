"""The pause between trials ended on a measured idle bed (suite ``settle_until_quiet``), on a real
bed: every pause after the first trial is measured from the previous trial's last counter
reading, ends on an idle window (or runs the full ``settle_s`` and says so), the reading that
ended it is the trial's ``links_before``, and a load in the pause is recorded. One bed, two rule
sets, eight 1 s UDP trials: about 15 s."""

import json
import shutil
import tomllib

import pytest

from fwlab.testbed.quiet import QUIET_MAX_PACKETS

SUITE = """
name = "quiet-pause"
description = "two rule sets, four 1 s UDP trials each, pauses ended on an idle bed"
mode = "routed"
backends = ["nftables"]
layouts = ["linear"]
rules = [0, 100]
duration_s = 1
repetitions = 2
settle_s = 1.0
settle_until_quiet = true
[[traffic]]
kind = "udp"
tool = "iperf3"
sizes = [64, 512]
"""


def test_pauses_end_on_an_idle_bed_and_say_so(tmp_path):
    from fwlab.run.start import start as start_run
    from fwlab.suites import parse_suite

    if not shutil.which("iperf3"):
        pytest.skip("iperf3 is not installed")
    suite = parse_suite(tomllib.loads(SUITE), "test")
    rec = start_run(suite, SUITE, tmp_path, quiet=True)
    trials = [json.loads(line) for line in (rec.path / "trials.jsonl").read_text().splitlines() if line.strip()]
    # repetitions outer: per repetition and rule count a load, then 64 B and 512 B
    assert [t["rules"] for t in trials] == [0, 0, 100, 100, 0, 0, 100, 100]
    first, rest = trials[0]["extra"]["settle"], [t["extra"]["settle"] for t in trials[1:]]
    assert first["pause_s"] is None  # the bed's first trial: nothing to measure from
    assert [p["after_load"] for p in rest] == [False, True, False, True, False, True, False]
    for prev, t, p in zip(trials, trials[1:], rest):
        assert t["error"] is None, t["error"]
        assert t["metrics"]["rx_pps"] > 0
        assert p["until_quiet"] is True and p["reads"] >= 1
        if not p["quiet"]:  # never idle: the full pause, as a fixed one would
            assert p["pause_s"] >= suite.settle_s - 0.01
        # the reading that ended the pause is the trial's counters before: what the pause saw
        # is exactly the step from the previous trial's counters after to this trial's before
        steps = [max(t["links_before"][k][c] - prev["links_after"][k][c] for c in ("rx_packets", "tx_packets"))
                 for k in t["links_before"]]
        assert max(steps) == p["packets_in_pause"]
    # on this otherwise idle bed the pauses end on an idle window, long before settle_s
    assert any(p["quiet"] and p["pause_s"] < suite.settle_s for p in rest)
    assert all(p["max_packets"] == QUIET_MAX_PACKETS for p in rest)
