"""fwlab.stats.derive: the figures the orchestrator derives from a measurement's raw data (the
runners leave per-stream rates and RTT samples; they import no statistics)."""

import pytest

from fwlab.stats.derive import derive_figures

RAW = {"samples": [[100.0, 1, 0.1], [100.5, 2, 0.3], [101.2, 3, 0.2]], "transmitted": 4, "received": 3}


def test_a_ping_trial_gets_its_figures_and_per_second_series_and_the_samples_leave_extra():
    metrics, extra = {"loss_ratio": 0.25}, {"rtt_samples": {"rtt": RAW}}
    series = derive_figures(metrics, [], extra)
    assert "rtt_samples" not in extra
    assert metrics["rtt_samples"] == 3 and metrics["rtt_p50_ms"] == pytest.approx(0.2)
    assert metrics["rtt_loss_ratio"] == pytest.approx(0.25) and metrics["rtt_sent"] == 4
    assert metrics["rtt_hdr_unit"] == "ns" and metrics["rtt_hdr_b64"]
    assert [r["t_s"] for r in series] == [1.0, 2.0] and series[0]["rtt_n"] == 2


def test_a_stream_with_a_probe_gets_the_median_rtt_in_its_own_rows_and_its_stream_spread():
    metrics = {"direction": "up"}
    rows = [{"t_s": 1.0, "throughput_bps": 1e9}, {"t_s": 2.0, "throughput_bps": 1e9}, {"t_s": 3.0}]
    extra = {"per_stream_bps": {"up": [1e9, 3e9], "down": [5e8]}, "rtt_samples": {"rtt": RAW}}
    out = derive_figures(metrics, rows, extra)
    assert out is rows and rows[0]["rtt_p50_ms"] == pytest.approx(0.2) and "rtt_p50_ms" not in rows[2]
    assert metrics["stream_count"] == 2 and metrics["fairness_jain"] == pytest.approx(0.8)
    assert "stream_down_count" not in metrics   # one stream down: no spread
    assert extra["per_stream_bps"]["up"] == [1e9, 3e9]  # the raw rates stay in the record


def test_a_failed_trial_gets_nothing_but_drops_the_samples():
    extra = {"rtt_samples": {"rtt": RAW}}
    assert derive_figures(None, [], extra) == [] and extra == {}
