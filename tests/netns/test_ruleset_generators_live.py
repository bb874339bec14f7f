"""`fwlab run --ruleset` on the real data path with nft rule sets in the shape their generators write
them (tests/golden/rulesets/: kube-proxy's nftables proxier, Docker 29's nftables backend, OpenWrt
fw4 with its own interface names): a class per Service path DNATed to the bed's server, the raw
prerouting drop that really decides, port forwards, masquerade seen at the far side, established
flows opened as the kernel expects them (the reply from conntrack's reply tuple), and every class's
verdict, counter and translation checked -- no mismatch."""

import ipaddress
import json
from pathlib import Path

import pytest

from fwlab.ruleset.run import RulesetRunConfig, check_outcome, run_ruleset
from fwlab.runners.engine_binary import find_engine

G = Path(__file__).resolve().parents[1] / "golden" / "rulesets"

pytestmark = pytest.mark.skipif(find_engine() is None, reason="fwlab-engine is not built")


def _run(tmp_path, name: str, interfaces: dict[str, str], **kw) -> dict:
    cfg = RulesetRunConfig(ruleset=G / name, interfaces=interfaces, interfaces_given=True, repetitions=1,
                           rate_count=2000, probe_count=20, latency_count=0, measure_rate=False, **kw)
    rec = run_ruleset(cfg, tmp_path, log=None)
    run = json.loads((rec.path / "run.json").read_text())
    imp = run["ruleset_import"]
    bad = [p for p in imp["probes"] if p["status"] != "match"]
    assert not bad, bad
    assert check_outcome(run) == (0, None)
    for p in imp["probes"]:
        assert p["sent"] == 20 and p["arrived"] == (20 if p["expected"] == "accept" else 0), p
    classes = {c["class_id"]: c for c in imp["derivation"]["classes"] + imp["established"]["classes"]}
    assert set(classes) == {p["class_id"] for p in imp["probes"]} | set(imp["not_sent"])
    return {"imp": imp, "classes": classes, "probes": {p["class_id"]: p for p in imp["probes"]}}


def _seen(r: dict, cid: str) -> dict:
    (top,) = r["probes"][cid]["seen_as"]
    return top


def test_kube_proxy_nftables_every_service_path_dnated_to_the_server(tmp_path):
    # its ~40 classes' in-kernel cost took 2/3 of this test's time: the cost step runs on the DNAT,
    # masquerade and established classes of the Docker and OpenWrt cases below and is checked in
    # test_ruleset_kernel_cost_live
    r = _run(tmp_path, "kube-proxy-nftables.nft", {"eth0": "client", "eth1": "server"}, measure_cost=False)
    new = {cid: c for cid, c in r["classes"].items() if c["packet"]["ct_state"] == "new"}
    dnat = {cid: c for cid, c in new.items() if c["dnat"]}
    vips = {(c["packet"]["dst"], c["packet"]["dport"]) for c in dnat.values()}
    for vip in ("172.30.0.41", "172.30.0.42", "172.30.0.43", "172.30.0.44", "172.30.0.45",  # ClusterIPs
                "192.168.99.33", "5.6.7.8"):  # ExternalIP, LoadBalancer (inside its source range)
        assert (vip, 80) in vips, vip
    for port in (3001, 3002, 3003):  # NodePorts
        assert ("192.168.0.2", port) in vips, port
    for cid, c in dnat.items():  # each arrived at its endpoint (or a numgen sibling's), ports translated
        seen = _seen(r, cid)
        assert ipaddress.ip_address(seen["dst"]) in ipaddress.ip_network("10.180.0.0/24") and seen["dport"] == 80
        if c["snat"] == "masquerade":  # the 0x4000 mark: masqueraded on the way out, seen at the server
            assert seen["src"] == "198.19.1.254", seen
    # svc4's two endpoints (numgen random mod 2): a class each
    assert {c["dnat"]["dst"] for c in dnat.values() if c["packet"]["dst"] == "172.30.0.44"} == \
        {"10.180.0.4", "10.180.0.5"}
    # LoadBalancer source range: outside it dropped; svc6 without endpoints rejected (the reject came back)
    assert any(c["packet"]["dst"] == "5.6.7.8" and c["expected"] == "drop" for c in new.values())
    svc6 = [cid for cid, c in new.items() if c["packet"]["dst"] == "172.30.0.46" and c["terminal"] == "reject"]
    assert svc6 and all(r["probes"][cid]["returned_packets"] > 0 for cid in svc6)
    # established flows of the Services: opened through the DNAT, the reply from the endpoint
    est = [cid for cid, c in r["classes"].items() if c["packet"]["ct_state"] == "established" and c["dnat"]]
    assert est
    for cid in est:
        flow = r["probes"][cid]["flow"]
        assert flow["reply"] and flow["reply"]["src"].startswith("10.180.0."), flow
    # their reply direction (server -> client of the client's flow): from the endpoint, de-DNATed on the
    # way back so the client sees the Service's address, every one checked
    back = [cid for cid, c in r["classes"].items() if c["packet"].get("ct_direction") == "reply"]
    assert {cid[:-1] for cid in back} >= set(est)
    for cid in back:
        c = r["classes"][cid]
        seen = _seen(r, cid)
        assert (seen["src"], seen["dst"]) == (c["final"]["src"], c["final"]["dst"]), (cid, seen)
        if c["snat"] == "masquerade":  # addressed to the DUT's masquerade address: checked, not measured
            assert cid in r["imp"]["not_measured"]
    # an echo request class (DERIVE_L4): sent and checked
    assert any(c["packet"]["proto"] == "icmp" for c in r["classes"].values() if c["class_id"] in r["probes"])


