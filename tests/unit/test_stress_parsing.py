"""Parsing and aggregation for the stress tests: iperf3 directions and many processes, stream
spread (Jain), recovery-probe schedule, ping, link series, flood specs and counts."""

import pytest
from goldens import GOLDEN

from fwlab.errors import RunnerError
from fwlab.floods.flood import dut_drops, flood_args, flood_metrics, parse_counter_json
from fwlab.suites.background import BackgroundItem, FloodSpec
from fwlab.runners import TrafficSpec
from fwlab.runners.iperf3 import build_client_args, split_streams
from fwlab.runners.iperf3_json import combine, parse_json
from fwlab.testbed.linkseries import as_stream_series, rates
from fwlab.runners.ping import parse_ping
from fwlab.methods.recovery import ProbePlan, probe_metrics, run_probes
from fwlab.stats.derive import add_stream_spread, rtt_figures, rtt_series
from fwlab.stats.streams import jain_index, rtt_summary, stream_spread


def golden(name):
    return (GOLDEN / f"iperf3_{name}.json").read_text()


def test_split_streams_respects_iperf3_limit():
    assert split_streams(1) == [1]
    assert split_streams(128) == [128]
    assert split_streams(129) == [65, 64]
    s = split_streams(900)
    assert sum(s) == 900 and max(s) <= 128 and len(s) == 8 and max(s) - min(s) <= 1
    with pytest.raises(RunnerError):
        split_streams(0)


def test_client_args_directions_and_ports():
    up = build_client_args(TrafficSpec("tcp", "iperf3"), "198.19.1.1", 0, streams=113, port=5203)
    assert ["-p", "5203"] == up[3:5] and ["-P", "113"] == up[up.index("-P"):up.index("-P") + 2]
    assert "-R" not in up and "--bidir" not in up
    assert "-R" in build_client_args(TrafficSpec("tcp", "iperf3", options={"direction": "down"}), "x", None)
    assert "--bidir" in build_client_args(TrafficSpec("udp", "iperf3", options={"direction": "bidir"}), "x", None)


def test_bidir_tcp_has_both_directions_summed():
    m = parse_json(golden("tcp_bidir"), "tcp")
    up, down = m.metrics["throughput_up_bps"], m.metrics["throughput_down_bps"]
    assert m.metrics["direction"] == "bidir"
    assert up == pytest.approx(2041580217.699013) and down == pytest.approx(714006642.5396497)
    assert m.metrics["throughput_bps"] == pytest.approx(up + down)
    assert m.metrics["retransmits"] == 1431 + 523
    s = m.series[0]
    assert s["throughput_bps"] == pytest.approx(s["throughput_up_bps"] + s["throughput_down_bps"])
    per = m.extra["per_stream_bps"]
    assert len(per["up"]) == 1 and len(per["down"]) == 1


def test_bidir_udp_and_reverse_tcp():
    u = parse_json(golden("udp_bidir"), "udp")
    assert u.metrics["tx_packets"] == 1726 + 1728
    assert u.metrics["jitter_up_ms"] != u.metrics["jitter_down_ms"]
    r = parse_json(golden("tcp_reverse"), "tcp")
    assert r.metrics["direction"] == "down"
    assert r.metrics["throughput_down_bps"] == pytest.approx(r.metrics["throughput_bps"])
    assert "throughput_up_bps" not in r.metrics


def test_combine_processes_adds_rates_series_and_streams():
    a = parse_json(golden("tcp_p4"), "tcp")
    b = parse_json(golden("tcp_p4"), "tcp")
    m = combine([a, b])
    assert m.metrics["throughput_bps"] == pytest.approx(2 * a.metrics["throughput_bps"])
    assert m.metrics["bytes"] == 2 * a.metrics["bytes"]
    assert len(m.series) == len(a.series)
    assert m.series[0]["throughput_bps"] == pytest.approx(2 * a.series[0]["throughput_bps"])
    assert len(m.extra["per_stream_bps"]["up"]) == 8
    add_stream_spread(m.metrics, m.extra["per_stream_bps"])
    assert m.metrics["stream_count"] == 8 and 0 < m.metrics["fairness_jain"] <= 1


def test_jain_and_spread():
    assert jain_index([5, 5, 5, 5]) == pytest.approx(1.0)
    assert jain_index([10, 0, 0, 0]) == pytest.approx(0.25)
    assert jain_index([]) is None and jain_index([0, 0]) is None
    s = stream_spread([1.0, 2.0, 3.0, 0.0])
    assert s["stream_min_bps"] == 0 and s["stream_max_bps"] == 3 and s["stream_idle"] == 1
    assert s["stream_median_bps"] == 1.5


