"""The stress sections render from plain trial dicts (no live run): parallel, attack, rtt and the
stream time series with the IPv4 vs IPv6 table."""

from fwlab.report.sections import render_sections
from trials import full_trial


def _t(kind, **kw):
    base = {"kind": kind, "trial_id": f"{kind}-{len(kw)}", "mode": "routed", "backend": "nftables",
            "layout": "linear", "rules": 100, "stateful_shortcut": False, "ip_version": 4, "traffic": "tcp",
            "size_bytes": None, "streams": 1, "repetition": 1, "label": None, "error": None}
    base.update(kw)
    return full_trial(base)


def test_stress_sections_render():
    series = [{"t_s": 1.0, "throughput_bps": 1e9, "rtt_p50_ms": 0.05}, {"t_s": 2.0, "throughput_bps": 1.1e9}]
    trials = [
        _t("parallel", streams=100, metrics={"throughput_bps": 2e9, "bytes": 10**9, "completion_s": 5.0,
                                             "fairness_jain": 0.99, "baseline_bps": 1e9, "recovered": True,
                                             "recovery_s": 10.0},
           series=series, extra={"probes": [{"t_after_s": 0.0, "ratio_to_baseline": 0.5},
                                            {"t_after_s": 10.0, "ratio_to_baseline": 0.95}],
                                 "link_series": [{"t_s": 1.0, "server_rx_bps": 1e9}]}),
        _t("attack", background={"kind": "udp_flood", "rate_pps": 9500.0},
           metrics={"throughput_bps": 1e9, "flood_offered_packets": 9500, "flood_dut_rx_packets": 9500,
                    "flood_dut_rule_drops": 9500, "flood_server_packets": 0}, series=series,
           extra={"link_series": [{"t_s": 1.0, "dut_atk_rx_pps": 9500.0, "server_rx_pps": 1e5}]}),
        _t("attack", background={"kind": "udp_flood", "rate_pps": 0.0}, metrics={"throughput_bps": 1.2e9},
           series=series),
        _t("rtt", traffic="rtt", metrics={"rtt_p50_ms": 0.03, "rtt_p99_ms": 0.1, "loss_ratio": 0.0},
           series=[{"t_s": 1.0, "rtt_p50_ms": 0.03}]),
        _t("stream", metrics={"throughput_bps": 1e9, "rtt_p50_ms": 0.05}, series=series),
        _t("stream", ip_version=6, metrics={"throughput_bps": 0.8e9, "rtt_p50_ms": 0.06}, series=series),
    ]
    html = "\n".join(render_sections({}, trials))
    for heading in ("Parallel TCP streams", "Under attack", "Round-trip delay", "IPv4 vs IPv6",
                    "Time series of stream trials"):
        assert heading in html, heading
    assert html.count("<svg") >= 6
    assert "80" in html  # v6 / v4 = 80 %
