"""Several client/server pairs (suite key ``pairs``, seed 000's 2 + 2): both pairs' streams cross
the one DUT at once, each is counted at the DUT's ingress, and nothing of the bed is left."""

import json

import pytest

from fwlab.dut import DutContext, get_backend
from fwlab.rules import generate
from fwlab.runners import TrafficSpec, get_runner
from fwlab.testbed import LocalHost, Testbed, Topology, list_fwl_namespaces, new_run_id


def _count_per_pair(bed: Testbed) -> None:
    """A netdev ingress counter per pair's client on the DUT's client-side veth (the DUT's own
    counters, in its namespace, apart from the rule set under test)."""
    t, plan = bed.topo, bed.topo.plan
    rules = "\n".join(f"    ip saddr {plan.pair_client(k, 4)} counter" for k in range(1, t.pairs + 1))
    bed.host.run(["nft", "-f", "-"], ns=bed.ns("dut"), input=(
        f"table netdev fwlpairs {{\n  chain in {{\n    type filter hook ingress device \"{t.dut_client_if}\" "
        f"priority -500;\n{rules}\n  }}\n}}\n"))


def _pair_bytes(bed: Testbed) -> dict[str, int]:
    doc = json.loads(bed.sh("dut", "nft", "-j", "list", "table", "netdev", "fwlpairs").stdout)
    out = {}
    for e in doc["nftables"]:
        r = e.get("rule")
        if not r:
            continue
        saddr = next(x["match"]["right"] for x in r["expr"] if "match" in x)
        out[saddr] = next(x["counter"]["bytes"] for x in r["expr"] if "counter" in x)
    return out


@pytest.mark.parametrize("mode", ["routed", "bridge"])
def test_two_pairs_through_one_dut(mode):
    runner = get_runner("iperf3")
    why = runner.unavailable()
    if why:
        pytest.skip(why)
    run_id = new_run_id()
    with Testbed(Topology(run_id=run_id, mode=mode, pairs=2)) as bed:
        plan = bed.topo.plan
        assert set(bed.topo.roles) >= {"client2", "server2", "swc", "sws"}
        be = get_backend("nftables")
        ctx = DutContext(bed.host, bed.ns("dut"), mode)
        be.load(ctx, generate(100, "linear", ip_version=4, client_net=plan.client_net(4),
                              server_net=plan.server_net(4)))
        _count_per_pair(bed)
        m = runner.measure(bed, TrafficSpec(traffic="tcp", tool="iperf3", ip_version=4, duration_s=2))
        runner.stop(bed)
        per_dut = _pair_bytes(bed)
    # both pairs' streams crossed the DUT (its own ingress counters, per client address)
    assert set(per_dut) == {plan.pair_client(1, 4), plan.pair_client(2, 4)}
    assert all(b > 0 for b in per_dut.values()), per_dut
    pairs = m.metrics["pairs"]
    assert [p["pair"] for p in pairs] == [1, 2] and m.metrics["pair_count"] == 2
    assert all(p["bytes"] > 0 and p["rx_if_bytes"] > 0 for p in pairs), pairs
    # the trial's figure is the sum of the pairs'
    assert m.metrics["bytes"] == sum(p["bytes"] for p in pairs)
    assert m.metrics["server_if_rx_packets"] == sum(p["rx_if_packets"] for p in pairs)
    assert m.metrics["start_skew_s"] >= 0 and m.metrics["common_interval_s"] is not None
    # every namespace of this run is gone
    assert [ns for ns in list_fwl_namespaces(LocalHost()) if ns.startswith(f"fwl-{run_id}-")] == []
