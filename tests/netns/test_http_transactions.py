"""HTTP transactions through a real DUT: nginx in the server namespace, curl in the client's."""

import shutil

import pytest

from fwlab.dut import DutContext, get_backend
from fwlab.rules import generate
from fwlab.runners import TrafficSpec, TrialEnv, get_runner
from fwlab.testbed import Testbed, Topology, new_run_id


def _runner():
    r = get_runner("curl")
    why = r.unavailable()
    if why:
        pytest.skip(why)
    return r


def _spec(r, kind="http", size=1000, streams=4, ipv=4):
    return TrafficSpec(traffic=kind, tool="curl", size_bytes=size, streams=streams, ip_version=ipv,
                       duration_s=1, options=r.check_options(kind, {}))


def _nftables_dut(bed, rules, ipv=4):
    """nftables on the bed's DUT with ``rules`` linear rules, established first."""
    plan = bed.topo.plan
    be = get_backend("nftables")
    ctx = DutContext(bed.host, bed.ns("dut"), "routed")
    be.load(ctx, generate(rules, "linear", ip_version=ipv, client_net=plan.client_net(ipv),
                          server_net=plan.server_net(ipv), stateful_shortcut=True))
    return be, ctx


@pytest.mark.parametrize("ipv", [4, 6])
def test_transactions_cross_the_stateful_firewall(ipv):
    r = _runner()
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        be, ctx = _nftables_dut(bed, 100, ipv)
        before = be.counters(ctx)
        m = r.measure(bed, _spec(r, size=16000, ipv=ipv), TrialEnv(backend=be, dut=ctx))
        after = be.counters(ctx)
        r.stop(bed)
    mm = m.metrics
    assert m.kind == "transactions"
    assert mm["transactions"] > 0 and mm["failure_pct"] == 0.0
    assert mm["connections_per_transaction"] == 1.0
    # nginx served at least what the client counted (the client counts only after its warm-up)
    assert mm["server_requests"] >= mm["transactions"]
    # every transaction's first packet walked the rule set to the permit; the rest took the shortcut
    assert after["permit"] - before["permit"] >= mm["transactions"]
    assert after["established"] - before["established"] > after["permit"] - before["permit"]
    assert mm["ttfb_ms_p50"] >= mm["connect_ms_p50"] > 0
    assert mm["throughput_bps"] == pytest.approx(mm["transactions"] * 16000 * 8 / mm["duration_s"])


def test_refused_connections_are_failures_not_missing_figures():
    r = _runner()
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        be, ctx = _nftables_dut(bed, 10)
        bed.host.run(["nft", "insert", "rule", "ip", "fwlab", "forward", "tcp", "dport", "80",
                      "reject", "with", "tcp", "reset"], ns=ctx.ns)
        m = r.measure(bed, _spec(r, streams=2), TrialEnv(backend=be, dut=ctx))
        r.stop(bed)
    assert m.metrics["transactions"] == 0 and m.metrics["failure_pct"] == 100.0
    assert set(m.extra["failures_by_reason"]) == {"curl exit 7"}


def test_request_matrix_reaches_six_servers_from_eight_clients():
    r = _runner()
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        m = r.measure(bed, _spec(r, kind="mix", size=None, streams=12), TrialEnv())
        r.stop(bed)
        left = bed.sh("server", "ip", "-o", "addr", "show", "dev", bed.topo.server_if).stdout
    assert m.metrics["client_processes"] == 8 and m.metrics["failure_pct"] == 0.0
    assert sorted(m.extra["by_server"]) == [f"srv0{k}.fwlab.test" for k in range(1, 7)]
    # client06-08 send 40 % to server01, client01-05 2.4 %: server01 gets clearly less than server03
    bs = m.extra["by_server"]
    assert bs["srv01.fwlab.test"]["transactions"] < bs["srv03.fwlab.test"]["transactions"]
    assert "198.19.1.17" not in left  # the extra server addresses go with the server


def test_request_mix_with_ftp_crosses_the_firewall_with_table_8s_protocol_shares():
    """Seed 002's HTTP/FTP mix (Table 8) through nftables: both protocols complete, counted apart,
    and vsftpd goes with the runner."""
    r = _runner()
    if not shutil.which("vsftpd", path="/usr/sbin:/usr/bin"):
        pytest.skip("vsftpd is not installed")
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        be, ctx = _nftables_dut(bed, 10)
        spec = TrafficSpec(traffic="mix", tool="curl", size_bytes=None, streams=16, ip_version=4, duration_s=2,
                           options=r.check_options("mix", {"ftp": True, "objects_bytes": [1000, 16000]}))
        m = r.measure(bed, spec, TrialEnv(backend=be, dut=ctx))
        r.stop(bed)
        left = bed.sh("server", "ss", "-ltnH", "sport = :21", check=False).stdout
    bp = m.extra["by_protocol"]
    assert m.metrics["failure_pct"] == 0.0, m.extra["failures_by_reason"]
    assert bp["ftp"]["transactions"] > 0 and bp["http"]["transactions"] > 0
    assert bp["ftp"]["transactions"] + bp["http"]["transactions"] == m.metrics["transactions"]
    assert m.metrics["ftp_tpm"] > 0 and m.metrics["http_tpm"] > 0
    assert m.extra["mix_shares"]["ftp"] > 0.3  # the planned share over the eight clients' cycles
    assert not left.strip()  # vsftpd stopped with the runner
