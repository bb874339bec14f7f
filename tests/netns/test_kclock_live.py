"""The in-kernel clock on a real test bed (root; skipped without clang or the engine): every
forwarded packet is timed exactly once (probe counts = packets sent = received = the rule's
counter), a packet the firewall drops is counted as entered and never timed, and what the kernel
refuses (the bridge family) is reported as missing with the kernel's reason."""

import json
import shutil

import pytest

from fwlab.probes.brackets import Bracket, Plan
from fwlab.probes.cost import kernel_cost
from fwlab.probes.kclock import CostProbe
from fwlab.probes.reference import ReferenceChain
from fwlab.runners import engine as eng
from fwlab.runners import engine_args as eng_args
from fwlab.runners import engine_binary as eng_bin
from fwlab.testbed import Testbed, Topology, new_run_id

if eng_bin.find_engine() is None:
    pytest.skip("fwlab-engine is not built (make engine)", allow_module_level=True)
if shutil.which("clang") is None:
    pytest.skip("clang is not installed (the probe is compiled on first use)", allow_module_level=True)

RATE, SECONDS = 10_000, 1  # light: far below what the bed forwards [packets/s], [s]

RULES = """
table ip fwltest {
  chain forward {
    type filter hook forward priority 0; policy drop;
    %s
    ip saddr 198.18.1.0/24 udp dport %d counter accept comment "permit"
    ip saddr 198.19.1.0/24 counter accept
  }
}
"""
DROP_TENTH = "udp dport %d numgen inc mod 10 0 counter drop comment \"drop\""


def counters(bed, family="ip"):
    listing = json.loads(bed.sh("dut", "nft", "-j", "list", "table", family, "fwltest").stdout)
    out = {}
    for item in listing["nftables"]:
        r = item.get("rule")
        if r and "comment" in r:
            out[r["comment"]] = next(e["counter"]["packets"] for e in r["expr"] if "counter" in e)
    return out


def send(bed, ip_version=4):
    s, r = eng.default_cpus(bed, 1)
    t = eng_args.EngineTrial(send_cpus=s, recv_cpus=r, duration_s=SECONDS, rate_pps=RATE,
                        frame_size=eng_args.default_frame_size(ip_version), ip_version=ip_version)
    return eng.run_trial(bed, t, RATE * SECONDS).metrics


def test_every_forwarded_packet_is_timed_once():
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        bed.host.run(["nft", "-f", "-"], ns=bed.ns("dut"), input=RULES % ("", eng_args.ENGINE_PORT))
        with CostProbe.for_dut(bed.host, bed.ns("dut"), reference=ReferenceChain(rules=100), max_s=20) as p:
            m = send(bed)
        res, c = p.result(), counters(bed)
        tables = bed.sh("dut", "nft", "list", "tables").stdout
    assert res.missing is None, res.missing
    sent = m["offered_count"]
    assert sent > 0 and m["forwarded_count"] == sent and c["permit"] == sent
    for role in ("chains", "reference", "floor"):
        (b,) = res.of_role(role, "ipv4")
        # exactly once: every forwarded test packet entered and left each bracket, nothing unpaired
        # (the bed's own ARP/ND is not forwarded; IPv6 has its own brackets)
        assert b.entered == b.timed == sent, (role, b)
        assert b.unfinished == 0 and b.unmatched == 0
        assert sum(b.counts.values()) == sent
    cost = kernel_cost(res, "ipv4", packets_sent=sent)
    assert cost.calls_per_packet == 1.0
    assert cost.p50_ns > cost.floor_p50_ns > 0 and cost.reference_p50_ns > cost.floor_p50_ns
    assert cost.p50_low_ns <= cost.p50_ns <= cost.p50_high_ns
    assert cost.paired == sent and cost.packet_ratio_p50 > 0  # every packet's own firewall / reference ratio
    assert "fwlab_kclock_ref" not in tables  # the reference chain is gone with the probe


def test_a_dropped_packet_enters_and_is_never_timed():
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        bed.host.run(["nft", "-f", "-"], ns=bed.ns("dut"),
                     input=RULES % (DROP_TENTH % eng_args.ENGINE_PORT, eng_args.ENGINE_PORT))
        with CostProbe.for_dut(bed.host, bed.ns("dut"), max_s=20) as p:
            m = send(bed)
        res, c = p.result(), counters(bed)
    assert res.missing is None, res.missing
    (b,) = res.of_role("chains", "ipv4")
    (floor,) = res.of_role("floor", "ipv4")
    sent, dropped = m["offered_count"], c["drop"]
    assert dropped > 0 and c["permit"] == m["forwarded_count"] == sent - dropped
    assert b.entered == sent and b.timed == sent - dropped and b.unmatched == 0
    # a drop is seen when the next packet enters the bracket: the very last one may still be pending
    assert b.unfinished in (dropped - 1, dropped)
    assert floor.timed == sent - dropped  # the floor after the chain sees only what the chain let through
    assert kernel_cost(res, "ipv4", sent).unfinished == b.unfinished


