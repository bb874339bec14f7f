"""Latency distributions on the real data path: a cut-down rfc2544 suite (one 64 B search per
configuration, latency trials of 1 s, two repetitions) stores each latency trial's HDR histogram
in the record; the histograms decode, their counts match the engine's own sample count, the
repetitions merge, and the report draws the latency CDF figure from the merged histograms."""

import json
import re

import pytest

from fwlab.run.start import start as start_run
from fwlab.report import write_report
from fwlab.runners.engine_binary import find_engine
from fwlab.stats.latency import decode, distribution, percentile_ns
from fwlab.suites import parse_suite

pytestmark = pytest.mark.skipif(find_engine() is None, reason="fwlab-engine not built (make engine)")

SUITE = {
    "name": "rfc2544-latency-hdr", "mode": "routed", "backends": ["nftables"], "layouts": ["linear"],
    "rules": [0, 1000], "device_model": "napi", "duration_s": 0.2, "repetitions": 2, "settle_s": 0,
    "traffic": [{"kind": "throughput", "sizes": [64],
                 "options": {"algorithm": "binary", "goal": {"relative_width": 0.25}, "mrr_duration_s": 0.5,
                             "latency_at": [0.5], "latency_duration_s": 1.0}}],
}


def test_rfc2544_record_has_histograms_and_report_has_cdf(tmp_path):
    suite = parse_suite(SUITE, "latency-hdr")
    rec = start_run(suite, json.dumps(SUITE), tmp_path, quiet=True)
    trials = [t for t in rec.trials() if t["kind"] == "rfc2544"]
    assert len(trials) == 4 and all(t["error"] is None for t in trials)
    per_config: dict[int, list[str]] = {}
    for t in trials:
        (lt,) = t["extra"]["rfc2544"]["latency"]
        assert lt["latency_hdr_unit"] == "ns"
        h = decode(lt["latency_hdr_b64"])
        # the histogram holds every frame the engine timed, and its p50 is the engine's own p50
        assert h.get_total_count() == lt["latency_samples"] > 0
        assert percentile_ns(h, 50.0) == lt["latency"]["p50_ns"]
        assert percentile_ns(h, 99.0) == lt["latency"]["p99_ns"]
        per_config.setdefault(t["rules"], []).append(lt["latency_hdr_b64"])
    assert sorted(per_config) == [0, 1000]
    for texts in per_config.values():
        d = distribution(texts)
        assert d.histograms == 2
        assert d.samples == sum(decode(x).get_total_count() for x in texts)
        assert d.cdf[-1][1] == 1.0
    html = write_report(rec.path).read_text()
    section = html[html.index("<h3>Latency distributions</h3>"):]
    assert "latency CDF tail, repetitions merged" in section
    assert re.search(r"<svg", section)
    assert "nftables linear, 1000 rules" in section


def test_ping_and_engine_items_keep_histograms_and_report_merges_them(tmp_path):
    traffic = [{"kind": "rtt", "tool": "ping", "options": {"interval_ms": 10}},
               {"kind": "engine", "sizes": [64], "rate_pps": 5000}]
    suite = parse_suite({"name": "hdr-tiny", "backends": ["nftables"], "layouts": ["linear"], "rules": [0],
                         "duration_s": 1, "repetitions": 2, "settle_s": 0, "traffic": traffic}, "test")
    rec = start_run(suite, "", tmp_path, quiet=True)
    trials = rec.trials()
    assert len(trials) == 4 and all(not t["error"] for t in trials), [t["error"] for t in trials]
    for t in trials:
        m = t["metrics"]
        if t["traffic"] == "rtt":
            assert decode(m["rtt_hdr_b64"]).get_total_count() == m["rtt_samples"] > 10
        else:
            h = decode(m["latency_hdr_b64"])
            assert h.get_total_count() == m["latency_samples"] > 1000
            assert percentile_ns(h, 99.9) == m["latency_ns"]["p999"]
    html = write_report(rec.path).read_text()
    rtt = html[html.index("<h3>Round-trip time distributions</h3>"):]
    assert "<svg" in rtt and "(2" in rtt  # merged over the two repetitions
    lat = html[html.index(">Latency</h2>"):]
    assert "<h3>Latency distributions</h3>" in lat and "<svg" in lat
