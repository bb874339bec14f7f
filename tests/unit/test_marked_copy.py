"""The marked copy of a rule set (dropped classes timed to their drop verdict): the nft and
iptables rewrites, the clock's drop-mark placement, and the figures' labels in the summary and mix."""

from __future__ import annotations

import json

import pytest

from fwlab.dut.marked_copy import (HELPER_CHAIN, MARK, XT_CHAIN, iptables_text, nft_commands, policy_rule_ids,
                                   uses_mark)
from fwlab.methods.class_cost import class_figures
from fwlab.probes import histogram as hist
from fwlab.probes.brackets import BaseChain, Bracket, plan
from fwlab.probes.kclock import BracketResult, ProbeResult, parse_output
from fwlab.probes.reference import ReferenceChain
from fwlab.stats.class_cost import mark_cost, mix_cost

from nft_docs import doc, m

DROP, ACCEPT = {"drop": None}, {"accept": None}
MARK_SET = {"mangle": {"key": {"meta": {"key": "mark"}}, "value": MARK}}
TCP_6000 = m({"payload": {"protocol": "tcp", "field": "dport"}}, 6000)


def _commands(listing: str, **kw):
    rw = nft_commands(listing, **kw)
    return rw, json.loads(rw.document())["nftables"][1:]


def test_nft_drop_and_reject_become_mark_accept_in_place():
    listing = doc(("fwd", "forward", "filter", 0, "accept",
                   [[TCP_6000, {"counter": {"packets": 3, "bytes": 9}}, DROP],
                    [{"reject": {"type": "icmpx", "expr": "admin-prohibited"}}],
                    [m({"meta": {"key": "l4proto"}}, "udp"), ACCEPT]]))
    rw, cmds = _commands(listing)
    assert rw.rules == ["ip t fwd #3", "ip t fwd #4"] and rw.rejects == ["ip t fwd #4"] and not rw.policies
    rules = [c["replace"]["rule"] for c in cmds]
    assert [r["handle"] for r in rules] == [3, 4]  # replaced by handle: the rule ids (and counters) stay
    assert rules[0]["expr"] == [TCP_6000, {"counter": {"packets": 3, "bytes": 9}}, MARK_SET, ACCEPT]
    assert rules[1]["expr"] == [MARK_SET, ACCEPT]
    assert len(cmds) == 2  # the accept rule is left alone


def test_nft_policy_drop_becomes_accept_with_a_final_marking_rule():
    rw, cmds = _commands(doc(("fwd", "forward", "filter", 10, "drop", [[TCP_6000, ACCEPT]])))
    assert rw.policies == ["ip t fwd"] and not rw.rules
    chain = cmds[0]["add"]["chain"]
    assert (chain["policy"], chain["hook"], chain["prio"], chain["type"]) == ("accept", "forward", 10, "filter")
    rule = cmds[1]["add"]["rule"]
    assert rule["chain"] == "fwd" and rule["expr"] == [{"counter": None}, MARK_SET, ACCEPT]
    listing = json.dumps({"nftables": [{"rule": {"family": "ip", "table": "t", "chain": "fwd", "handle": 9,
                                                 "comment": rule["comment"], "expr": rule["expr"]}}]})
    assert policy_rule_ids(listing) == {"policy:ip t fwd": "ip t fwd #9"}


def test_nft_verdict_map_drops_go_to_a_helper_chain_and_other_families_stay():
    vmap = {"vmap": {"key": {"payload": {"protocol": "tcp", "field": "dport"}},
                     "data": {"set": [[22, ACCEPT], [23, DROP]]}}}
    listing = json.loads(doc(("fwd", "forward", "filter", 0, "accept", [[vmap]])))
    listing["nftables"].append({"rule": {"family": "bridge", "table": "b", "chain": "c", "handle": 2, "expr": [DROP]}})
    listing["nftables"].append({"map": {"family": "ip", "table": "t", "name": "v", "type": "inet_service",
                                        "map": "verdict", "elem": [[25, DROP]]}})
    rw, cmds = _commands(json.dumps(listing))
    assert rw.vmap_rules == ["ip t fwd #3"] and not rw.rules
    assert cmds[0]["add"]["chain"]["name"] == HELPER_CHAIN
    assert cmds[1]["add"]["rule"]["expr"] == [MARK_SET, ACCEPT]
    new = cmds[2]["replace"]["rule"]["expr"][0]["vmap"]["data"]["set"]
    assert new == [[22, ACCEPT], [23, {"goto": {"target": HELPER_CHAIN}}]]
    assert any("bridge" in x for x in rw.left) and any("@v" in x for x in rw.left)


