"""Each backend (the native ones, xdp in both attach modes and layouts, the command adapter with
its nftables and iptables templates), loaded with 1000 rules, passes the test traffic and drops traffic that matches a
deny entry — in routed and bridge mode, over IPv4 and IPv6, on the real kernel data path."""

import pytest

from probes import tcp_probe, udp_probe
from fwlab.dut import DutContext, get_backend
from fwlab.rules import generate
from fwlab.testbed import Testbed, Topology, new_run_id

CASES = [("nftables", "linear", False), ("nftables", "set", False), ("nftables", "linear", True),
         ("iptables-legacy", "linear", False), ("iptables-nft", "linear", False), ("ipset", "set", False),
         ("xdp", "linear", False), ("xdp", "set", False), ("xdp-generic", "linear", False),
         ("xdp-generic", "set", False),
         ("command:nftables", "linear", False), ("command:nftables", "set", False),
         ("command:nftables", "linear", True), ("command:iptables", "linear", False),
         ("nftables-flowtable", "linear", False)]


@pytest.mark.parametrize("mode", ["routed", "bridge"])
@pytest.mark.parametrize("ipv", [4, 6])
@pytest.mark.parametrize("backend,layout,shortcut", CASES)
def test_permit_passes_and_deny_entry_drops(mode, ipv, backend, layout, shortcut):
    why = get_backend(backend).unsupported(layout, mode, shortcut)
    if why:  # e.g. nftables-flowtable on a kernel without NF_FLOW_TABLE, or in bridge mode
        pytest.skip(why)
    with Testbed(Topology(run_id=new_run_id(), mode=mode)) as bed:
        plan = bed.topo.plan
        be = get_backend(backend)
        ctx = DutContext(bed.host, bed.ns("dut"), mode)
        rs = generate(1000, layout, ip_version=ipv, client_net=plan.client_net(ipv),
                      server_net=plan.server_net(ipv), stateful_shortcut=shortcut, seed=5)
        res = be.load(ctx, rs)
        assert len(res.digest) == 64 and res.load_s > 0
        client, server = plan.client(ipv), plan.server(ipv)

        assert udp_probe(bed, client, server, 7000) == 20, "permitted UDP must pass"
        assert tcp_probe(bed, client, server, 7001), "permitted TCP must connect"

        # a source that matches deny entry k, sending to that entry's port
        entry = next(e for e in rs.entries if e.proto == "udp")
        plen = 32 if ipv == 4 else 128
        extra = ["nodad"] if ipv == 6 else []
        bed.sh("client", "ip", "addr", "add", f"{entry.src}/{plen}", "dev", bed.topo.client_if, *extra)
        before = be.counters(ctx)
        assert udp_probe(bed, entry.src, server, entry.dport) == 0, "deny entry must drop"
        after = be.counters(ctx)
        assert after["deny"] - before["deny"] >= 20
        # counters saw the permitted traffic too
        assert after["permit"] + after["established"] > 0
        be.flush(ctx)


@pytest.mark.parametrize("ipv", [4, 6])
def test_direct_mode_has_no_dut_and_passes(ipv):
    with Testbed(Topology(run_id=new_run_id(), mode="direct")) as bed:
        assert bed.topo.roles == ("client", "server")
        plan = bed.topo.plan
        assert udp_probe(bed, plan.client(ipv), plan.server(ipv), 7000) == 20


def test_default_policy_drops_unlisted_traffic():
    """Traffic that matches neither a deny entry nor the permit (server -> client, new UDP) is dropped."""
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        be = get_backend("nftables")
        ctx = DutContext(bed.host, bed.ns("dut"), "routed")
        rs = generate(10, "linear", client_net="198.18.1.0/24", server_net="198.19.1.0/24")
        be.load(ctx, rs)
        bed.sh("client", "ip", "addr", "add", "198.18.2.1/32", "dev", bed.topo.client_if)
        assert udp_probe(bed, "198.18.2.1", "198.19.1.1", 7000) == 0
        assert be.counters(ctx)["default_drop"] >= 20
