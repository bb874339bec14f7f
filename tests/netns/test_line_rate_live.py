"""% of line rate on the real data path: an RFC 2544 search (`fwlab run`) through a bed whose
wires are emulated at 10 Mbit/s (client and server egress shaped to Ethernet line time). The
wire's speed is known, so each throughput is recorded and reported as % of its line rate
(14,881 frames/s of 64 B); the DUT forwards far more than that, so the wire is the limit. (With a
queue counted in bytes the search found 161 % of the line rate: the shaper now queues frames.)
No floor is asserted: how far below the line rate a zero-loss search ends is the machine's."""

import json

import pytest

from fwlab.cli import main
from fwlab.runners.engine_binary import find_engine
from fwlab.testbed.shaping import ETHERNET_OVERHEAD_BYTES, FULL_FRAME_BYTES, QUEUE_FRAMES, LinkShape

if find_engine() is None:
    pytest.skip("fwlab-engine is not built (make engine)", allow_module_level=True)

SUITE = """
name = "line-rate-live"
mode = "routed"
backends = ["nftables"]
layouts = ["linear"]
rules = [0]
duration_s = 0.5
repetitions = 1
settle_s = 0
link_rate = "10mbit"

[[traffic]]
kind = "throughput"
sizes = [64]

[traffic.options]
algorithm = "mlr"
goal = { preset = "csit", final_trial_duration_s = 0.5, initial_trial_duration_s = 0.5, duration_sum_s = 0.5, relative_width = 0.05, preceding_targets = 1 }
mrr_duration_s = 0.5
"""


def test_rfc2544_on_an_emulated_wire_is_reported_as_percent_of_line_rate(tmp_path):
    (tmp_path / "s.toml").write_text(SUITE)
    assert main(["run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "res"), "-q"]) == 0
    rdir = next((tmp_path / "res").iterdir())
    trials = [json.loads(x) for x in (rdir / "trials.jsonl").read_text().splitlines()]
    run = json.loads((rdir / "run.json").read_text())
    line = run["beds"][0]["line_rate"]
    assert line["speed_bps"] == 10_000_000 and "emulated wire" in line["link"], line
    (t,) = [t for t in trials if t["error"] is None]
    m = t["metrics"]
    line_pps = LinkShape(10_000_000).line_rate_pps(64)
    assert m["line_rate_pps"] == pytest.approx(line_pps)
    assert m["line_rate_pct"] == pytest.approx(100.0 * m["throughput_pps"] / line_pps)
    # The wire caps the result: no zero-loss trial can carry more than the line rate plus what the
    # shaper's queue (256 frames) and burst (2 full-size frames) absorb in one 0.5 s trial. How far
    # *below* the line rate the search ends depends on the machine (a busy host loses frames or
    # falls short of the rate at 94 % of it; CI once ended at 49.8 %), so no floor is asserted:
    # only that the search found a load that passed, and that no trial above the cap passed.
    absorbed = QUEUE_FRAMES + 2 * (FULL_FRAME_BYTES + ETHERNET_OVERHEAD_BYTES) / (60 + ETHERNET_OVERHEAD_BYTES)
    ceiling_pct = 100.0 * (line_pps + absorbed / 0.5) / line_pps  # 103.9 % at 10 Mbit/s
    assert 0.0 < m["line_rate_pct"] <= ceiling_pct * 1.005, (m["line_rate_pct"], ceiling_pct)
    (search,) = t["extra"]["rfc2544"]["results"]
    passed_pct = [100.0 * x["result"]["intended_load_pps"] / line_pps for x in search["trials"] if x["passed"]]
    assert passed_pct and max(passed_pct) <= ceiling_pct * 1.005, (passed_pct, ceiling_pct)
    page = (rdir / "report.html").read_text()
    assert "% of line rate" in page and "emulated wire" in page and "10 Mbit/s" in page
