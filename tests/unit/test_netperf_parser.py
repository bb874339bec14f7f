import pytest

from goldens import GOLDEN
from fwlab.errors import RunnerError
from fwlab.runners import TrafficSpec
from fwlab.runners.netperf import Netperf, parse_output


def golden(name):
    return (GOLDEN / f"netperf_{name}.txt").read_text()


def test_tcp_stream():
    m = parse_output(golden("tcp_stream"), "tcp")
    assert m.metrics["throughput_bps"] == pytest.approx(72367400 * 8 / 1.01)
    assert m.metrics["send_size_bytes"] == 1400
    assert m.metrics["cpu_sender_pct"] == 99.5


def test_udp_stream_counts_loss():
    m = parse_output(golden("udp_stream"), "udp")
    assert m.metrics["tx_packets"] == 52961 and m.metrics["rx_packets"] == 46913
    assert m.metrics["loss_ratio"] == pytest.approx((52961 - 46913) / 52961)
    assert m.metrics["rx_pps"] == pytest.approx(46913 / 1.0)


@pytest.mark.parametrize("name,tps", [("tcp_rr", 7467.45), ("tcp_crr", 2912.703)])
def test_rr_and_crr(name, tps):
    m = parse_output(golden(name), name)
    assert m.metrics["transactions_per_s"] == pytest.approx(tps)
    assert m.metrics["latency_p99_us"] > m.metrics["latency_p50_us"] > 0
    assert m.metrics["throughput_bps"] is None


def test_no_result_is_a_runner_error():
    with pytest.raises(RunnerError):
        parse_output("netperf: send_omni: send_data failed: Network is unreachable", "udp")


def test_udp_args_allow_routing():
    args = Netperf().client_args(TrafficSpec(traffic="udp", tool="netperf", size_bytes=64, duration_s=3),
                                 "198.19.1.1", (0, 1))
    assert args[args.index("--") + 1:args.index("--") + 3] == ["-R", "1"]
    assert ["-m", "64"] == args[args.index("-m"):args.index("-m") + 2]
    assert ["-T", "0,1"] == args[args.index("-T"):args.index("-T") + 2]
