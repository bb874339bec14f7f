"""``fwlab optimize`` on nft: runs of rules that differ in two fields together -> one set with a
concatenated key, the model reading such sets (anonymous and named), order kept, overlapping
pairs not merged, and a hand-broken concatenated set caught on the model."""

import copy
import json

from fwlab.rules.derive import derive
from fwlab.rules.nft_json import parse_nft_json
from fwlab.rules.optimize import numbered, propose

from test_optimize import BED, check, listing, m, rules_of


def pairs(n, verdict="accept"):
    """ip saddr A_i tcp dport P_i <verdict>: both fields change from rule to rule."""
    return [[m("ip", "saddr", f"10.9.0.{i + 1}"), m("tcp", "dport", 1000 + i), {"counter": {"packets": 1, "bytes": 1}},
             {verdict: None}] for i in range(n)]


def test_pairs_become_one_concatenated_set_and_are_equivalent():
    text = listing(pairs(30), policy="drop")
    p = propose(text)
    assert (p.rules_before, p.rules_after, len(p.merges)) == (30, 1, 1)
    (rule,) = rules_of(p.doc)
    mt = rule["expr"][0]["match"]
    assert mt["left"] == {"concat": [{"payload": {"protocol": "ip", "field": "saddr"}},
                                     {"payload": {"protocol": "tcp", "field": "dport"}}]}
    assert mt["right"]["set"][0] == {"concat": ["10.9.0.1", 1000]} and len(mt["right"]["set"]) == 30
    assert [next(iter(e)) for e in rule["expr"]] == ["match", "counter", "accept"]
    assert p.merges[0].field == "ip saddr . tcp dport" and "concatenated key" in p.merges[0].describe()
    assert "1 into sets with a concatenated key" in p.summary()
    probes, diffs = check(text, p.doc)
    assert len(probes) >= 31 and diffs == []
    # every pair is its own class in the proposal's model, and crossing the pairs is not accepted
    b = parse_nft_json(numbered(p.doc))
    assert len([c for c in derive(b, BED).classes if c.expected == "accept"]) == 30


def test_a_grid_merges_the_single_field_runs_first_then_the_pairs():
    rules = [[m("ip", "saddr", a), m("tcp", "dport", port), {"drop": None}]
             for a in ("10.9.0.1", "10.9.0.2", "10.9.0.3") for port in (22, 80)]
    rules += [[m("ip", "saddr", "10.9.0.9"), m("tcp", "dport", 443), {"drop": None}]]
    text = listing(rules)
    p = propose(text)
    assert p.rules_after == 1
    elems = rules_of(p.doc)[0]["expr"][0]["match"]["right"]["set"]
    assert len(elems) == 7 and {"concat": ["10.9.0.9", 443]} in elems
    assert check(text, p.doc)[1] == []


def test_order_and_verdicts_are_kept_and_overlaps_end_a_run():
    rules = pairs(3)  # 10.9.0.1 . 1000, 10.9.0.2 . 1001, 10.9.0.3 . 1002 accept
    # overlaps 10.9.0.2 . 1001 (10.9.0.0/24 contains 10.9.0.2): an interval set cannot hold both
    rules.append([m("ip", "saddr", {"prefix": {"addr": "10.9.0.0", "len": 24}}), m("tcp", "dport", 1001),
                  {"accept": None}])
    rules.append([m("ip", "saddr", "10.9.0.1"), m("tcp", "dport", 1000), {"drop": None}])
    rules += [[m("ip", "saddr", "10.9.0.8"), m("tcp", "dport", 3000 + i), {"accept": None}] for i in range(2)]
    text = listing(rules)
    p = propose(text)
    assert [next(iter(r["expr"][-1])) for r in rules_of(p.doc)] == ["accept", "accept", "drop", "accept"]
    assert [len(x.handles) for x in p.merges] == [2, 3]  # the single-field run (dport) first, then the pairs
    assert p.merges[0].field == "tcp dport" and p.merges[1].field == "ip saddr . tcp dport"
    assert check(text, p.doc)[1] == []


def test_prefixes_and_port_ranges_become_interval_elements():
    rules = [[m("ip", "saddr", {"prefix": {"addr": "10.9.1.0", "len": 24}}), m("udp", "dport", {"range": [5000, 5009]}),
              {"drop": None}],
             [m("ip", "saddr", "10.9.2.1"), m("udp", "dport", {"set": [53, 123]}), {"drop": None}]]
    text = listing(rules)
    p = propose(text)
    elems = rules_of(p.doc)[0]["expr"][0]["match"]["right"]["set"]
    assert elems == [{"concat": [{"prefix": {"addr": "10.9.1.0", "len": 24}}, {"range": [5000, 5009]}]},
                     {"concat": ["10.9.2.1", 53]}, {"concat": ["10.9.2.1", 123]}]
    assert check(text, p.doc)[1] == []


def test_a_named_concatenated_set_is_read_by_the_model():
    doc = json.loads(listing([[{"match": {"op": "==", "left": {"concat": [
        {"payload": {"protocol": "ip", "field": "daddr"}}, {"payload": {"protocol": "udp", "field": "dport"}}]},
        "right": "@svc"}}, {"accept": None}]], policy="drop"))
    doc["nftables"].insert(2, {"set": {"family": "inet", "table": "t", "name": "svc", "handle": 9,
                                       "type": ["ipv4_addr", "inet_service"],
                                       "elem": [{"concat": ["198.19.1.5", 53]}, {"concat": ["198.19.1.6", 123]}]}})
    rs = parse_nft_json(json.dumps(doc))
    classes = derive(rs, BED).classes
    acc = sorted((c.packet.describe()["dst"], c.packet.describe()["dport"]) for c in classes if c.expected == "accept")
    assert acc == [("198.19.1.5", 53), ("198.19.1.6", 123)]