def test_probe_schedule_stops_at_recovery_and_is_bounded():
    clock = {"t": 100.0}
    slept = []

    def sleep(d):
        slept.append(round(d, 6))
        clock["t"] += d

    vals = iter([30.0, 60.0, 95.0, 99.0])

    def measure():
        clock["t"] += 2.0  # a 2 s probe
        return next(vals)

    plan = ProbePlan(interval_s=10, probe_s=2, max_probes=12, tolerance=0.10)
    probes = run_probes(measure, 100.0, plan, clock=lambda: clock["t"], sleep=sleep)
    assert [p["t_after_s"] for p in probes] == [0.0, 10.0, 20.0]
    assert [p["recovered"] for p in probes] == [False, False, True]
    m = probe_metrics(probes, 100.0)
    assert m["recovered"] and m["recovery_s"] == 20.0 and m["min_probe_bps"] == 30.0
    never = run_probes(lambda: 1.0, 100.0, ProbePlan(interval_s=1, probe_s=1, max_probes=3),
                       clock=lambda: clock["t"], sleep=sleep)
    assert len(never) == 3 and not probe_metrics(never, 100.0)["recovered"]


def test_probe_plan_validation():
    with pytest.raises(ValueError):
        ProbePlan.from_options({"interval_s": 1, "probe_s": 2})
    with pytest.raises(ValueError):
        ProbePlan.from_options({"tolerance": 1.5})
    with pytest.raises(ValueError, match="whole number"):
        ProbePlan.from_options({"probe_s": 0.5})
    assert ProbePlan.from_options({}).interval_s == 10.0


PING = """PING 198.19.1.1 (198.19.1.1) 56(84) bytes of data.
[1700000000.000100] 64 bytes from 198.19.1.1: icmp_seq=1 ttl=63 time=0.100 ms
[1700000000.500100] 64 bytes from 198.19.1.1: icmp_seq=2 ttl=63 time=0.300 ms
[1700000001.000100] 64 bytes from 198.19.1.1: icmp_seq=3 ttl=63 time=0.200 ms

--- 198.19.1.1 ping statistics ---
4 packets transmitted, 3 received, 25% packet loss, time 1501ms
"""


def test_ping_parse_and_rtt_figures():
    p = parse_ping(PING)
    assert len(p.samples) == 3 and p.transmitted == 4 and p.loss_ratio == pytest.approx(0.25)
    m = rtt_figures(p.raw())
    assert m["rtt_p50_ms"] == pytest.approx(0.2) and m["rtt_max_ms"] == pytest.approx(0.3)
    assert m["rtt_ipdv_ms"] == pytest.approx(0.15)
    s = rtt_series(p.raw())
    assert [r["t_s"] for r in s] == [1.0, 2.0] and s[0]["rtt_n"] == 2
    with pytest.raises(RunnerError):
        parse_ping("ping: connect: Network is unreachable")
    assert rtt_summary([])["rtt_samples"] == 0


def test_link_series_rates():
    a = {"s0": {"rx_packets": 0, "rx_bytes": 0, "tx_packets": 0, "tx_bytes": 0}}
    b = {"s0": {"rx_packets": 1000, "rx_bytes": 125000, "tx_packets": 10, "tx_bytes": 0}}
    rows = rates([(10.0, a), (11.0, b)], {"s0": "server"})
    assert rows == [{"t_s": 1.0, "server_rx_pps": 1000.0, "server_rx_bps": 1e6, "server_tx_pps": 10.0}]
    assert as_stream_series(rows)[0]["throughput_bps"] == 1e6


def test_background_item_expands_rates_and_ids():
    item = BackgroundItem(kind="udp_flood", rates_pps=[0, 9500])
    specs = item.specs()
    assert [s.rate_pps for s in specs] == [0.0, 9500.0]
    assert specs[1].id_part == "udpflood9500pps" and specs[1].dst_port == 9
    assert BackgroundItem(kind="syn_flood").specs()[0].dst_port == 5201
    f = specs[1]
    assert f.source_range(4) == "10.200.0.1-10.200.255.255"
    assert f.source_range(6) == "2001:2:0:aa00::1-2001:2:0:aa00::ffff"
    assert f.frame_for(4) == 64 and f.frame_for(6) == 78
    with pytest.raises(ValueError):
        BackgroundItem(kind="udp_flood", rates_pps=[-1])
    args = flood_args("eng", FloodSpec("syn_flood", 9500, dst_port=5201), ip_version=4, iface="a0",
                      dst="198.19.1.1", dst_mac="02:00:00:00:00:01", duration_s=6)
    assert args[args.index("--proto") + 1] == "tcp-syn" and args[args.index("--duration-s") + 1] == "6"
    assert args[args.index("--backend") + 1] == "packet"


