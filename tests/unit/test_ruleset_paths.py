"""The packet's whole path through real generators' rule sets (kube-proxy nftables mode, OpenWrt
fw4, Docker 29 nftables, an iptables-save host with raw/mangle/nat, a ClassBench-style ACL):
every hook, NAT, marks, established flows, verdict maps, forks, a class per path.

The rule sets under tests/golden/rulesets/ are written here in each generator's documented shape
and were loaded by the real nft (kernel 6.18) to produce the .nft.json and .nft.listing files
next to them (``unshare --net sh -c 'nft -f F.nft && nft -j list ruleset'``)."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest

from fwlab.rules.classbench import first_matches, generate_classbench
from fwlab.rules.derive import BedAddresses, derive, targets
from fwlab.rules.imported_model import DERIVE_L4, Packet, evaluate
from fwlab.rules.iptables_save import parse_iptables_save
from fwlab.rules.nft_json import parse_nft_json
from nft_docs import doc, m

G = Path(__file__).resolve().parent.parent / "golden" / "rulesets"
DUT_OWN = ("198.18.1.254", "198.19.1.254", "2001:2:0:1::fe", "2001:2:0:2::fe")


def ip(a: str) -> int:
    return int(ipaddress.ip_address(a))


def bed(client_if: str, server_if: str, client_ifs=(), server_ifs=()) -> BedAddresses:
    return BedAddresses(client_if, server_if, {4: "198.18.1.1", 6: "2001:2:0:1::1"},
                        {4: "198.19.1.1", 6: "2001:2:0:2::1"}, {4: "198.18.1.0/24", 6: "2001:2:0:1::/64"},
                        {4: "198.19.1.0/24", 6: "2001:2:0:2::/64"}, DUT_OWN, tuple(client_ifs), tuple(server_ifs))


def nft(name: str):
    return parse_nft_json((G / f"{name}.nft.json").read_text(), (G / f"{name}.nft.listing").read_text())


def local(b: BedAddresses, fam: int = 4) -> frozenset[int]:
    return frozenset(ip(a) for a in b.dut_own if ipaddress.ip_address(a).version == fam)


def verified(rs, b, d) -> None:
    """Every class's packet, walked again, ends where the class says (and at its rule)."""
    for c in d.classes:
        out = evaluate(rs, c.packet, local(b, c.packet.family))
        assert out.verdict == c.expected and c.rule_id in out.decided_by, c.class_id
        assert out.decided_by == c.decided_by and [list(h) for h in out.hooks] == c.hooks
    keys = [(tuple(c.jumps), tuple(c.decided_by), c.packet.family, c.packet.l4proto.startswith("icmp"),
             c.packet.ct_state) for c in d.classes]
    assert len(keys) == len(set(keys))  # identical walks are one class


# -- kube-proxy, nftables mode -------------------------------------------------------------------
KP = bed("eth0", "eth1")


def test_kube_proxy_order_of_hooks_and_the_vmaps_are_read():
    rs = nft("kube-proxy-nftables")
    assert rs.base == ["ip kube-proxy filter-prerouting-pre-dnat", "ip kube-proxy nat-prerouting",
                       "ip kube-proxy filter-forward", "ip kube-proxy nat-postrouting"]
    services = rs.chains["ip kube-proxy services"].rules
    assert len(services) == 9 + 3  # one model rule per element of @service-ips and @service-nodeports
    assert not any(r.unsupported_stmt for ch in rs.chains.values() for r in ch.rules)


def test_kube_proxy_derives_a_class_per_service_path_dnated_to_its_endpoint():
    rs = nft("kube-proxy-nftables")
    d = derive(rs, KP)
    verified(rs, KP, d)
    dnat = {(c.packet.describe()["dst"], c.packet.dport, c.dnat["dst"]) for c in d.classes if c.dnat}
    for vip in ("172.30.0.41", "172.30.0.43", "172.30.0.44", "172.30.0.45", "192.168.99.33", "5.6.7.8"):
        assert any(v == vip and p == 80 for v, p, _ in dnat), vip  # ClusterIP, ExternalIP, LoadBalancer
    for port in (3001, 3002, 3003):  # NodePorts on the node's address
        assert any(v == "192.168.0.2" and p == port for v, p, _ in dnat), port
    # svc4 has two endpoints behind numgen random mod 2: a class for each, naming the fork value
    svc4 = sorted((c.dnat["dst"], c.assumptions[0][-1]) for c in d.classes
                  if c.packet.daddr == ip("172.30.0.44") and c.dnat)
    assert svc4 == [("10.180.0.4", "0"), ("10.180.0.5", "1")]
    assert all(c.expected == "accept" and c.packet.l4proto == "tcp" for c in d.classes if c.dnat)
    # sources outside the pod network are masqueraded on the way out (the 0x4000 mark kube-proxy sets)
    c41 = next(c for c in d.classes if c.packet.daddr == ip("172.30.0.41") and c.dnat)
    assert c41.snat == "masquerade" and c41.final["dst"] == "10.180.0.1"