def test_nft_calibration_copy_marks_twice():
    _, cmds = _commands(doc(("fwd", "forward", "filter", 0, "accept", [[DROP]])), mark_times=2)
    assert cmds[0]["replace"]["rule"]["expr"] == [MARK_SET, MARK_SET, ACCEPT]


IPT = """*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:logdrop - [0:0]
-A FORWARD -m conntrack --ctstate INVALID -j DROP
-A FORWARD -p tcp -m tcp --dport 80 -j ACCEPT
-A FORWARD -j logdrop
-A logdrop -p udp -j REJECT --reject-with icmp-port-unreachable
-A logdrop -j DROP
COMMIT
*raw
:PREROUTING ACCEPT [0:0]
-A PREROUTING -s 203.0.113.0/24 -j DROP
COMMIT
"""


def test_iptables_rewrite():
    rw = iptables_text(IPT)
    assert rw.rules == ["filter FORWARD #1", "filter logdrop #1", "filter logdrop #2", "raw PREROUTING #1"]
    assert rw.rejects == ["filter logdrop #1"] and rw.policies == ["filter FORWARD"]
    assert rw.policy_rules == {"policy:FORWARD": "filter FORWARD #4"}
    lines = rw.text.splitlines()
    assert ":FORWARD ACCEPT [0:0]" in lines and "-j DROP" not in rw.text and "REJECT" not in rw.text
    assert "-A logdrop -p udp -j FWLAB_DROPMARK" in lines  # the reject's options go with it
    for table in ("*filter", "*raw"):  # each table declares its own chain before the rules jump to it
        sec = lines[lines.index(table):]
        sec = sec[:sec.index("COMMIT")]
        decl = sec.index(f":{XT_CHAIN} - [0:0]")
        assert decl < min(i for i, x in enumerate(sec) if x.startswith("-A"))
        assert sec[-2:] == [f"-A {XT_CHAIN} -j MARK --set-xmark 0x{MARK:x}/0xffffffff", f"-A {XT_CHAIN} -j ACCEPT"]
    # the policy's final rule is the chain's last: after the chain's own rules
    fwd = [x for x in lines if x.startswith("-A FORWARD")]
    assert fwd[-1] == f"-A FORWARD -j {XT_CHAIN}" and len(fwd) == 4
    assert iptables_text(IPT, mark_times=2).text.count("--set-xmark") == 4


def test_a_rule_set_using_the_mark_itself_is_noticed():
    assert uses_mark(f"meta mark set 0x{MARK:x}") and uses_mark(f"-j MARK --set-mark {MARK}")
    assert not uses_mark("meta mark 0x2a accept")


def test_drop_mark_goes_right_after_the_dropping_chain_or_after_the_reference():
    chains = [BaseChain("ipv4", "prerouting", -300, "nft ip t/raw"), BaseChain("ipv4", "forward", 0, "nft ip t/a"),
              BaseChain("ipv4", "forward", 10, "nft ip u/b")]
    p = plan(chains, families=("ipv4",), hooks=None, reference=(ReferenceChain(priority=20).base_chain(),),
             drop_mark=MARK)
    by = {(b.hook, b.role, b.chains): b for b in p.brackets}
    assert by[("prerouting", "chains", ("nft ip t/raw",))].drop_mark == MARK
    assert by[("forward", "chains", ("nft ip t/a",))].drop_mark == MARK  # a later table's chain follows it
    last = by[("forward", "chains", ("nft ip u/b",))]
    assert last.drop_mark is None  # the hook's last chain: the floor drops (the reference still times it)
    floor = next(b for b in p.brackets if b.role == "floor")
    ref = next(b for b in p.brackets if b.role == "reference")
    assert floor.drop_mark == MARK and floor.prio_leave > ref.prio_leave and ref.drop_mark is None
    assert floor.argv().endswith(f":-1:{MARK}") and last.argv().count(":") == 4
    assert all(b.drop_mark is None for b in plan(chains, families=("ipv4",), hooks=None).brackets)


def _timed(b: Bracket, n: int, gap_ns: int, dropped: int = 0) -> BracketResult:
    counts = {hist.bucket_of(gap_ns - 5 + k % 11): 0 for k in range(n)}
    for k in range(n):
        counts[hist.bucket_of(gap_ns - 5 + k % 11)] += 1
    return BracketResult(b, entered=n, timed=n, sum_ns=gap_ns * n, counts=counts, dropped=dropped)


