"""`fwlab optimize`'s rewrite and its model-level equivalence check: runs of consecutive rules
differing in one value become one set rule, nothing is reordered or merged across a rule in
between, and a hand-made non-equivalent rewrite is caught on the derived probes."""

import copy
import json

import pytest

from fwlab.errors import BackendError
from fwlab.rules.derive import BedAddresses, derive
from fwlab.rules.nft_json import parse_nft_json
from fwlab.rules.optimize import model_differences, numbered, propose, union_probes

BED = BedAddresses(client_if="eth0", server_if="eth1", client={4: "198.18.1.2", 6: "2001:2::2"},
                   server={4: "198.19.1.2", 6: "2001:2:0:1::2"}, client_net={4: "198.18.1.0/24", 6: "2001:2::/64"},
                   server_net={4: "198.19.1.0/24", 6: "2001:2:0:1::/64"},
                   dut_own=("198.18.1.1", "198.19.1.1", "2001:2::1", "2001:2:0:1::1"))


def m(proto, fld, right, op="=="):
    return {"match": {"op": op, "left": {"payload": {"protocol": proto, "field": fld}}, "right": right}}


def listing(rules, policy="accept", family="inet"):
    """An `nft -j list ruleset` document: one table, one forward chain, ``rules`` = expr lists."""
    items = [{"metainfo": {"version": "1.0.6", "json_schema_version": 1}},
             {"table": {"family": family, "name": "t", "handle": 1}},
             {"chain": {"family": family, "table": "t", "name": "fwd", "handle": 1, "type": "filter",
                        "hook": "forward", "prio": 0, "policy": policy}}]
    for i, expr in enumerate(rules):
        items.append({"rule": {"family": family, "table": "t", "chain": "fwd", "handle": i + 2, "expr": expr}})
    return json.dumps({"nftables": items})


def linear(n, verdict="drop"):
    return [[m("ip", "saddr", f"10.9.{i // 100}.{2 * (i % 100) + 1}"), {"counter": {"packets": i, "bytes": 9}},
             {verdict: None}] for i in range(n)]


def rules_of(doc):
    return [it["rule"] for it in doc["nftables"] if "rule" in it]


def check(original_json, proposal_doc):
    a = parse_nft_json(original_json)
    b = parse_nft_json(numbered(proposal_doc))
    probes = union_probes(derive(a, BED).classes, derive(b, BED).classes)
    return probes, model_differences(a, b, probes)


def test_linear_list_becomes_one_set_rule_and_is_equivalent_on_every_probe():
    text = listing(linear(50))
    p = propose(text)
    assert (p.rules_before, p.rules_after, len(p.merges)) == (50, 1, 1)
    (rule,) = rules_of(p.doc)
    assert "handle" not in rule
    right = rule["expr"][0]["match"]["right"]
    assert len(right["set"]) == 50 and right["set"][0] == "10.9.0.1"
    assert rule["expr"][1] == {"counter": {"packets": 0, "bytes": 0}}
    assert p.merges[0].field == "ip saddr" and p.merges[0].verdict == "drop"
    assert "50 rules -> 1 rules" in p.summary()
    assert not any("metainfo" in it for it in p.doc["nftables"])
    probes, diffs = check(text, p.doc)
    assert len(probes) == 51  # one per rule + the policy (the proposal's classes are among them)
    assert diffs == []


def test_a_rule_in_between_breaks_the_run_and_order_is_kept():
    rules = linear(4) + [[m("tcp", "dport", 22), {"accept": None}]] + linear(3)
    rules[5][0] = m("ip", "saddr", "10.9.0.1")  # the same address as rule 0, after the accept
    text = listing(rules)
    p = propose(text)
    assert p.rules_after == 3 and [len(x.handles) for x in p.merges] == [4, 3]
    assert [next(iter(r["expr"][-1])) for r in rules_of(p.doc)] == ["drop", "accept", "drop"]
    assert check(text, p.doc)[1] == []