def test_kube_proxy_rejects_drops_and_source_ranges():
    rs = nft("kube-proxy-nftables")
    d = derive(rs, KP)
    by_dst = {}
    for c in d.classes:
        by_dst.setdefault(c.packet.describe()["dst"], []).append(c)
    # svc6 has no endpoints: rejected in filter-forward through @no-endpoint-services -> reject-chain
    (c6,) = by_dst["172.30.0.46"]
    assert (c6.expected, c6.terminal, c6.rule_id) == ("drop", "reject", "ip kube-proxy reject-chain #58")
    # svc2 (Local policy, no local endpoint): its external addresses are dropped
    assert all(c.expected == "drop" for c in by_dst["1.2.3.4"] if not ipaddress.ip_address(
        c.packet.describe()["src"]) in ipaddress.ip_network("10.0.0.0/8"))
    # svc5's LoadBalancer with source ranges: dropped from outside 203.0.113.0/25, DNATed from inside
    lb = by_dst["5.6.7.8"]
    inside = ipaddress.ip_network("203.0.113.0/25")
    assert {(ipaddress.ip_address(c.packet.describe()["src"]) in inside, c.expected) for c in lb} == \
        {(False, "drop"), (True, "accept")}
    # a ClusterIP port that is not a Service port: rejected; an unallocated ClusterIP: dropped
    assert any(c.terminal == "reject" and "cluster-ips-check" in c.rule_id for c in d.classes)
    assert any(c.terminal == "drop" and "cluster-ips-check" in c.rule_id for c in d.classes)


# -- OpenWrt firewall4 ---------------------------------------------------------------------------
FW4 = bed("br-lan", "pppoe-wan")


def test_fw4_lan_to_wan_wan_to_lan_port_forward_and_established():
    rs = nft("openwrt-fw4")
    d = derive(rs, FW4)
    verified(rs, FW4, d)
    lan_wan = [c for c in d.classes if c.direction == "c2s" and not c.established]
    assert lan_wan and all(c.expected == "accept" for c in lan_wan)
    assert any(c.snat == "masquerade" and c.packet.family == 4 for c in lan_wan)  # srcnat_wan
    wan_lan = [c for c in d.classes if c.direction == "s2c" and not c.dnat and not c.established]
    rejected = {c.rule_id for c in wan_lan if c.expected == "drop"}
    # both handle_reject rules, reached through the shared reject_to_lan chain
    assert rejected == {"inet fw4 handle_reject #43", "inet fw4 handle_reject #44"}
    assert {c.terminal for c in wan_lan if c.expected == "drop"} == {"reject"}
    (fwd,) = [c for c in d.classes if c.dnat]  # the port forward wan:8080 -> 192.168.1.10:80
    assert fwd.direction == "s2c" and fwd.packet.dport == 8080 and fwd.expected == "accept"
    assert fwd.dnat == {"dst": "192.168.1.10", "dport": 80} and "ct status dnat" in fwd.rule_text
    est = [c for c in d.classes if c.established]
    assert est and est[0].rule_id.startswith("inet fw4 forward #") and est[0].expected == "accept"
    assert est[0].opened_by  # the flow's first packet, accepted lan -> wan
    assert any(c.packet.family == 6 for c in d.classes)  # the inet table covers IPv6 too


def test_fw4_mss_clamping_and_limits_are_no_walls():
    rs = nft("openwrt-fw4")
    clamp = rs.chains["inet fw4 mangle_forward"].rules
    assert len(clamp) == 2 and all(not r.decides for r in clamp)  # passed over, never asked
    d = derive(rs, FW4, protocols=DERIVE_L4)
    icmp6 = [c for c in d.classes if c.packet.l4proto == "icmpv6" and "forward_wan" in c.rule_id]
    assert icmp6 and icmp6[0].assumptions and "limit" in icmp6[0].assumptions[0]
    assert any(c.packet.l4proto == "icmp" and c.packet.icmp_type == 8 for c in d.classes)  # echo request


