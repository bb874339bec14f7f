import pytest
from goldens import GOLDEN

from fwlab.errors import RunnerError
from fwlab.runners import TrafficSpec
from fwlab.runners.base import apply_link_counts
from fwlab.runners.iperf3 import build_client_args
from fwlab.runners.iperf3_json import parse_json


def golden(name):
    return (GOLDEN / f"iperf3_{name}.json").read_text()


def test_udp_golden():
    m = parse_json(golden("udp64"), "udp")
    assert m.metrics["tx_packets"] == 339310
    assert m.metrics["rx_packets"] == 339310 - 1570
    assert m.metrics["loss_ratio"] == pytest.approx(1570 / 339310)
    assert m.metrics["rx_pps"] == pytest.approx((339310 - 1570) / 2.000098)
    assert m.metrics["jitter_ms"] == pytest.approx(0.003972776782539526)
    assert m.metrics["cpu_sender_pct"] == pytest.approx(99.72648314912267)
    assert len(m.series) == 2 and m.series[0]["t_s"] == pytest.approx(1.0, abs=0.01)
    assert m.raw["iperf3_client_json"]["start"]["version"].startswith("iperf")


def test_tcp_golden_single_and_parallel():
    m = parse_json(golden("tcp"), "tcp")
    assert m.metrics["throughput_bps"] == pytest.approx(3350150004.89533)
    assert m.metrics["retransmits"] == 47
    assert m.metrics["rx_pps"] is None  # filled from interface counters by the runner
    p = parse_json(golden("tcp_p4"), "tcp")
    assert p.metrics["throughput_bps"] > 0 and len(p.series) == 2


def test_link_counts_separate_receiver_loss_from_dut_loss():
    m = parse_json(golden("udp64"), "udp")
    apply_link_counts(m, "udp", server_if_rx=339310)  # the link got everything, the socket lost 1570
    assert m.metrics["loss_ratio"] == 0.0
    assert m.metrics["app_loss_ratio"] == pytest.approx(1570 / 339310)
    assert m.metrics["throughput_bps"] == pytest.approx(m.metrics["offered_bps"])
    assert m.metrics["app_throughput_bps"] < m.metrics["throughput_bps"]
    assert not m.flags  # 99.5 % read: within tolerance
    m2 = parse_json(golden("udp64"), "udp")
    apply_link_counts(m2, "udp", server_if_rx=339310 + 100000)
    assert any(f["code"] == "receiver-bound" for f in m2.flags)


def test_errors_are_runner_errors():
    with pytest.raises(RunnerError):
        parse_json("not json", "tcp")
    with pytest.raises(RunnerError, match="unable to connect"):
        parse_json('{"start": {}, "intervals": [], "end": {}, "error": "unable to connect to server"}', "tcp")


def test_client_args():
    spec = TrafficSpec(traffic="udp", tool="iperf3", size_bytes=64, ip_version=6, duration_s=2)
    a = build_client_args(spec, "2001:2:0:2::1", 0)
    assert a[:3] == ["iperf3", "-c", "2001:2:0:2::1"]
    assert ["-u", "-b", "0", "-l", "64"] == a[a.index("-u"):a.index("-u") + 5]
    assert "-6" in a and ["-A", "0"] == a[a.index("-A"):a.index("-A") + 2]
    t = build_client_args(TrafficSpec(traffic="tcp", tool="iperf3", streams=4), "198.19.1.1", None)
    assert "-u" not in t and ["-P", "4"] == t[t.index("-P"):t.index("-P") + 2] and "-A" not in t


def test_a_hung_client_is_a_failed_trial_not_a_failed_run():
    """iperf3 can hang at the end of a lossy UDP test; that trial fails, the run goes on."""
    from types import SimpleNamespace

    from fwlab.runners.iperf3 import Iperf3
    from fwlab.testbed.host import CommandTimeout
    from fwlab.testbed.topology import Topology

    topo = Topology(run_id="abcdef")

    class Host:
        def run(self, argv, ns=None, **kw):
            raise CommandTimeout("'iperf3 -c 198.19.1.1' did not finish within 32 s and was killed")

    host = Host()
    bed = SimpleNamespace(topo=topo, host=host, host_for=lambda role: host, ns=topo.ns,
                          link_counters=lambda role, dev: {"rx_packets": 0})
    runner = Iperf3()
    runner.start = lambda bed, spec: None
    with pytest.raises(RunnerError, match="hung"):
        runner.measure(bed, TrafficSpec(traffic="udp", tool="iperf3", size_bytes=64, duration_s=2))
