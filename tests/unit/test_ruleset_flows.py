"""Opening an established flow as the kernel expects it: the reply from conntrack's reply tuple (after
DNAT from the endpoint, after masquerade to the DUT's address and port), twins that carry their
flow's translation (so it is checked where they arrive), numgen endpoints as each other's
alternatives, and interface names read from Docker's per-bridge vmaps."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from fwlab.rules.derive import BedAddresses, derive
from fwlab.rules.nft_json import parse_nft_json
from fwlab.ruleset.established import Tuple, reply_of, reply_tuple, translation_of, twins
from fwlab.ruleset.interfaces import propose, used_names
from fwlab.ruleset.probe import random_alternatives
from nft_docs import doc, m

G = Path(__file__).resolve().parents[1] / "golden" / "rulesets"
KP = BedAddresses("eth0", "eth1", {4: "198.18.1.1", 6: "2001:2:0:1::1"}, {4: "198.19.1.1", 6: "2001:2:0:2::1"},
                  {4: "198.18.1.0/24", 6: "2001:2:0:1::/64"}, {4: "198.19.1.0/24", 6: "2001:2:0:2::/64"},
                  ("198.18.1.254", "198.19.1.254", "2001:2:0:1::fe", "2001:2:0:2::fe"))


def kube_proxy():
    rs = parse_nft_json((G / "kube-proxy-nftables.nft.json").read_text(),
                        (G / "kube-proxy-nftables.nft.listing").read_text())
    return rs, derive(rs, KP)


#: ``conntrack -L`` after a SYN to svc1's ClusterIP, DNATed to its endpoint and masqueraded fully-random
LISTING = (
    "udp      17 29 src=198.18.1.1 dst=198.19.1.1 sport=10000 dport=5555 [UNREPLIED] src=198.19.1.1 "
    "dst=198.18.1.1 sport=5555 dport=10000 mark=0 use=1\n"
    "tcp      6 119 SYN_SENT src=198.18.1.1 dst=172.30.0.41 sport=10001 dport=80 [UNREPLIED] src=10.180.0.1 "
    "dst=198.19.1.254 sport=80 dport=40123 mark=16384 use=1\n"
    "conntrack v1.4.8 (conntrack-tools): 2 flow entries have been shown.\n")


def test_the_reply_comes_from_the_endpoint_to_the_masqueraded_source():
    rs, d = kube_proxy()
    c8 = next(c for c in d.classes if c.packet.daddr == int(ipaddress.ip_address("172.30.0.41")) and c.dnat)
    est, _ = twins(rs, [c8])
    t = est[0]
    # the twin carries its flow's translation: the run checks it where the packets arrive
    assert t.final["dst"] == "10.180.0.1" and t.final["dport"] == 80 and t.snat == "masquerade"
    assert translation_of(t) == ("10.180.0.1", 80)
    got = reply_tuple(LISTING, t)
    assert got == Tuple("10.180.0.1", "198.19.1.254", 80, 40123)
    r = reply_of(t, got).packet.describe()
    assert (r["src"], r["sport"], r["dst"], r["dport"]) == ("10.180.0.1", 80, "198.19.1.254", 40123)
    assert (r["iif"], r["oif"]) == (t.packet.oif, t.packet.iif)
    # a flow conntrack does not hold (its first packet was dropped): no tuple, the swapped packet
    assert reply_tuple(LISTING.replace("sport=10001", "sport=9"), t) is None
    r0 = reply_of(t).packet
    assert (r0.saddr, r0.daddr) == (t.packet.daddr, t.packet.saddr)


def test_numgen_endpoints_are_each_others_alternatives():
    _, d = kube_proxy()
    alt = random_alternatives(d.classes)
    svc4 = [c for c in d.classes if c.packet.daddr == int(ipaddress.ip_address("172.30.0.44")) and c.dnat]
    assert len(svc4) == 2
    a, b = svc4
    assert [o.class_id for o in alt[a.class_id]] == [b.class_id]
    assert [o.class_id for o in alt[b.class_id]] == [a.class_id]
    # a service with one endpoint (numgen mod 1) has no alternative
    svc1 = next(c for c in d.classes if c.packet.daddr == int(ipaddress.ip_address("172.30.0.41")) and c.dnat)
    assert svc1.class_id not in alt


def test_docker_vmap_names_are_interface_names_and_vmap_is_not():
    text = (G / "docker29-nftables.nft").read_text()
    assert used_names(text, "nft").matched == ["docker0"]
    assert propose(text, "nft").text() == "docker0=client,eth1=server"


def test_the_reply_direction_is_walked_with_the_nat_undone_where_the_kernel_undoes_it():
    from fwlab.rules.imported_model import Packet, evaluate_reply

    ip = lambda a: int(ipaddress.ip_address(a))  # noqa: E731
    saddr = {"payload": {"protocol": "ip", "field": "saddr"}}
    daddr = {"payload": {"protocol": "ip", "field": "daddr"}}
    dport = {"payload": {"protocol": "udp", "field": "dport"}}
    ctdir = {"ct": {"key": "direction"}}
    text = doc(("pre", "prerouting", "nat", -100, "accept",
                 [[m(dport, 53), {"dnat": {"addr": "10.9.9.9", "port": 5353}}]]),
                ("post", "postrouting", "nat", 100, "accept", [[{"snat": {"addr": "198.19.1.254"}}]]),
                # the forward chain sees the reply between the two undos: from the endpoint, to the client
                ("fwd", "forward", "filter", 0, "drop",
                 [[m(ctdir, "reply"), m(saddr, "10.9.9.9"), m(daddr, "198.18.1.1"), {"drop": None}],
                  [m({"ct": {"key": "state"}}, "established"), {"accept": None}],
                  [m(daddr, "10.9.9.9"), {"accept": None}]]))
    rs = parse_nft_json(text)
    first = Packet(4, ip("198.18.1.1"), ip("198.19.1.1"), "udp", 10000, 53, "eth0", "eth1")
    out = evaluate_reply(rs, first)
    assert out.opening.verdict == "accept" and out.opening.snat == "198.19.1.254"
    assert out.verdict == "drop" and out.decided_by == ["ip t fwd #7"]  # the reply-direction rule decides
    # a rule set without that rule accepts it as established, and it leaves as the client expects it
    rs2 = parse_nft_json(text.replace('"reply"', '"original"'))
    ok = evaluate_reply(rs2, first)
    assert ok.verdict == "accept" and ok.decided_by == ["ip t fwd #8"]
    f = ok.final.describe()
    assert (f["src"], f["sport"], f["dst"], f["dport"]) == ("198.19.1.1", 53, "198.18.1.1", 10000)
    assert f["ct_direction"] == "reply" and f["iif"] == "eth1" and f["oif"] == "eth0"
    # the first packet dropped: no flow, no reply
    rs3 = parse_nft_json(text.replace('"addr": "10.9.9.9", "port": 5353', '"addr": "10.9.9.8", "port": 5353'))
    assert evaluate_reply(rs3, first).verdict is None


def test_reply_classes_of_established_flows_and_which_have_a_reference():
    from fwlab.ruleset.established import is_reply, no_reference, original_of, replies

    rs, d = kube_proxy()
    est, _ = twins(rs, d.classes)
    back = replies(rs, est, KP.dut_own)
    assert back and all(is_reply(r) and r.class_id.endswith("er") for r in back)
    c8 = next(r for r in back if r.final["src"] == "172.30.0.41")
    # from the endpoint, leaving as the ClusterIP the client asked for, to the client
    assert c8.packet.describe()["src"] == "10.180.0.1" and c8.final["dst"] == "198.18.1.1"
    assert c8.direction == "s2c" and c8.expected == "accept"
    o = original_of(c8).packet.describe()
    assert (o["src"], o["dst"], o["dport"], o["iif"]) == ("198.18.1.1", "172.30.0.41", 80, "eth0")
    # masqueraded: its replies go to the DUT's address, only conntrack turns them back: no reference
    assert c8.snat == "masquerade" and "no forwarding reference" in no_reference(c8, KP.dut_own)
    plain = next(r for r in back if r.snat is None)
    assert no_reference(plain, KP.dut_own) is None


def test_a_class_addressed_to_the_duts_own_address_has_no_forwarding_reference():
    from fwlab.ruleset.established import no_reference

    rs = parse_nft_json((G / "docker29-nftables.nft.json").read_text(),
                        (G / "docker29-nftables.nft.listing").read_text())
    d = derive(rs, BedAddresses("docker0", "eth1", KP.client, KP.server, KP.client_net, KP.server_net, KP.dut_own))
    pub = [c for c in d.classes if c.dnat and c.packet.describe()["dst"] in KP.dut_own]
    assert pub and all("delivered to the DUT" in no_reference(c, KP.dut_own) for c in pub)
    plain = [c for c in d.classes if c.expected == "accept" and not c.dnat and not c.snat]
    assert plain and all(no_reference(c, KP.dut_own) is None for c in plain)
