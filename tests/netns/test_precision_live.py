"""Adaptive repetitions on the real data path: a tiny suite with ``precision`` whose one figure is
quiet by construction (UDP at a fixed 20 Mbit/s that an empty nftables DUT forwards without
loss) stops well before its maximum, and the record says how many repetitions it took and the
half-width it reached. A resume of the finished record runs nothing more."""

import json
import tomllib

from fwlab.run.start import resume as resume_run, start as start_run
from fwlab.suites import parse_suite
from record_schema import assert_record_valid

SUITE = """
name = "precision-live"
mode = "routed"
backends = ["nftables"]
layouts = ["linear"]
rules = [0]
duration_s = 2
repetitions = 2
max_repetitions = 8
precision = 0.05
settle_s = 0
[[traffic]]
kind = "udp"
tool = "iperf3"
sizes = [1000]
rate_bps = 20000000
"""


def test_precision_stops_early_on_a_quiet_figure_and_records_it(tmp_path):
    suite = parse_suite(tomllib.loads(SUITE), "precision-live")
    rec = start_run(suite, SUITE, tmp_path, quiet=True)
    run = json.loads((rec.path / "run.json").read_text())
    assert run["status"] == "complete"
    p = run["precision"]
    assert (p["precision"], p["min_repetitions"], p["max_repetitions"], p["total"]) == (0.05, 2, 8, 1)
    (fig,) = p["figures"]
    assert fig["figure"] == "ip4udp-1000B-nftables-0r-linear-routed" and fig["metric"] == "rx_pps"
    trials = [json.loads(line) for line in (rec.path / "trials.jsonl").read_text().splitlines()]
    # the record's figure is what is on disk: one trial per repetition, the interval from their values
    assert fig["repetitions"] == fig["n"] == len(trials) == max(t["repetition"] for t in trials)
    assert fig["status"] == "met" and fig["repetitions"] < 8, fig
    assert fig["half_width"] is not None and fig["rel_half_width"] <= 0.05
    assert abs(fig["half_width"] / fig["mean"] - fig["rel_half_width"]) < 1e-12
    assert assert_record_valid(rec.path) == len(trials)
    again = resume_run(rec.path, quiet=True)
    assert len((again.path / "trials.jsonl").read_text().splitlines()) == len(trials)
