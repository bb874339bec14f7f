"""Scale on a real test bed (root; skipped when fwlab-engine is not built): a large set (210,000
entries, the keyed generator's range) loads with one nft -f, is really in the kernel (members
found, a non-member not), and the DUT still forwards through it with the deny counter at 0; the
connection client with 2 worker processes and RST close opens connections and counts them
exactly. No rate is asserted (machine-dependent)."""

import pytest

from fwlab.dut import DutContext, get_backend
from fwlab.rules import generate
from fwlab.runners import conn
from fwlab.runners import conn_options
from fwlab.runners import engine as eng
from fwlab.runners import engine_args as eng_args
from fwlab.runners import engine_binary as eng_bin
from fwlab.testbed import Testbed, Topology, new_run_id

if eng_bin.find_engine() is None:
    pytest.skip("fwlab-engine is not built (make engine)", allow_module_level=True)

ENTRIES = 210_000


def test_large_set_loads_and_forwards():
    be = get_backend("nftables")
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        plan = bed.topo.plan
        rs = generate(ENTRIES, "set", client_net=plan.client_net(4), server_net=plan.server_net(4))
        ctx = DutContext(bed.host, bed.ns("dut"), "routed")
        res = be.load(ctx, rs)
        first, last = rs.entries[0], rs.entries[-1]
        found = [bed.sh("dut", "nft", "get", "element", "ip", "fwlab", "deny",
                        f"{{ {e.src} . {e.proto} . {e.dport} }}", check=False).returncode for e in (first, last)]
        absent = bed.sh("dut", "nft", "get", "element", "ip", "fwlab", "deny",
                        "{ 198.18.1.1 . tcp . 5555 }", check=False).returncode
        before = be.counters(ctx)
        send, recv = eng.default_cpus(bed, 1)
        m = eng.run_trial(bed, eng_args.EngineTrial(send_cpus=send, recv_cpus=recv, duration_s=1, rate_pps=5000,
                                               frame_size=64, ip_version=4), 5000).metrics
        after = be.counters(ctx)
    assert res.kernel_mem_bytes is not None
    assert res.notes and "not read back" in res.notes[0]   # above FULL_LISTING_MAX: terse digest
    assert found == [0, 0] and absent != 0
    assert m["forwarded_count"] > 0
    assert after["permit"] - before["permit"] >= m["forwarded_count"]
    assert after["deny"] == before["deny"] == 0


def test_conn_client_workers_open_and_count_exactly():
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        plan = bed.topo.plan
        get_backend("nftables").load(DutContext(bed.host, bed.ns("dut"), "routed"),
                                     generate(0, "linear", client_net=plan.client_net(4),
                                              server_net=plan.server_net(4)))
        srcs = conn.prepare_bed(bed, {4: 4})["addresses"]["4"]
        o = conn_options.check_options("conn_rate", {"workers": 2, "close": "rst", "ports": 2, "timeout_s": 3.0})
        doc, srv, _, _ = conn.run_rate(bed, ip_version=4, rate_cps=400, duration_s=1, o=o, srcs=srcs)
        closed, _, _, _ = conn.run_rate(bed, ip_version=4, rate_cps=None, duration_s=0.5,
                                        o={**o, "max_inflight": 64}, srcs=srcs)
    assert doc["workers"] == 2 and doc["close"] == "rst"
    assert doc["intended"] == doc["started"] == doc["succeeded"] == 400 and doc["failed"] == {}
    assert [w["started"] for w in doc["per_worker"]] == [200, 200]
    assert srv["accepted"] == 400
    assert doc["succeeded_cps"] > 0 and doc["transaction_us"]["samples"] == 400
    # closed loop: every started transaction ends, succeeded or counted as failed
    assert closed["intended"] is None and closed["started"] > 0
    assert closed["succeeded"] + sum(closed["failed"].values()) == closed["started"]
