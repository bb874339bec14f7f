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
    # one per rule + the policy + the policy for IPv6 (the inet table covers it; the proposal's classes are among them)
    assert len(probes) == 52
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
    rules = [[m("ip", "saddr", "10.9.0.1"), {"drop": None}], [m("ip", "saddr", "10.9.0.2"), {"reject": None}],
             [m("ip", "daddr", "10.9.0.3"), {"accept": None}],
             [m("ip", "saddr", "10.9.0.4", "!="), {"drop": None}], [m("ip", "saddr", "10.9.0.5", "!="), {"drop": None}],
             [m("ip", "saddr", "@blocked"), {"drop": None}], [m("ip", "saddr", "@other"), {"drop": None}],
             [m("ip", "saddr", "10.9.0.6"), {"limit": {"rate": 10, "per": "second"}}, {"accept": None}],
             [m("ip", "saddr", "10.9.0.7"), {"limit": {"rate": 10, "per": "second"}}, {"accept": None}]]
    p = propose(listing(rules))
    assert p.merges == [] and p.rules_after == p.rules_before == len(rules)
    assert "no run" in p.summary()


def _chain(name, expr_lists, family="inet"):
    return [{"chain": {"family": family, "table": "t", "name": name, "handle": 90}}] + [
        {"rule": {"family": family, "table": "t", "chain": name, "handle": 900 + i, "expr": e}}
        for i, e in enumerate(expr_lists)]


def with_chains(text, *chains):
    doc = json.loads(text)
    for c in chains:
        doc["nftables"] += c
    return json.dumps(doc)


def test_port_dispatch_becomes_a_verdict_map_and_is_equivalent():
    tcp = lambda p: m("tcp", "dport", p)  # noqa: E731
    rules = [[m("ip", "daddr", "198.19.1.10"), tcp(22), {"counter": {"packets": 3, "bytes": 9}},
              {"jump": {"target": "ssh"}}],
             [m("ip", "daddr", "198.19.1.10"), tcp(80), {"counter": {"packets": 3, "bytes": 9}},
              {"jump": {"target": "web"}}],
             [m("ip", "daddr", "198.19.1.10"), tcp({"range": [6000, 6063]}), {"counter": {"packets": 3, "bytes": 9}},
              {"drop": None}],
             [m("ip", "daddr", "198.19.1.10"), tcp(443), {"counter": {"packets": 3, "bytes": 9}}, {"accept": None}]]
    text = with_chains(listing(rules, policy="drop"),
                       _chain("ssh", [[m("ip", "saddr", "198.18.1.0/28"), {"accept": None}]]),
                       _chain("web", [[m("ip", "saddr", "203.0.113.9"), {"drop": None}], [{"accept": None}]]))
    p = propose(text)
    assert [x.verdict for x in p.merges] == ["vmap"] and p.merges[0].values == 4
    (rule,) = [r for r in rules_of(p.doc) if r["chain"] == "fwd"]
    assert rule["expr"][0] == m("ip", "daddr", "198.19.1.10") and rule["expr"][1] == {"counter": {"packets": 0,
                                                                                                    "bytes": 0}}
    vm = rule["expr"][2]["vmap"]
    assert vm["key"] == {"payload": {"protocol": "tcp", "field": "dport"}}
    assert vm["data"]["set"][0] == [22, {"jump": {"target": "ssh"}}]
    assert vm["data"]["set"][2] == [{"range": [6000, 6063]}, {"drop": None}]
    assert "1 into verdict maps" in p.summary() and "vmap {4 elements}" in p.merges[0].describe()
    probes, diffs = check(text, p.doc)
    assert diffs == [] and len(probes) >= 6  # every element, the web chain's drop, the policy


def test_overlapping_values_with_different_verdicts_are_not_a_map():
    rules = [[m("tcp", "dport", {"range": [1, 1000]}), {"accept": None}], [m("tcp", "dport", 80), {"drop": None}]]
    p = propose(listing(rules))
    assert p.merges == []