def test_a_marked_copys_class_is_timed_and_its_drops_counted():
    chains = Bracket(0, "ipv4", "forward", 9, 11, "chains", ("nft inet t/fwd",))
    floor = Bracket(1, "ipv4", "forward", 30, 31, "floor", drop_mark=MARK)
    f = class_figures(ProbeResult((_timed(chains, 1000, 300), _timed(floor, 1000, 40, dropped=1000))), "ipv4", 1000)
    assert f["fw_class_missing"] is None and f["fw_class_ns"] == pytest.approx(300, rel=0.03)
    assert f["fw_class_dropped_marked"] == 1000
    plain = class_figures(ProbeResult((_timed(chains, 1000, 300),)), "ipv4", 1000)
    assert plain["fw_class_dropped_marked"] is None


def test_loader_output_carries_the_dropped_count():
    p = plan([BaseChain("ipv4", "forward", 0, "nft ip t/a")], families=("ipv4",), drop_mark=MARK)
    fl = next(b for b in p.brackets if b.role == "floor")
    out = json.dumps({"hold_s": 1.0, "stopped_by": "signal", "brackets": [
        {"id": fl.id, "entered": 5, "left": 5, "sum_ns": 200, "unfinished": 0, "unmatched": 0, "max_ns": 40,
         "hist": [[40, 5]], "drop_mark": MARK, "dropped": 5}]})
    res = parse_output(out + "\n", p)
    assert res.brackets[0].dropped == 5 and res.brackets[0].to_dict()["dropped"] == 5


def trial(ns: float, half: float = 2.0) -> dict:
    return {"fw_class_ns": ns, "fw_class_low_ns": ns - half, "fw_class_high_ns": ns + half, "fw_class_brackets": 1,
            "fw_class_hooks": ["forward"], "fw_ref_p50_ns": None}


def test_mark_statement_cost_from_the_double_mark_copy():
    got = mark_cost([trial(300), trial(310)], [trial(304), trial(313)], None)
    assert got["ns"] == pytest.approx(3.5) and got["low"] == pytest.approx(-1.0) and got["high"] == pytest.approx(8.0)
    assert mark_cost([trial(300)], [{"fw_class_ns": None}], None)["ns"] is None


def test_mix_names_the_classes_timed_to_their_drop_verdict():
    per = {"c0": {"ns_per_packet": {"median": 100, "low": 90, "high": 110}},
           "c1": {"ns_per_packet": {"median": 200, "low": 190, "high": 210},
                  "figure_kind": "time to the drop verdict (timed on a marked copy)"}}
    mix = mix_cost({"c0": 0.75, "c1": 0.25}, per)
    assert mix["weight_covered"] == 1.0 and mix["ns_per_packet"]["median"] == pytest.approx(125)
    assert list(mix["to_drop_verdict"]) == ["c1"] and mix["weight_to_drop_verdict"] == 0.25
    assert "marked copy" in mix["method"]


# -- a new-flow class's packets each on a flow of its own (fwlab.ruleset.flows) ----------------------
def _cls(proto="udp", sport=10000, ct_state="new", direction="original"):
    from types import SimpleNamespace

    from fwlab.rules.imported_model import Packet

    p = Packet(family=4, saddr=0xC6120102, daddr=0xC613010A, l4proto=proto, sport=sport, dport=443, iif="eth0",
               oif="eth1", ct_state=ct_state, ct_direction=direction)
    return SimpleNamespace(packet=p)


def test_source_ports_cycle_around_the_ports_rules_name():
    from fwlab.ruleset.flows import ONE_FLOW, named_source_ports, port_range

    text = 'ip saddr 198.19.1.53 udp sport 53 accept\ntcp sport { 2000-2999, 40000 } drop\n-A X -p udp --sport 6000:6100 -j DROP'
    assert named_source_ports(text) == [(53, 53), (2000, 2999), (40000, 40000), (6000, 6100)]
    (lo, hi), how = port_range(text, _cls(), 20_600)
    assert (lo, hi) == (6101, 39999) and how.startswith("one flow per packet")
    assert port_range(text, _cls(sport=53), 10)[0] is None  # the class's own port is matched: one flow
    assert port_range(text, _cls(), 40_000)[1].startswith(ONE_FLOW)  # no free range that wide
    assert port_range("udp sport @ports accept", _cls(), 10)[0] is None
    assert port_range("", _cls(ct_state="established"), 10)[0] is None
    assert port_range("", _cls(direction="reply"), 10)[0] is None
    assert port_range("", _cls(proto="icmp", sport=0), 10)[0] is None
    assert port_range("", _cls(proto="tcp"), 10)[0] == (1024, 65535)
