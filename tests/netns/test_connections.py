"""Connection tests on a real test bed (root; skipped when fwlab-engine is not built): held
connections appear in the DUT's connection table and still carry data; a deny rule for one
client source address makes exactly its connections fail, and they are counted; a short rate
search through the runner ends with a result and a record-ready measurement; the lean
transaction (the runner's default) succeeds through a tracking DUT in fewer segments."""

import pytest

from fwlab.dut import DutContext, get_backend
from fwlab.rules import generate
from fwlab.runners import conn
from fwlab.runners import conn_counts
from fwlab.runners import conn_options
from fwlab.runners.base import TrafficSpec, TrialEnv
from fwlab.methods.connections import ConnRunner
from fwlab.testbed import Testbed, Topology, new_run_id

if conn.find_engine() is None:
    pytest.skip("fwlab-engine is not built (make engine)", allow_module_level=True)


def stateful_bed(bed: Testbed, rules: int = 0) -> DutContext:
    ctx = DutContext(bed.host, bed.ns("dut"), bed.topo.mode)
    plan = bed.topo.plan
    rs = generate(rules, "linear", ip_version=4, client_net=plan.client_net(4), server_net=plan.server_net(4),
                  stateful_shortcut=True)
    get_backend("nftables").load(ctx, rs)
    return ctx


@pytest.mark.parametrize("mode", ["routed", "bridge"])
def test_held_connections_fill_the_dut_table_and_echo(mode):
    with Testbed(Topology(run_id=new_run_id(), mode=mode)) as bed:
        stateful_bed(bed)
        info = conn.prepare_bed(bed, {4: 2})
        o = conn_options.check_options("conn_capacity", {"hold_s": 0.5})
        doc, srv, before, held = conn.run_hold(bed, ip_version=4, count=2000, o=o, srcs=info["addresses"]["4"])
        after = conn.read_conntrack(bed)
    assert doc["established"] == doc["held"] == 2000
    assert doc["probed"] == doc["probe_ok"] == 2000
    assert doc["failed"] == {} and doc["local_errors"] == {}
    assert before["nf_conntrack_count"] < 50
    # about the number held (a few others: the neighbour probes, leftovers in closing states)
    assert 2000 <= held["nf_conntrack_count"] <= 2100
    assert after["nf_conntrack_count"] < 50  # flushed after the trial
    assert srv["accepted"] == 2000


def test_lean_transactions_pass_a_tracking_dut_in_fewer_segments():
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        stateful_bed(bed)
        srcs = conn.prepare_bed(bed, {4: 2})["addresses"]["4"]
        per_txn = {}
        for lean in (False, True):
            o = conn_options.check_options("conn_rate", {"timeout_s": 3.0, "lean": lean})
            seg0 = [conn.tcp_segments_sent(bed, r) for r in ("client", "server")]
            doc, srv, _, _ = conn.run_rate(bed, ip_version=4, rate_cps=200, duration_s=1, o=o, srcs=srcs)
            seg1 = [conn.tcp_segments_sent(bed, r) for r in ("client", "server")]
            assert doc["started"] == doc["succeeded"] == 200 and doc["failed"] == {}, doc["failed"]
            assert doc["lean"] is lean and srv["lean"] is lean and srv["closed_after_end"] == 200
            assert doc["cpu_sys_s"] + doc["cpu_user_s"] > 0
            per_txn[lean] = (sum(seg1) - sum(seg0)) / 200
    # 10 segments a transaction before, 7 lean (timing can add an ACK here and there)
    assert per_txn[True] >= 7 and per_txn[True] < per_txn[False] - 2, per_txn


def test_deny_rule_for_one_source_fails_exactly_its_connections():
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        stateful_bed(bed)
        info = conn.prepare_bed(bed, {4: 2})
        srcs = info["addresses"]["4"]
        # a generous timeout: on a loaded machine the good half must not time out
        o = conn_options.check_options("conn_rate", {"timeout_s": 3.0})
        ok, _, _, _ = conn.run_rate(bed, ip_version=4, rate_cps=200, duration_s=1, o=o, srcs=srcs)
        bed.sh("dut", "nft", "insert", "rule", "ip", "fwlab", "forward", "ip", "saddr", srcs[0], "tcp", "dport",
               str(conn.PORT_BASE), "counter", "drop")
        bad, _, _, _ = conn.run_rate(bed, ip_version=4, rate_cps=200, duration_s=1, o=o, srcs=srcs)
        denied = bed.sh("dut", "nft", "list", "chain", "ip", "fwlab", "forward").stdout
    assert ok["started"] == ok["succeeded"] == 200 and ok["failed"] == {}
    # connection k uses srcs[k % 2]: the even half is dropped at the DUT and times out
    assert bad["started"] == 200
    assert bad["succeeded"] == 100
    assert bad["failed"] == {"timeout": 100}
    tr = conn_counts.rate_trial_result(bad, 1.0, 200)
    assert tr.loss_ratio == pytest.approx(0.5)
    assert f"ip saddr {srcs[0]}" in denied and "packets 0 " not in denied.split(srcs[0])[1].splitlines()[0]


def test_rate_search_through_the_runner():
    runner = ConnRunner()
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        ctx = stateful_bed(bed, rules=100)
        env = TrialEnv(backend=get_backend("nftables"), dut=ctx)
        opts = runner.check_options("conn_rate", {"max_rate_cps": 1000, "min_rate_cps": 100,
                                                  "relative_width": 0.5, "timeout_s": 1.0, "addresses": 2})
        spec = TrafficSpec(traffic="conn_rate", tool="conn", duration_s=0.5, options=opts)
        env.bed_info["conn"] = conn.prepare_bed(bed, {4: 2})
        m = runner.measure(bed, spec, env)
    assert m.kind == "connections" and m.extra["test"] == "rate"
    assert m.metrics["conn_rate_cps"] is not None and 100 <= m.metrics["conn_rate_cps"] <= 1000
    assert m.metrics["search_trials"] >= 1 and m.raw["trials"]
    assert m.metrics["conntrack_count_peak"] >= 50  # the stateful rule set tracked them