def test_shared_chain_gets_a_class_per_path():
    """accept_to_lan is reached from forward_wan by two jumps (ESP, ISAKMP) and from forward_lan:
    three targets; the ISAKMP path gives its own class, the ESP one cannot be sent (ESP)."""
    rs = nft("openwrt-fw4")
    paths = [t for t in targets(rs)[0] if t.target_id == "inet fw4 accept_to_lan #53"]
    assert len(paths) == 3
    d = derive(rs, FW4)
    isakmp = [c for c in d.classes if c.rule_id == "inet fw4 accept_to_lan #53"]
    assert len(isakmp) == 1 and isakmp[0].packet.dport == 500
    reasons = [n.reason for n in d.not_covered if n.rule_id == "inet fw4 accept_to_lan #53"]
    assert len(reasons) == 2 and all(r.startswith("path via ") for r in reasons)


# -- Docker 29, firewall-backend=nftables -------------------------------------------------------
DOCKER = bed("eth0", "docker0")


def test_docker29_raw_prerouting_drop_is_in_the_model():
    """The false mismatch of issue 31: a packet straight to the container's address is dropped in
    raw-PREROUTING (priority raw), before any forward chain."""
    rs = nft("docker29-nftables")
    p = Packet(4, ip("198.18.1.1"), ip("172.17.0.2"), "tcp", 10000, 80, "eth0", "docker0")
    out = evaluate(rs, p, local(DOCKER))
    assert out.verdict == "drop" and len(out.hooks) == 1
    assert out.hooks[0] == ("ip docker-bridges raw-PREROUTING", "ip docker-bridges raw-PREROUTING #22")
    d = derive(rs, DOCKER)
    verified(rs, DOCKER, d)
    direct = [c for c in d.classes if c.packet.daddr == ip("172.17.0.2")]
    assert direct and all(c.expected == "drop" and c.rule_id.endswith("raw-PREROUTING #22") for c in direct)


def test_docker29_published_port_unpublished_port_and_outgoing():
    rs = nft("docker29-nftables")
    d = derive(rs, DOCKER)
    (pub,) = [c for c in d.classes if c.dnat and not c.established]
    # to the host's own address (fib daddr type local) port 8080 -> the container's port 80
    assert pub.packet.daddr in local(DOCKER) and pub.packet.dport == 8080
    assert pub.dnat == {"dst": "172.17.0.2", "dport": 80} and pub.expected == "accept"
    assert pub.rule_id == "ip docker-bridges filter-forward-in__docker0 #25"  # the forward accept after DNAT
    unpub = [c for c in d.classes if c.rule_id.endswith("filter-forward-in__docker0 #26")]
    assert unpub and all(c.expected == "drop" for c in unpub)  # UNPUBLISHED PORT DROP
    out = [c for c in d.classes if c.direction == "s2c" and not c.established]
    assert out and all(c.expected == "accept" for c in out)
    assert any(c.snat == "masquerade" for c in out)  # from 172.17.0.0/16 out of a non-docker0 interface
    est = [c for c in d.classes if c.established and c.dnat]  # the published flow's later packets
    assert est and est[0].dnat == pub.dnat and est[0].rule_id.endswith("filter-forward-in__docker0 #23")


# -- iptables-save with raw, mangle, nat -------------------------------------------------------
HOST = bed("eth0", "docker0", server_ifs=("virbr0",))


def test_iptables_save_every_table_on_the_path():
    rs = parse_iptables_save((G / "host-docker-libvirt.iptables").read_text())
    assert rs.base == ["raw PREROUTING", "mangle PREROUTING", "nat PREROUTING", "mangle FORWARD", "FORWARD",
                       "mangle POSTROUTING", "nat POSTROUTING"]
    assert rs.notes == []  # nothing of nat/mangle/raw is left out any more
    d = derive(rs, HOST)
    verified(rs, HOST, d)
    by_rule = {}
    for c in d.classes:
        by_rule.setdefault(c.rule_id, []).append(c)
    assert by_rule["raw PREROUTING #1"][0].expected == "drop"
    (pub,) = by_rule["filter DOCKER #1"]
    assert pub.dnat == {"dst": "172.17.0.2", "dport": 80} and pub.packet.dport == 8080
    # mangle PREROUTING marks VXLAN from eth0; filter FORWARD drops the mark: the class carries it
    (vx,) = by_rule["filter FORWARD #2"]
    assert vx.packet.dport == 4789 and vx.expected == "drop" and vx.final.get("mark") == 0x10
    assert any(c.snat == "masquerade" and c.packet.iif == "virbr0" for c in d.classes)  # LIBVIRT_PRT
    assert any(c.snat == "masquerade" and c.packet.iif == "docker0" for c in d.classes)  # docker
    # TCPMSS, CHECKSUM, LOG and the like continue: none of them is a target or a wall
    assert not any("TCPMSS" in n.rule_text or "CHECKSUM" in n.rule_text for n in d.not_covered)