def test_flood_counts_come_from_counters():
    assert dut_drops(None) is None
    assert dut_drops({"deny": 3, "default_drop": 7, "permit": 1000}) == 10
    js = ('{"nftables": [{"metainfo": {}}, {"rule": {"expr": [{"match": {}}, {"counter": {"packets": 5, "bytes": 300}}]}},'
          ' {"rule": {"expr": [{"counter": {"packets": 2, "bytes": 100}}]}}]}')
    assert parse_counter_json(js) == 7
    rec = {"spec": {"rate_pps": 9500.0}, "engine_send_json": {"offered_count": 100, "achieved_pps": 9500.0},
           "counts": {"atk_tx_packets": 101, "dut_rx_packets": 101, "dut_rule_drops": 100, "server_flood_packets": 0}}
    m = flood_metrics(rec)
    assert m["flood_offered_packets"] == 100 and m["flood_stopped_before_server"] == 101
    assert m["flood_dut_rule_drops"] == 100


def test_suite_with_background_plans_one_trial_per_rate():
    from fwlab.suites import parse_suite
    from fwlab.run.plan import expand
    s = parse_suite({"name": "a", "backends": ["nftables"], "rules": [0, 100], "repetitions": 1,
                     "traffic": [{"kind": "tcp"}],
                     "background": [{"kind": "udp_flood", "rates_pps": [0, 9500]}]}, "test")
    ids = [t.trial_id for t in expand(s).trials]
    assert len(ids) == 4 and any("-udpflood9500pps-" in i for i in ids) and any("-udpflood0pps-" in i for i in ids)
    with pytest.raises(Exception, match="needs a DUT"):
        parse_suite({"name": "a", "mode": "direct", "traffic": [{"kind": "tcp"}],
                     "background": [{"kind": "udp_flood"}]}, "test")


def test_combined_rate_is_all_bytes_over_the_trial_not_a_sum_of_rates():
    """Processes that ran over unequal spans (one stalled and ended late) must not add their own
    rates: the aggregate is every byte over the longest span, so it can never exceed what the
    path carried (900 streams once summed to 160 Mbit/s through a 100 Mbit/s wire)."""
    import copy

    a = parse_json(golden("tcp_p4"), "tcp")
    b = copy.deepcopy(a)
    b.metrics["duration_s"] = 2 * a.metrics["duration_s"]  # same bytes, twice as long
    b.metrics["throughput_bps"] = a.metrics["throughput_bps"] / 2
    m = combine([a, b])
    assert m.metrics["duration_s"] == b.metrics["duration_s"]
    assert m.metrics["throughput_bps"] == pytest.approx(8 * 2 * a.metrics["bytes"] / b.metrics["duration_s"])
    assert m.metrics["throughput_bps"] < a.metrics["throughput_bps"] + b.metrics["throughput_bps"]


def test_a_run_that_overran_its_length_is_rated_over_the_whole_run():
    from fwlab.runners.iperf3_json import account_overrun

    m = parse_json(golden("tcp_p4"), "tcp")
    nominal, nbytes = m.metrics["throughput_bps"], m.metrics["bytes"]
    d = m.metrics["duration_s"]
    account_overrun(m, "tcp", "up", d, d + 1.0)  # within the slack: unchanged
    assert m.metrics["throughput_bps"] == nominal and not m.flags
    account_overrun(m, "tcp", "up", d, 3 * d)
    assert m.metrics["throughput_bps"] == pytest.approx(8 * nbytes / (3 * d))
    assert m.metrics["throughput_nominal_bps"] == nominal and m.metrics["throughput_up_bps"] == m.metrics["throughput_bps"]
    assert [f["code"] for f in m.flags] == ["overran"]
    u = parse_json(golden("udp64"), "udp")
    before = dict(u.metrics)
    account_overrun(u, "udp", "up", 1.0, 10.0)  # UDP is counted on the link: left alone
    assert u.metrics == before and not u.flags
