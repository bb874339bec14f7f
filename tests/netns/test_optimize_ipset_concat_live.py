"""`fwlab optimize` on the real data path for the two newer rewrites: an iptables-save address
list becomes one ipset match (proposal.iptables + proposal.ipset, loaded by iptables-restore and
ipset restore), and nft (saddr, dport) pairs become one set with a concatenated key; both proven
equivalent on every derived probe (model and data path) with a measured gain; a hand-broken
ipset rewrite is caught."""

import json

import pytest

from fwlab.ruleset.optimize import OptimizeConfig, run_optimize
from fwlab.runners.engine_binary import find_engine
from fwlab.testbed import LocalHost, list_fwl_namespaces

pytestmark = pytest.mark.skipif(find_engine() is None, reason="fwlab-engine is not built")

HEAD = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"


def ipt_linear(n):
    return HEAD + "".join(f"-A FORWARD -s 100.64.{i // 200}.{i % 200 + 1}/32 -j DROP\n" for i in range(n)) + "COMMIT\n"


def test_iptables_list_becomes_an_ipset_match_equivalent_and_measured(tmp_path):
    f = tmp_path / "linear-30.iptables"
    f.write_text(ipt_linear(30))
    before = set(list_fwl_namespaces(LocalHost()))
    res = run_optimize(OptimizeConfig(ruleset=f, repetitions=2, rate_count=3000, classes=2), tmp_path / "out",
                       log=None)
    assert res.verdict == "equivalent", res.summary
    opt = json.loads((res.record / "run.json").read_text())["ruleset_optimize"]
    assert opt["kind"] == "iptables" and (opt["rules_before"], opt["rules_after"]) == (30, 1)
    assert opt["equivalence"]["verdict"] == "equivalent" and opt["equivalence"]["probes"] == 31
    assert all(r["identical"] and r["as_expected"] for r in opt["live"])
    assert {r["original"]["observed"] for r in opt["live"]} == {"passed", "dropped"}
    prop = (res.record / "proposal.iptables").read_text()
    assert "-A FORWARD -m set --match-set fwlab1_FORWARD src -j DROP" in prop
    assert (res.record / "proposal.ipset").read_text().count("add fwlab1_FORWARD ") == 30
    g = opt["gain"]["classes"][0]
    assert (g["traversed_original"], g["traversed_proposal"]) == (30, 1)
    assert g["original_rate_pps"]["n"] == 2 and g["proposal_rate_pps"]["n"] == 2
    assert opt["gain"]["mix"]["gain"]["ratio"] > 0  # measured; never asserted against a machine's speed
    assert set(list_fwl_namespaces(LocalHost())) <= before


def test_a_hand_broken_ipset_rewrite_is_caught(tmp_path):
    f = tmp_path / "linear-8.iptables"
    f.write_text(ipt_linear(8))
    ipset = tmp_path / "given.ipset"
    ipset.write_text("create gone hash:ip family inet\n" + "".join(
        f"add gone 100.64.0.{i}\n" for i in range(1, 9) if i != 5))  # 100.64.0.5 left out
    prop = tmp_path / "proposal.iptables"
    prop.write_text(HEAD + "-A FORWARD -m set --match-set gone src -j DROP\nCOMMIT\n")
    res = run_optimize(OptimizeConfig(ruleset=f, proposal=prop, ipset=ipset, measure_rate=False),
                       tmp_path / "out", log=None)
    assert res.verdict == "different"
    assert "100.64.0.5" in res.first_difference and "original drop" in res.first_difference


PAIRS = "table inet pairs {\n chain forward {\n  type filter hook forward priority filter; policy drop;\n" + "".join(
    f"  ip saddr 198.18.{i // 100 + 2}.{i % 100 + 1} tcp dport {2000 + i} counter accept\n" for i in range(24)) + \
    "  ip saddr 198.18.5.0/24 tcp dport 3000-3010 counter accept\n" \
    "  ip saddr 198.18.9.9 udp dport 53 accept\n }\n}\n"


def test_nft_pairs_become_a_concatenated_set_equivalent_and_measured(tmp_path):
    f = tmp_path / "pairs.nft"
    f.write_text(PAIRS)
    res = run_optimize(OptimizeConfig(ruleset=f, repetitions=2, rate_count=3000, classes=2), tmp_path / "out",
                       log=None)
    assert res.verdict == "equivalent", res.summary
    opt = json.loads((res.record / "run.json").read_text())["ruleset_optimize"]
    assert (opt["rules_before"], opt["rules_after"]) == (26, 2)  # a prefix . range pair among them
    assert opt["rewrite"]["merges"][0]["field"] == "ip saddr . tcp dport"
    assert "ip saddr . tcp dport {" in (res.record / "proposal.nft").read_text()
    assert opt["equivalence"]["verdict"] == "equivalent" and all(r["identical"] for r in opt["live"])
    assert {r["original"]["observed"] for r in opt["live"]} == {"passed", "dropped"}
    assert opt["gain"]["mix"]["gain"]["ratio"] > 0