def test_a_verdict_map_with_a_wrong_element_is_caught_on_the_model():
    rules = [[m("tcp", "dport", 22), {"accept": None}], [m("tcp", "dport", 80), {"drop": None}]]
    text = listing(rules)
    p = propose(text)
    bad = copy.deepcopy(p.doc)
    rules_of(bad)[0]["expr"][-1]["vmap"]["data"]["set"][1][1] = {"accept": None}
    diffs = check(text, bad)[1]
    assert len(diffs) == 1 and ":80" in diffs[0].one_line() and "original drop" in diffs[0].one_line()


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


# -- the run's pure parts: choice of measured probes, the gain, the report, bad input ----------------
def test_pick_measured_takes_deepest_middle_shallowest():
    from fwlab.ruleset.optimize import pick_measured

    text = listing(linear(20))
    a = parse_nft_json(text)
    probes = union_probes(derive(a, BED).classes, [])
    from fwlab.rules.imported_model import evaluate

    depth = {c.class_id: len(evaluate(a, c.packet).traversed) for c in probes}
    got = pick_measured(probes, depth, 3)
    assert [depth[c.class_id] for c in got] == [20, 11, 1]
    assert len(pick_measured(probes[:2], depth, 3)) == 2


def test_gain_has_an_interval_and_the_mix_weights_classes_evenly():
    from fwlab.ruleset.optimize import summarize_gain

    text = listing(linear(4))
    probes = union_probes(derive(parse_nft_json(text), BED).classes, [])[:2]
    trav = {"original": {c.class_id: 4 for c in probes}, "proposal": {c.class_id: 1 for c in probes}}
    rates = {(probes[0].class_id, "original"): [100.0, 110.0], (probes[0].class_id, "proposal"): [300.0, 310.0],
             (probes[1].class_id, "original"): [200.0, 190.0], (probes[1].class_id, "proposal"): [200.0, 210.0]}
    g = summarize_gain(probes, trav, rates)
    c0 = g["classes"][0]["gain"]
    assert c0["ratio"] == pytest.approx(305 / 105) and c0["low"] < c0["ratio"] < c0["high"]
    mix = g["mix"]
    assert mix["original_rate_pps"]["n"] == 2
    assert mix["original_rate_pps"]["min"] == pytest.approx(2 / (1 / 100 + 1 / 200))
    # no difference: the interval spans 1; a single round: no interval, and it says why
    same = summarize_gain(probes[:1], trav, {(probes[0].class_id, "original"): [100.0, 104.0],
                                              (probes[0].class_id, "proposal"): [103.0, 101.0]})
    s = same["classes"][0]["gain"]
    assert s["low"] < 1 < s["high"]
    one = summarize_gain(probes[:1], trav, {(probes[0].class_id, "original"): [100.0],
                                             (probes[0].class_id, "proposal"): [300.0]})
    assert one["classes"][0]["gain"]["low"] is None and "2 repetitions" in one["classes"][0]["gain"]["why"]


def test_report_section_shows_equivalence_and_gain_or_the_withdrawal():
    from fwlab.report.section_ruleset import render

    opt = {"file": "x.nft", "proposal_file": "p.nft", "proposal_source": "fwlab", "rules_before": 50,
           "rules_after": 1, "probes": [{}] * 51, "rewrite": {"merges": [{"text": "inet t fwd: 50 rules merged"}]},
           "equivalence": {"verdict": "equivalent", "probes": 51},
           "gain": {"classes": [{"class_id": "a51", "rule_text": "policy accept", "rule_id": "policy:x",
                                 "expected": "accept", "traversed_original": 50, "traversed_proposal": 1,
                                 "original_rate_pps": {"median": 1e5, "min": 1e5, "max": 1e5, "n": 2},
                                 "proposal_rate_pps": {"median": 2e5, "min": 2e5, "max": 2e5, "n": 2},
                                 "gain": {"ratio": 2.0, "low": 1.8, "high": 2.2}}],
                    "mix": {"classes": ["a51"], "original_rate_pps": {"median": 1e5, "n": 2, "min": 1e5, "max": 1e5},
                            "proposal_rate_pps": {"median": 2e5, "n": 2, "min": 2e5, "max": 2e5},
                            "gain": {"ratio": 2.0, "low": 1.8, "high": 2.2}}, "method": "Fieller"}}
    html = render({"ruleset_optimize": opt}, [])
    assert "Equivalent on all 51" in html and "×2.00" in html and "1.80" in html and "50 → 1" in html
    opt2 = dict(opt, gain=None, equivalence={"verdict": "different", "level": "data path", "differences": 1,
                                             "probes": 51, "first_difference": "probe a30 (...)"})
    html2 = render({"ruleset_optimize": opt2}, [])
    assert "Not equivalent" in html2 and "probe a30" in html2 and "withdrawn" in html2


