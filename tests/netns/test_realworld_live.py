"""Real-world rule sets on the real data path, 20 rules each: firewalld's zone passes the test
traffic by its last rich rule (every one-way datagram: it never turns established) and rejects
another port; Docker (its iptables form and Docker 29's nftables form) DNATs
the last published port to the server and not another; the ClassBench-style ACL passes flows spread over its rules (engine,
one flow per rule), each counted by the rule the model says it meets first."""

import re

import pytest

from probes import udp_probe
from fwlab.dut import DutContext, get_backend
from fwlab.rules import generate_realworld
from fwlab.rules.classbench import first_matches
from fwlab.runners import engine as eng
from fwlab.runners import engine_args as eng_args
from fwlab.runners import engine_binary as eng_bin
from fwlab.testbed import Testbed, Topology, new_run_id

N = 20
PORT = 7000


def _send(bed, dst: str, port: int, listen_port: int, count: int = 10) -> int:
    plan = bed.topo.plan
    return udp_probe(bed, plan.client(4), dst, port, count, listen_addr=plan.server(4), listen_port=listen_port)


def _rs(bed, layout, port=PORT):
    plan, topo = bed.topo.plan, bed.topo
    return generate_realworld(layout, N, ip_version=4, server_addr=plan.server(4), port=port,
                              host_addr=plan.dut_client_side4, dut_client_if=topo.dut_client_if,
                              dut_server_if=topo.dut_server_if, client_net=plan.client_net(4),
                              server_net=plan.server_net(4))


@pytest.mark.parametrize("backend", ["nftables", "iptables-nft"])
def test_firewalld_zone_passes_the_last_rich_rule_only(backend):
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        be, ctx = get_backend(backend), DutContext(bed.host, bed.ns("dut"), "routed")
        be.load(ctx, _rs(bed, "firewalld"))
        assert _send(bed, bed.topo.plan.server(4), PORT, PORT) == 10
        c = be.counters(ctx)
        # one-way UDP never turns established (conntrack saw no reply): every datagram meets it
        assert c["permit"] == 10, "the test rich rule must count every datagram"
        assert _send(bed, bed.topo.plan.server(4), PORT + 1, PORT + 1) == 0, "no rich rule: the zone rejects"
        assert be.counters(ctx)["default_drop"] >= 1
        be.flush(ctx)


@pytest.mark.parametrize("backend", ["nftables", "iptables-nft"])
def test_docker_published_port_is_dnated_to_the_server(backend):
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        be, ctx = get_backend(backend), DutContext(bed.host, bed.ns("dut"), "routed")
        rs = _rs(bed, "docker")
        be.load(ctx, rs)
        host, hport = rs.target
        assert host == bed.topo.plan.dut_client_side4
        assert _send(bed, host, hport, PORT) == 10
        assert be.counters(ctx)["permit"] == 1, "the last published port's DNAT counts the flow"
        other = next(p for p in rs.items[:-1] if p.proto == "udp")  # its container is not on the wire
        assert _send(bed, host, other.host_port, PORT) == 0
        be.flush(ctx)
        bed.sh("dut", "conntrack", "-F")
        assert _send(bed, host, hport, PORT) == 0, "after the flush the port is not published"


def _rule_counters(backend, bed) -> dict[int, int]:
    if backend == "nftables":
        text = bed.sh("dut", "nft", "list", "ruleset").stdout
        pat = re.compile(r'counter packets (\d+) bytes \d+ accept comment "permit-acl-(\d+)"')
        return {int(k): int(n) for n, k in pat.findall(text)}
    text = bed.sh("dut", "iptables-nft-save", "-c", "-t", "mangle").stdout
    pat = re.compile(r"^\[(\d+):\d+\] .*--comment permit-acl-(\d+) ", re.M)
    return {int(k): int(n) for n, k in pat.findall(text)}


@pytest.mark.parametrize("backend", ["nftables", "iptables-nft"])
def test_classbench_acl_flows_meet_the_rules_the_model_says(backend):
    if eng_bin.engine_unavailable():
        pytest.skip(eng_bin.engine_unavailable())
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        be, ctx = get_backend(backend), DutContext(bed.host, bed.ns("dut"), "routed")
        rs = _rs(bed, "classbench-acl", port=eng_args.ENGINE_PORT)
        be.load(ctx, rs)
        rounds = 5  # every flow sent 5 times, in order (the engine's increment mode)
        t = eng_args.EngineTrial(duration_s=1, rate_pps=20000, backend="packet", count=N * rounds,
                            dst=rs.flows["dst"], src_range=rs.flows["src"], dst_port_range=rs.flows["dst_port"])
        m = eng.run_trial(bed, t, N * rounds).metrics
        assert m["forwarded_count"] == N * rounds, "every flow is accepted by the ACL and DNATed to the server"
        got = _rule_counters(backend, bed)
        expect = {k: 0 for k in range(N)}
        for hit in first_matches(rs):
            expect[hit] += rounds
        assert got == expect
        assert sum(1 for v in got.values() if v) > N // 2, "the flows are spread over the rules"
        assert be.counters(ctx).get("default_drop", 0) == 0
        be.flush(ctx)
