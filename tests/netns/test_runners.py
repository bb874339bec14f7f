"""Every traffic runner measures real traffic through a loaded DUT (skipped if its tool is absent)."""

import pytest

from fwlab.dut import DutContext, get_backend
from fwlab.rules import generate
from fwlab.runners import TrafficSpec, get_runner
from fwlab.testbed import Testbed, Topology, new_run_id

CASES = [("iperf3", "tcp", None, 4), ("iperf3", "udp", 64, 4), ("iperf3", "udp", 512, 6),
         ("netperf", "tcp", 1400, 4), ("netperf", "udp", 64, 4), ("netperf", "tcp_rr", None, 4),
         ("netperf", "tcp_crr", None, 6)]


@pytest.mark.parametrize("tool,traffic,size,ipv", CASES)
def test_runner_through_dut(tool, traffic, size, ipv):
    runner = get_runner(tool)
    why = runner.unavailable()
    if why:
        pytest.skip(why)
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        plan = bed.topo.plan
        be = get_backend("nftables")
        ctx = DutContext(bed.host, bed.ns("dut"), "routed")
        be.load(ctx, generate(100, "linear", ip_version=ipv, client_net=plan.client_net(ipv),
                              server_net=plan.server_net(ipv)))
        before = be.counters(ctx)
        m = runner.measure(bed, TrafficSpec(traffic=traffic, tool=tool, size_bytes=size, ip_version=ipv, duration_s=1))
        runner.stop(bed)
        after = be.counters(ctx)
        if traffic in ("tcp_rr", "tcp_crr"):
            assert m.metrics["transactions_per_s"] > 0
        else:
            assert m.metrics["throughput_bps"] > 0 and m.metrics["rx_pps"] > 0
        # the traffic really crossed the firewall's permit rules
        assert after["permit"] - before["permit"] >= m.metrics["server_if_rx_packets"] * 0.9