@pytest.mark.parametrize("args,words", [
    (["--repetitions", "1"], "at least 2 rounds"),
    (["--classes", "0"], "classes must be at least 1"),
])
def test_optimize_bad_arguments(tmp_path, args, words):
    from fwlab.cli import main

    f = tmp_path / "r.nft"
    f.write_text("table inet t { }\n")
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["optimize", str(f), *args]) == 2
    assert words in err.getvalue() and len(err.getvalue().strip().splitlines()) == 1


def test_optimize_refuses_a_proposal_of_the_other_syntax_and_missing_files_before_any_bed(tmp_path):
    from fwlab.ruleset.optimize import OptimizeConfig, run_optimize
    from fwlab.errors import FwlabError

    f = tmp_path / "r.iptables"
    f.write_text("*filter\n:FORWARD DROP [0:0]\n-A FORWARD -s 10.0.0.1 -j DROP\nCOMMIT\n")
    g = tmp_path / "p.nft"
    g.write_text("table inet t { }\n")
    with pytest.raises(FwlabError) as e:
        run_optimize(OptimizeConfig(ruleset=f, proposal=g), tmp_path / "out", log=None)
    assert "p.nft is nft syntax but r.iptables is iptables" in e.value.one_line()
    with pytest.raises(FwlabError) as e:
        run_optimize(OptimizeConfig(ruleset=tmp_path / "nope.nft"), tmp_path / "out", log=None)
    assert "the rule set" in e.value.one_line() and "does not exist" in e.value.one_line()
    with pytest.raises(FwlabError) as e:
        run_optimize(OptimizeConfig(ruleset=f, ipset=tmp_path / "nope.ipset"), tmp_path / "out", log=None)
    assert "the ipset file" in e.value.one_line() and "does not exist" in e.value.one_line()
    assert not (tmp_path / "out").exists()


def test_ruleset_class_trials_are_figures_per_class_and_condition():
    """`fwlab compare` reads optimize (and run --ruleset) records: one figure per class and layout."""
    from fwlab.analysis.figures import trial_figures

    from fwlab.results import trial_record

    def t(cid, layout, v):
        spec = {"trial_id": f"{cid}-{layout}-{v}", "suite": "optimize-x", "mode": "routed", "backend": "imported",
                "class_id": cid, "condition": layout, "repetition": 0, "ip_version": 4, "traffic": "ruleset-class",
                "tool": "fwlab-engine", "size_bytes": 64, "layout": layout, "rules": 0, "stateful_shortcut": False,
                "streams": 1, "rate_bps": None, "duration_s": 1.0}
        return trial_record(spec, kind="ruleset-class", started_utc="2026-11-24T00:00:00Z",
                            metrics={"tx_pps": v, "offered_count": 100, "duration_s": 1.0, "ns_per_packet": 1e9 / v},
                            extra={"class": {"class_id": cid}})

    figs = trial_figures([t("a1", "original", 100.0), t("a1", "original", 110.0), t("a2", "original", 50.0),
                          t("a1", "proposal", 300.0)])
    assert {k: f.values for k, f in figs.items()} == {
        "routed imported original 0r ip4 ruleset-class 64B ruleset-class a1 tx_pps": (100.0, 110.0),
        "routed imported original 0r ip4 ruleset-class 64B ruleset-class a2 tx_pps": (50.0,),
        "routed imported proposal 0r ip4 ruleset-class 64B ruleset-class a1 tx_pps": (300.0,)}
