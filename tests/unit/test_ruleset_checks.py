"""The honest parts of `fwlab run --ruleset` that need no kernel: counting only the probe's own
packets, the exit status, leaving failed classes out of the mix, each class's own reference."""

import json

import pytest

from fwlab.rules.derive import TrafficClass
from fwlab.rules.imported_model import Packet
from fwlab.ruleset.arrivals import by_link, parse_listing, probe_packets, seen_as, table_text
from fwlab.ruleset.costs import reference_of
from fwlab.ruleset.run import (check_outcome, conditions, leave_out, measured_in, rate_key,
                               summarize_costs)
from fwlab.ruleset.mix import summarize_mix

LISTING = {"nftables": [
    {"metainfo": {"version": "1.0.6"}},
    {"set": {"family": "inet", "name": "seen4", "table": "fwlab_arrivals", "elem": [
        {"elem": {"val": {"concat": ["10.9.0.1", "198.18.1.2", "tcp", 10000, 80]}, "counter": {"packets": 38}}},
        {"elem": {"val": {"concat": ["10.9.0.1", "198.18.1.9", "tcp", 10000, 8080]}, "counter": {"packets": 2}}},
        {"elem": {"val": {"concat": ["10.9.0.1", "198.18.1.2", "udp", 10000, 53]}, "counter": {"packets": 5}}}]}},
    {"set": {"family": "inet", "name": "icmp4", "table": "fwlab_arrivals", "elem": [
        {"elem": {"val": {"concat": ["198.18.0.1", "10.9.0.1", "destination-unreachable"]},
                  "counter": {"packets": 3}}}]}},
    {"set": {"family": "inet", "name": "links", "table": "fwlab_arrivals", "elem": [
        {"elem": {"val": {"concat": ["s0", "tcp"]}, "counter": {"packets": 38}}},
        {"elem": {"val": {"concat": ["s1", "tcp"]}, "counter": {"packets": 2}}}]}},
    {"set": {"family": "inet", "name": "seen6", "table": "fwlab_arrivals"}}]}


def test_arrivals_count_the_probes_protocol_only():
    got = parse_listing(json.dumps(LISTING))
    assert probe_packets(got, "tcp") == 40 and probe_packets(got, "udp") == 5 and probe_packets(got, "icmp") == 3
    seen = seen_as(got, "tcp")
    assert [s["dst"] for s in seen] == ["198.18.1.2", "198.18.1.9"]  # most packets first: a DNAT shows here
    assert by_link(got, "tcp") == {"s0": 38, "s1": 2} and by_link(got, "udp") == {}
    # ARP, neighbour discovery and MLD never reach the set: only tcp, udp and icmp echo/unreachable
    text = table_text()
    assert "meta l4proto { tcp, udp }" in text and "echo-request" in text and "nd-" not in text


def _c(cid: str, expected: str) -> TrafficClass:
    return TrafficClass(class_id=cid, rule_id=f"inet t f #{cid[1:]}", rule_text="", path=[], expected=expected,
                        terminal=expected, packet=Packet(4, 1, 2, "udp", 10000, 5555, "eth0", "eth1"),
                        direction="c2s", traversed_rules=1)


def test_each_class_against_its_own_reference():
    a, d = _c("c1", "accept"), _c("c2", "drop")
    assert conditions([a, d]) == ["rules", "reference", "drop-reference"]
    assert conditions([a]) == ["rules", "reference"] and conditions([d]) == ["rules", "drop-reference"]
    assert measured_in([a, d], "rules") == [a, d]
    assert measured_in([a, d], "reference") == [a] and measured_in([a, d], "drop-reference") == [d]
    assert rate_key("drop-reference") == "reference" and reference_of(d) == "drop-reference"
    # a drop that costs more than the bare drop reference costs more than 0, whatever forwarding costs
    rates = {("c1", "rules"): [200e3], ("c1", "reference"): [400e3],
             ("c2", "rules"): [500e3], ("c2", "reference"): [900e3]}
    costs = {c["class_id"]: c for c in summarize_costs([a, d], rates)}
    assert costs["c2"]["reference"] == "drop-reference" and costs["c2"]["cost_ns_per_packet"]["median"] > 0
    assert costs["c1"]["reference"] == "reference"


def test_failed_classes_leave_the_mix():
    mix = {"weights": {"c1": 0.5, "c2": 0.25, "c3": 0.25}}
    out = leave_out(mix, {"c2": "check mismatch: the rule set says accept, the probes were dropped"})
    assert out["weights"] == {"c1": 2 / 3, "c2": 0.0, "c3": 1 / 3} and out["weight_left_out"] == 0.25
    assert list(out["left_out"]) == ["c2"]
    rates = {("c1", "rules"): [1e5], ("c3", "rules"): [1e5], ("c1", "reference"): [2e5], ("c3", "reference"): [2e5]}
    assert summarize_mix(out["weights"], rates, 1)["rate_pps"]["median"] == pytest.approx(1e5)  # c2 has no rate and no weight
    assert leave_out({"weights": {"c1": 1.0}}, {"c1": "x"})["weights"] == {"c1": 0.0}


