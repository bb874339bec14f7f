"""Many parallel TCP streams over several iperf3 processes, with recovery probes, on the real
data path; and a bidirectional trial that moves traffic both ways."""

import pytest

import fwlab.methods  # noqa: F401  (registers the parallel method)
from fwlab.runners import TrafficSpec, get_runner
from fwlab.stats.derive import add_stream_spread
from fwlab.testbed import Testbed, Topology, new_run_id


@pytest.fixture
def bed():
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as b:
        yield b
        get_runner("iperf3").stop(b)


def test_more_streams_than_one_iperf3_process_allows(bed):
    m = get_runner("iperf3").run_clients(bed, TrafficSpec("tcp", "iperf3", streams=200, duration_s=2))
    assert m.metrics["client_processes"] == 2
    assert len(m.extra["per_stream_bps"]["up"]) == 200
    assert m.metrics["bytes"] > 0 and m.metrics["throughput_bps"] > 0
    assert m.metrics["completion_s"] >= 2.0
    derived = dict(m.metrics)       # the spread figures are derived when the trial is recorded
    add_stream_spread(derived, m.extra["per_stream_bps"])
    assert derived["stream_count"] == 200 and 0 < derived["fairness_jain"] <= 1
    assert m.series and m.series[0]["processes"] == 2


def test_parallel_kind_has_baseline_run_and_probes(bed):
    spec = TrafficSpec("parallel", "parallel", streams=130, duration_s=2,
                       options={"interval_s": 1.5, "probe_s": 1, "max_probes": 2, "tolerance": 0.1})
    m = get_runner("parallel").measure(bed, spec)
    assert m.kind == "parallel"
    assert m.metrics["baseline_bps"] > 0 and len(m.extra["per_stream_bps"]["up"]) == 130
    probes = m.extra["probes"]
    assert 1 <= len(probes) <= 2 and probes[0]["t_after_s"] < 1.5
    assert all(p["throughput_bps"] and p["throughput_bps"] > 0 for p in probes)
    if len(probes) == 2:
        assert not probes[0]["recovered"] and probes[1]["t_after_s"] >= 1.5


@pytest.mark.parametrize("traffic,rate", [("tcp", None), ("udp", 50_000_000)])
def test_bidirectional_moves_traffic_both_ways(bed, traffic, rate):
    before = {r: bed.link_counters(r, d)["rx_packets"] for r, d in (("client", bed.topo.client_if),
                                                                     ("server", bed.topo.server_if))}
    m = get_runner("iperf3").measure(bed, TrafficSpec(traffic, "iperf3", duration_s=2, rate_bps=rate,
                                                      size_bytes=1000 if traffic == "udp" else None,
                                                      options={"direction": "bidir"}))
    after = {r: bed.link_counters(r, d)["rx_packets"] for r, d in (("client", bed.topo.client_if),
                                                                    ("server", bed.topo.server_if))}
    assert m.metrics["throughput_up_bps"] > 0 and m.metrics["throughput_down_bps"] > 0
    total = m.metrics["throughput_up_bps"] + m.metrics["throughput_down_bps"]
    if traffic == "tcp":
        assert m.metrics["throughput_bps"] == pytest.approx(total)
    else:  # the total is link-counted; what the two receivers read cannot exceed it
        assert total <= m.metrics["throughput_bps"] * 1.01
    # both receivers' links got the data (far more than ACKs alone would be for UDP)
    assert after["client"] - before["client"] > 1000 and after["server"] - before["server"] > 1000
    assert all("throughput_down_bps" in s for s in m.series)


def test_probes_run_during_the_load_on_their_own_port(bed):
    # seed 004's Table 3 procedure: probes start with the multi-stream load and stop when it ends
    spec = TrafficSpec("parallel", "parallel", streams=20, duration_s=2,
                       options={"interval_s": 1, "probe_s": 1, "max_probes": 3, "tolerance": 0.1,
                                "during": True, "load_s": 4})
    m = get_runner("parallel").measure(bed, spec)
    assert m.kind == "parallel" and m.extra["probe_plan"]["during"] is True
    assert len(m.extra["per_stream_bps"]["up"]) == 20 and m.metrics["completion_s"] >= 4.0   # load_s, not duration_s
    probes = m.extra["probes"]
    assert m.extra["load_up_s"] is not None                       # probes started once its streams were up
    assert 1 <= len(probes) <= 3 and probes[0]["t_after_s"] < 1.0
    assert probes[0]["during_load"] is True                       # the first one ran beside the load
    assert all(p["throughput_bps"] and p["throughput_bps"] > 0 for p in probes)
    assert all(p["recovered"] is False for p in probes if not p["during_load"])
    # the probes' iperf3 server listened on the port after the load's (one process for 20 streams)
    probe_server = get_runner("iperf3")._servers.get(("server", bed.ns("server"), spec.port + 1, spec.ip_version))
    assert probe_server is not None and str(spec.port + 1) in probe_server.argv