def test_different_verdicts_negations_named_sets_and_other_fields_are_not_merged():
    rules = [[m("ip", "saddr", "10.9.0.1"), {"drop": None}], [m("ip", "saddr", "10.9.0.2"), {"accept": None}],
             [m("ip", "daddr", "10.9.0.3"), {"accept": None}],
             [m("ip", "saddr", "10.9.0.4", "!="), {"drop": None}], [m("ip", "saddr", "10.9.0.5", "!="), {"drop": None}],
             [m("ip", "saddr", "@blocked"), {"drop": None}], [m("ip", "saddr", "@other"), {"drop": None}],
             [m("ip", "saddr", "10.9.0.6"), {"limit": {"rate": 10, "per": "second"}}, {"accept": None}],
             [m("ip", "saddr", "10.9.0.7"), {"limit": {"rate": 10, "per": "second"}}, {"accept": None}]]
    p = propose(listing(rules))
    assert p.merges == [] and p.rules_after == p.rules_before == len(rules)
    assert "no run" in p.summary()


def test_overlapping_and_ranged_values_become_disjoint_elements():
    rules = [[m("ip", "saddr", {"prefix": {"addr": "10.9.0.0", "len": 24}}), {"drop": None}],
             [m("ip", "saddr", "10.9.0.7"), {"drop": None}],
             [m("ip", "saddr", {"range": ["10.9.1.1", "10.9.1.9"]}), {"drop": None}],
             [m("tcp", "dport", 80), {"accept": None}], [m("tcp", "dport", {"range": [81, 90]}), {"accept": None}],
             [m("tcp", "dport", {"set": [443, 8443]}), {"accept": None}]]
    text = listing(rules, policy="drop")
    p = propose(text)
    r1, r2 = rules_of(p.doc)
    assert r1["expr"][0]["match"]["right"] == {"set": [{"prefix": {"addr": "10.9.0.0", "len": 24}},
                                                       {"range": ["10.9.1.1", "10.9.1.9"]}]}
    assert r2["expr"][0]["match"]["right"] == {"set": [{"range": [80, 90]}, 443, 8443]}
    assert check(text, p.doc)[1] == []


def test_a_hand_made_non_equivalent_rewrite_is_caught_on_the_model():
    """The set form with one address left out: the probe of the dropped rule is accepted."""
    text = listing(linear(50))
    p = propose(text)
    bad = copy.deepcopy(p.doc)
    rules_of(bad)[0]["expr"][0]["match"]["right"]["set"].remove("10.9.0.31")
    probes, diffs = check(text, bad)
    assert len(diffs) == 1
    line = diffs[0].one_line()
    assert "10.9.0.31" in line and "original drop" in line and "proposal accept" in line
    assert "\n" not in line


def test_a_rewrite_that_turns_drop_into_reject_is_caught():
    text = listing(linear(5))
    p = propose(text)
    bad = copy.deepcopy(p.doc)
    rules_of(bad)[0]["expr"][-1] = {"reject": None}
    diffs = check(text, bad)[1]
    assert len(diffs) == 5 and "proposal drop (reject)" in diffs[0].one_line()


def test_a_probe_the_model_cannot_decide_is_not_called_equivalent():
    text = listing(linear(3))
    p = propose(text)
    bad = copy.deepcopy(p.doc)
    bad["nftables"].insert(3, {"rule": {"family": "inet", "table": "t", "chain": "fwd", "expr": [
        {"match": {"op": "==", "left": {"meta": {"key": "skuid"}}, "right": 0}}, {"accept": None}]}})
    diffs = check(text, bad)[1]
    assert diffs and all("?" in d.proposal for d in diffs)


def test_garbage_listing_is_one_line():
    with pytest.raises(BackendError) as e:
        propose("not json")
    assert "\n" not in e.value.one_line()