def test_exit_status():
    ok = {"ruleset_import": {"file": "f.nft", "derivation": {"classes": [{}], "not_covered": []},
                             "probes": [{"class_id": "c1", "status": "match", "why": ""}]}}
    assert check_outcome(ok) == (0, None)
    bad = {"ruleset_import": {**ok["ruleset_import"], "probes": [
        {"class_id": "c1", "status": "mismatch", "why": "the rule set says accept, the probes were dropped"}]}}
    code, why = check_outcome(bad)
    assert code == 1 and "c1 mismatch" in why and "left out" in why
    none = {"ruleset_import": {"file": "f.nft", "derivation": {"classes": [], "not_covered": [{}, {}]}}}
    code, why = check_outcome(none)
    assert code == 1 and "no traffic class" in why and "2 rules not covered" in why


def test_established_twins():
    from fwlab.rules.imported_model import Chain, ImportedRuleSet, Match, Rule
    from fwlab.ruleset.established import reply_of, twins

    est = Match("ct_state", "ct state established,related", names=("established", "related"))
    dns = Match("sport", "udp sport 53", intervals=((53, 53),), requires=(("l4proto", "udp"),))
    rs = ImportedRuleSet("nft", {"inet t f": Chain("inet t f", [
        Rule("inet t f #1", "inet t f", "ct state established,related accept", [est], "accept"),
        Rule("inet t f #2", "inet t f", "udp sport 53 accept", [dns], "accept"),
        Rule("inet t f #3", "inet t f", "udp dport 5555 accept",
             [Match("dport", "udp dport 5555", intervals=((5555, 5555),), requires=(("l4proto", "udp"),))], "accept")],
        policy="drop", family="inet")}, ["inet t f"])
    new = [TrafficClass("c1", "inet t f #3", "", [], "accept", "accept",
                        Packet(4, 1, 2, "udp", 10000, 5555, "eth0", "eth1"), "c2s", 3),
           TrafficClass("c2", "inet t f #2", "", [], "accept", "accept",
                        Packet(4, 2, 1, "udp", 53, 7000, "eth1", "eth0"), "s2c", 2),
           _c("c3", "drop")]
    out, why = twins(rs, new)
    assert [t.class_id for t in out] == ["c1e", "c2e"]
    t1, t2 = out
    assert t1.packet.ct_state == "established" and t1.packet.sport == 10001 and t1.rule_id == "inet t f #1"
    assert t2.packet.sport == 53 and t2.packet.dport == 7001  # its source port decides: the other port moves
    assert "never established" in why["c3"]
    r = reply_of(t1)
    assert (r.packet.saddr, r.packet.daddr, r.packet.sport, r.packet.dport) == (2, 1, 5555, 10001)
    assert (r.packet.iif, r.packet.oif, r.direction) == ("eth1", "eth0", "s2c")
    # a rule set that tracks no connection: no twin, and why
    plain = ImportedRuleSet("nft", {"inet t f": Chain("inet t f", [], policy="accept", family="inet")}, ["inet t f"])
    assert twins(plain, new[:1])[0] == [] and "no conntrack state" in twins(plain, new[:1])[1]["c1"]


def test_what_the_engine_sends_for_a_class():
    from dataclasses import replace

    from fwlab.ruleset.probe import SERVER_ISN, engine_proto, unsendable

    c = _c("c1", "accept")
    assert engine_proto(c) == "udp" and unsendable(c) is None
    tcp = replace(c, packet=replace(c.packet, l4proto="tcp"))
    assert engine_proto(tcp) == "tcp-syn"
    est = replace(tcp, packet=replace(tcp.packet, ct_state="established"))
    assert engine_proto(est) == f"tcp-ack:1:{SERVER_ISN + 1}"  # inside the window its handshake opened
    icmp = replace(c, packet=replace(c.packet, l4proto="icmpv6"))
    assert engine_proto(icmp) == "icmp-echo" and unsendable(icmp) is None
    assert "echo reply" in unsendable(replace(icmp, packet=replace(icmp.packet, ct_state="established")))
    assert "sctp" in unsendable(replace(c, packet=replace(c.packet, l4proto="sctp")))


def test_translation_is_checked_at_the_far_side():
    from dataclasses import replace

    from fwlab.ruleset.probe import check_translation

    c = _c("c1", "accept")
    seen = [{"src": "198.18.1.1", "dst": "198.19.1.1", "dport": 80, "proto": "udp", "packets": 20}]
    assert check_translation(c, seen) is None  # no translation known: nothing to check
    dnat = replace(c)
    dnat.final = {"src": "198.18.1.1", "dst": "198.19.1.1", "dport": 80}
    assert check_translation(dnat, seen) is None
    dnat.final = {"src": "198.18.1.1", "dst": "198.19.1.9", "dport": 80}
    assert "198.19.1.9" in check_translation(dnat, seen)
    masq = replace(c)
    masq.final, masq.snat = {"src": None, "dst": "198.19.1.1"}, "masquerade"
    assert check_translation(masq, [{**seen[0], "src": "198.19.0.1"}], ("198.19.0.1",)) is None