def test_a_hand_broken_concatenated_set_is_caught():
    text = listing(pairs(10), policy="drop")
    p = propose(text)
    bad = copy.deepcopy(p.doc)
    elems = rules_of(bad)[0]["expr"][0]["match"]["right"]["set"]
    elems[4] = {"concat": ["10.9.0.5", 1005]}  # the pair crossed: 10.9.0.5 now with 1005, not 1004
    probes, diffs = check(text, bad)
    assert diffs and any("10.9.0.5" in d.one_line() for d in diffs)


# -- the run finder's overlap test: indexed, not pairwise -----------------------------------------------
def _concat_runs_pairwise(rules):
    """_concat_runs as it was (every new pair against every pair of the run: quadratic), the
    reference the indexed one must agree with."""
    from fwlab.rules import optimize as o

    def overlap(p, q):
        return all(x[0] <= y[1] and y[0] <= x[1] for x, y in zip(p, q))
    out, run, idx, pairs_ = [], [], None, []
    for r in rules:
        if run and o._rule_ok(r) and o._rule_ok(run[0]):
            d = o._diff(run[0], r)
            cand = idx if idx is not None else o._concat_pair(run[0], d)
            if cand is not None and d is not None and set(d) <= set(cand) and all(
                    o._mergeable_match(run[0]["expr"][i]) and o._mergeable_match(r["expr"][i])
                    and o._same_left(run[0]["expr"][i], r["expr"][i]) for i in cand) \
                    and o._mergeable_match(r["expr"][cand[0]]) != o._mergeable_match(r["expr"][cand[1]]):
                first = o._pairs(run[0], run[0], cand) if idx is None else pairs_
                new = o._pairs(run[0], r, cand)
                if first is not None and new is not None and not any(overlap(p, q) for p in new for q in first):
                    run.append(r)
                    idx, pairs_ = cand, first + new
                    continue
        if run:
            out.append((run, idx))
        run, idx, pairs_ = [r], None, []
    if run:
        out.append((run, idx))
    return out


def _random_rules(rng, n):
    """Two-field rules with points, prefixes, port ranges and sets, some overlapping, some not."""
    out = []
    for i in range(n):
        a = rng.choice([f"10.0.{rng.randrange(4)}.{rng.randrange(8)}",
                        {"prefix": {"addr": f"10.0.{rng.randrange(4)}.0", "len": rng.choice([24, 30, 29])}},
                        {"set": [f"10.0.1.{rng.randrange(8)}", f"10.0.2.{rng.randrange(8)}"]}])
        p = rng.choice([rng.randrange(1, 40), {"range": sorted([rng.randrange(1, 40), rng.randrange(1, 40)])},
                        {"set": sorted({rng.randrange(1, 40), rng.randrange(1, 40)})}])
        verdict = "accept" if rng.random() < 0.9 else "drop"
        out.append({"handle": i + 2, "expr": [m("ip", "saddr", a), m("tcp", "dport", p),
                                               {"counter": {"packets": 0, "bytes": 0}}, {verdict: None}]})
    return out


def test_concat_runs_indexed_gives_the_pairwise_result():
    import random

    from fwlab.rules.optimize import _concat_runs

    rng = random.Random(7)
    merged_any = split_any = False
    for _ in range(300):
        rules = _random_rules(rng, rng.randrange(1, 14))
        want = _concat_runs_pairwise(rules)
        got = _concat_runs(rules)
        assert [([r["handle"] for r in run], idx) for run, idx in got] == \
               [([r["handle"] for r in run], idx) for run, idx in want]
        merged_any |= any(len(run) > 1 for run, _ in got)
        split_any |= len(got) > 1
    assert merged_any and split_any  # the cases exercise both outcomes


def test_concat_runs_takes_ten_thousand_rules():
    """10k distinct (address, port) rules -> one run (55 s before the index; no timing asserted);
    one overlapping pair in the middle splits it there, as the pairwise test did."""
    from fwlab.rules.optimize import _concat_runs

    def rule(i, port):
        return {"handle": i + 2, "expr": [m("ip", "saddr", f"10.{i // 65536}.{i // 256 % 256}.{i % 256}"),
                                          m("tcp", "dport", port), {"accept": None}]}
    rules = [rule(i, 1000 + i % 50000) for i in range(10_000)]
    (run, idx), = _concat_runs(rules)
    assert len(run) == 10_000 and idx == (0, 1)
    rules[6000] = {**rules[6000], "expr": [m("ip", "saddr", {"prefix": {"addr": "10.0.0.0", "len": 16}}),
                                           m("tcp", "dport", {"range": [1000, 1100]}), {"accept": None}]}
    got = _concat_runs(rules)
    assert [len(r) for r, _ in got] == [6000, 4000]
    small = rules[5990:6010]
    assert [([r["handle"] for r in run], i) for run, i in _concat_runs(small)] == \
           [([r["handle"] for r in run], i) for run, i in _concat_runs_pairwise(small)]


def test_a_merge_says_its_kind():
    """The kind of a merge is a field (set | concat | vmap), not read back from its text."""
    from fwlab.rules.optimize import Merge

    assert [x.kind for x in propose(listing(pairs(5), policy="drop")).merges] == ["concat"]
    assert [x.kind for x in propose(listing([[m("tcp", "dport", 80 + i), {"accept": None}] for i in range(4)],
                                            policy="drop")).merges] == ["set"]
    odd = Merge(chain="inet t fwd", handles=[2, 3], field="meta mark . x", verdict="accept", values=2)
    assert odd.kind == "set" and "concatenated" not in odd.describe()
    assert propose(listing(pairs(3))).to_dict()["merges"][0]["kind"] == "concat"