def test_the_bridge_family_is_missing_with_the_kernels_reason():
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        p = Plan((Bracket(0, "bridge", "forward", -1, 1, "chains", ("nft bridge x/y",)),
                  Bracket(1, "ipv4", "forward", 100, 101, "floor")), ())
        with CostProbe(bed.host, bed.ns("dut"), p, max_s=5) as probe:
            pass
        res = probe.result()
    assert res.missing is None
    bridge, floor = res.brackets
    assert "Address family not supported" in bridge.missing
    assert floor.missing is None and floor.timed == 0


def test_legacy_iptables_against_its_xtables_reference():
    """iptables-legacy's filter table (invisible to nft) is found and timed once per packet, and the
    xtables reference chain pairs with it packet by packet."""
    from fwlab.dut.base import DutContext, get_backend
    from fwlab.probes.reference import XtablesReference
    from fwlab.rules.generate import generate
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        get_backend("iptables-legacy").load(DutContext(bed.host, bed.ns("dut"), "routed"), generate(10, "linear"))
        with CostProbe.for_dut(bed.host, bed.ns("dut"), families=("ipv4",), reference=XtablesReference(rules=10),
                               max_s=20) as p:
            m = send(bed)
        res = p.result()
        left = bed.sh("dut", "iptables-legacy", "-t", "security", "-S", "FORWARD").stdout
    sent = m["offered_count"]
    (fw,) = res.of_role("chains", "ipv4")
    assert fw.bracket.chains == ("iptables-legacy filter",) and fw.timed == fw.entered == sent == m["forwarded_count"]
    ref = res.reference("ipv4")
    assert ref.timed == sent and ref.paired == sent
    assert "-A FORWARD" not in left  # the reference rules are gone with the probe


def test_xdp_program_run_time_counts_each_packet():
    from fwlab.dut.base import DutContext, get_backend
    from fwlab.probes.kclock import ProgStatsProbe
    from fwlab.rules.generate import generate
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        get_backend("xdp-generic").load(DutContext(bed.host, bed.ns("dut"), "routed"), generate(10, "linear"))
        with ProgStatsProbe(bed.host, bed.ns("dut"), max_s=20) as p:
            m = send(bed)
        res = p.result()
    assert res.missing is None, res.missing
    busiest = max(res.programs, key=lambda x: x.runs)
    sent = m["offered_count"]
    # one run per packet on the client-side interface, plus the bed's few ARP/ND frames
    assert sent <= busiest.runs <= sent + 20 and busiest.run_time_ns > 0


INET_RULES = """
table inet fwltest {
  chain forward {
    type filter hook forward priority 0; policy accept;
    meta l4proto udp th dport %d counter accept comment "permit"
  }
}
"""


def test_an_inet_table_is_timed_on_ipv6_too():
    """An inet chain registers on IPv4 and IPv6: IPv6 test packets are timed once on the IPv6
    bracket, and the IPv4 bracket sees none of them."""
    with Testbed(Topology(run_id=new_run_id(), mode="routed", ip_versions=(4, 6))) as bed:
        bed.host.run(["nft", "-f", "-"], ns=bed.ns("dut"), input=INET_RULES % eng_args.ENGINE_PORT)
        with CostProbe.for_dut(bed.host, bed.ns("dut"), max_s=20) as p:
            m = send(bed, ip_version=6)
        res, c = p.result(), counters(bed, "inet")
    sent = m["offered_count"]
    (v6,) = res.of_role("chains", "ipv6")
    (v4,) = res.of_role("chains", "ipv4")
    assert v6.bracket.chains == ("nft inet fwltest/forward",) == v4.bracket.chains
    assert v6.timed == v6.entered == sent == m["forwarded_count"] == c["permit"]
    assert v4.timed == 0
    assert kernel_cost(res, "ipv6", sent).calls_per_packet == 1.0


def test_the_loader_stops_by_itself():
    """Bounded: the loader ends after its hold, or when stdin closes (--stdin), and unlinks."""
    from fwlab.probes.build import bpf_object, loader
    obj, ld = str(bpf_object().path), str(loader().path)
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        timed = bed.host.run([ld, obj, "0.3", "0:2:2:100:101"], ns=bed.ns("dut"), timeout_s=20)
        closed = bed.host.run([ld, "--stdin", obj, "30", "0:2:2:100:101"], ns=bed.ns("dut"), input="", timeout_s=20)
    t, c = (json.loads(cp.stdout.splitlines()[-1]) for cp in (timed, closed))
    assert t["stopped_by"] == "time" and 0.3 <= t["hold_s"] < 5
    assert c["stopped_by"].startswith("stdin") and c["hold_s"] < 5