# -- model semantics ---------------------------------------------------------------------------
DPORT = {"payload": {"protocol": "udp", "field": "dport"}}
DADDR = {"payload": {"protocol": "ip", "field": "daddr"}}


def test_dnat_changes_what_forward_sees_and_established_packets_keep_it():
    text = doc(("pre", "prerouting", "nat", -100, "accept",
                [[m(DPORT, 53), {"dnat": {"addr": "10.9.9.9", "port": 5353}}]]),
               ("fwd", "forward", "filter", 0, "drop",
                [[m({"ct": {"key": "state"}}, "established"), {"accept": None}],
                 [m(DADDR, "10.9.9.9"), m(DPORT, 5353), {"accept": None}]]))
    rs = parse_nft_json(text)
    p = Packet(4, ip("198.18.1.1"), ip("198.19.1.1"), "udp", 10000, 53, "eth0", "eth1")
    out = evaluate(rs, p)
    assert out.verdict == "accept" and out.dnat == (ip("10.9.9.9"), 5353) and out.final.dport == 5353
    assert out.final.ct_status == ("dnat",)
    est = evaluate(rs, Packet(4, ip("198.18.1.1"), ip("198.19.1.1"), "udp", 10000, 53, "eth0", "eth1",
                              ct_state="established"))
    assert est.verdict == "accept" and est.dnat == out.dnat and est.opening.verdict == "accept"
    assert "ip t pre" not in [c for c, _ in est.hooks]  # NAT chains see a flow's first packet only


def test_numgen_fork_and_unknown_match_fork_and_local_delivery():
    numgen = {"numgen": {"mode": "random", "mod": 2, "offset": 0}}
    text = doc(("fwd", "forward", "filter", 0, "accept",
                [[{"vmap": {"key": numgen, "data": {"set": [[0, {"accept": None}], [1, {"drop": None}]]}}}]]))
    rs = parse_nft_json(text)
    d = derive(rs, bed("eth0", "eth1"))
    assert sorted((c.expected, c.assumptions[0][-1]) for c in d.classes) == [("accept", "0"), ("drop", "1")]
    # a packet to the DUT's own address is not forwarded
    out = evaluate(rs, Packet(4, ip("198.18.1.1"), ip("198.19.1.254"), "udp", 1, 2, "eth0", "eth1"),
                   frozenset({ip("198.19.1.254")}))
    assert out.verdict == "local"


def test_classes_are_deduplicated_by_walk():
    text = doc(("fwd", "forward", "filter", 0, "accept", [[m(DPORT, 53), {"accept": None}]]))
    d = derive(parse_nft_json(text), bed("eth0", "eth1"))
    # the policy target and the default probe walk the same way: one class
    assert [c.rule_id for c in d.classes].count("policy:ip t fwd") == 1


# -- ClassBench-style ACL ------------------------------------------------------------------------
def test_classbench_acl_every_rule_a_flow_reaches_gets_a_class():
    rs = parse_nft_json((G / "classbench-acl-300.nft.json").read_text())
    b = bed("eth0", "eth1")
    d = derive(rs, b)
    verified(rs, b, d)
    acl = rs.chains["ip fwlab acl"].rules
    reached = {first for first in first_matches(generate_classbench(300, server_addr="198.19.1.1", port=5555))
               if first is not None}
    have = {c.rule_id for c in d.classes} | {x for c in d.classes for x in c.other_targets}
    assert len(reached) > 150  # 197 of 300 are some flow's first match
    missing = [acl[i].rule_id for i in reached if acl[i].rule_id not in have]
    assert missing == []  # every rule the generator's own flows reach first, derivation reaches too
    assert len(d.classes) + len(d.not_covered) >= len(acl)
