"""kube-proxy rule sets on the real data path: a datagram to the test Service's ClusterIP is
DNATed by the DUT to the server (iptables mode and nftables mode), and one to another Service
(whose endpoints do not exist) does not reach the server."""

import pytest

from probes import udp_probe
from fwlab.dut import DutContext, get_backend
from fwlab.rules import generate_kube_proxy
from fwlab.testbed import Testbed, Topology, new_run_id


def _send(bed, dst: str, port: int, listen_port: int, count: int = 20) -> int:
    """``count`` datagrams from the client to ``dst``:``port``; how many the server received on
    its own address at ``listen_port``."""
    plan = bed.topo.plan
    return udp_probe(bed, plan.client(4), dst, port, count, listen_addr=plan.server(4), listen_port=listen_port)


@pytest.mark.parametrize("backend", ["iptables-nft", "iptables-legacy", "nftables"])
def test_service_cluster_ip_is_dnated_to_the_server(backend):
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        plan = bed.topo.plan
        be = get_backend(backend)
        ctx = DutContext(bed.host, bed.ns("dut"), "routed")
        rs = generate_kube_proxy(200, endpoints=3, server_addr=plan.server(4), port=7000)
        be.load(ctx, rs)
        ip, port = rs.target
        assert _send(bed, ip, port, 7000) == 20, "datagrams to the ClusterIP must reach the server"
        # one flow (one source port): NAT rules see only its first packet, conntrack does the rest
        assert be.counters(ctx)["permit"] == 1, "the test Service's DNAT rule must count the flow"
        other = rs.services[0]  # its endpoints are pod addresses nobody answers for
        assert _send(bed, other.cluster_ip, other.port, 7000) == 0
        be.flush(ctx)
        bed.sh("dut", "conntrack", "-F")
        assert _send(bed, ip, port, 7000) == 0, "after the flush the ClusterIP is not DNATed"