def test_docker29_nftables_raw_drop_published_port_no_false_mismatch(tmp_path):
    r = _run(tmp_path, "docker29-nftables.nft", {"docker0": "client", "eth1": "server"})
    by_rule = {}
    for cid, c in r["classes"].items():
        by_rule.setdefault(c["rule_id"], []).append(cid)
    raw = by_rule["ip docker-bridges raw-PREROUTING #22"]  # DROP DIRECT ACCESS decides, in raw prerouting
    assert all(r["probes"][cid]["rule_counter_delta"] == 20 for cid in raw)
    pub = [cid for cid, c in r["classes"].items() if c["dnat"] and c["packet"]["ct_state"] == "new"]
    assert pub
    for cid in pub:
        assert (_seen(r, cid)["dst"], _seen(r, cid)["dport"]) == ("172.17.0.2", 80)
    assert any(c["expected"] == "drop" and c["rule_id"].endswith("filter-forward-in__docker0 #26")
               for c in r["classes"].values())  # UNPUBLISHED PORT DROP
    out = [cid for cid, c in r["classes"].items() if c["snat"] == "masquerade" and c["packet"]["ct_state"] == "new"]
    assert out and all(_seen(r, cid)["src"] == "198.19.1.254" for cid in out)  # containers out, masqueraded
    # the published port's established flow: the reply from the container, its packets accepted
    est = [cid for cid, c in r["classes"].items() if c["dnat"] and c["packet"]["ct_state"] == "established"]
    assert est and all(r["probes"][cid]["flow"]["reply"]["src"] == "172.17.0.2" for cid in est)
    # and its reply direction: the container's answers leave as the published address and port
    for cid in est:
        seen = _seen(r, cid + "r")
        assert (seen["sport"], seen["dst"]) == (8080, "198.19.1.1"), seen


def test_openwrt_fw4_own_names_lan_wan_port_forward_established(tmp_path):
    r = _run(tmp_path, "openwrt-fw4.nft", {"br-lan": "client", "pppoe-wan": "server"})
    cl = r["classes"]
    lan_wan = [cid for cid, c in cl.items() if c["packet"]["iif"] == "br-lan" and c["expected"] == "accept"
               and c["packet"]["ct_state"] == "new" and c["packet"]["ip_version"] == 4 and cid in r["probes"]]
    assert lan_wan and all(_seen(r, cid)["src"] == "198.19.1.254" for cid in lan_wan)  # masqueraded on wan
    rejected = [c for c in cl.values() if c["packet"]["iif"] == "pppoe-wan" and c["terminal"] == "reject"]
    assert rejected  # wan -> lan: handle_reject
    fwd = [cid for cid, c in cl.items() if c["dnat"] and c["packet"]["iif"] == "pppoe-wan"]
    assert fwd and all((_seen(r, cid)["dst"], _seen(r, cid)["dport"]) == ("192.168.1.10", 80) for cid in fwd)
    est = [cid for cid, c in cl.items() if c["packet"]["ct_state"] == "established"
           and c["packet"].get("ct_direction") != "reply"]
    assert est and all(r["probes"][cid]["flow"]["reply"] for cid in est)
    assert all(cid + "r" in r["probes"] for cid in est)  # the replies wan -> lan of lan's flows: accepted
    assert any(c["packet"]["ip_version"] == 6 for cid, c in cl.items() if cid in r["probes"])
