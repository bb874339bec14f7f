import ipaddress

import pytest

from fwlab.dut import get_backend
from fwlab.errors import SuiteError
from fwlab.rules import generate


def test_generator_is_deterministic_and_distinct():
    a = generate(1000, "linear", seed=7)
    b = generate(1000, "linear", seed=7)
    c = generate(1000, "linear", seed=8)
    assert a.entries == b.entries
    assert a.entries != c.entries
    assert len({e.src for e in a.entries}) == 1000


@pytest.mark.parametrize("v", [4, 6])
def test_deny_entries_never_match_test_subnets(v):
    nets = {4: ["198.18.1.0/24", "198.19.1.0/24"], 6: ["2001:2:0:1::/64", "2001:2:0:2::/64"]}[v]
    rs = generate(5000, "set", ip_version=v, seed=3)
    for e in rs.entries:
        addr = ipaddress.ip_address(e.src)
        assert addr.version == v
        assert all(addr not in ipaddress.ip_network(n) for n in nets)
        assert e.proto in ("tcp", "udp") and 1024 <= e.dport <= 65535
    bench = ipaddress.ip_network("198.18.0.0/15" if v == 4 else "2001:2::/48")
    assert all(ipaddress.ip_address(e.src) in bench for e in rs.entries)


def test_bad_input_is_a_suite_error():
    with pytest.raises(SuiteError):
        generate(-1)
    with pytest.raises(SuiteError):
        generate(10, "tree")


def test_nftables_linear_puts_permit_last_and_policy_drop():
    rs = generate(3, "linear")
    text = get_backend("nftables").render(rs, "routed")
    lines = [l.strip() for l in text.splitlines()]
    assert lines[0] == "flush ruleset"
    assert "table ip fwlab {" in lines
    assert "policy drop;" in text
    deny = [l for l in lines if 'comment "deny-' in l]
    assert len(deny) == 3
    order = [i for i, l in enumerate(lines) if "deny-" in l or "permit-" in l]
    assert "permit-fwd" in lines[order[-2]] and "permit-rev" in lines[order[-1]]
    assert "ct state" not in text


def test_nftables_set_and_shortcut_and_bridge():
    rs = generate(4, "set", stateful_shortcut=True)
    text = get_backend("nftables").render(rs, "routed")
    assert "set deny {" in text and "ipv4_addr . inet_proto . inet_service" in text
    assert text.count(" . ") >= 8
    chain = text[text.index("chain forward"):]
    assert chain.index("ct state established,related") < chain.index("@deny")
    stateless = get_backend("nftables").render(generate(2, "linear"), "bridge")
    assert "table bridge fwlab" in stateless and "ether type arp" in stateless
    # the stateful variant in bridge mode uses ip rules seen through br_netfilter
    sf = generate(2, "linear", stateful_shortcut=True)
    assert "table ip fwlab" in get_backend("nftables").render(sf, "bridge")
    assert get_backend("nftables").bridge_nf_call("bridge", sf) is True
    assert get_backend("nftables").bridge_nf_call("bridge", generate(2)) is False


def test_nftables_table_family_follows_the_ip_version():
    """ip/ip6 tables, not inet: an inet table checks the family in every rule (4x the per-rule cost)."""
    be = get_backend("nftables")
    v6 = generate(2, "linear", ip_version=6, client_net="2001:2:0:1::/64", server_net="2001:2:0:2::/64")
    assert "table ip6 fwlab {" in be.render(v6, "routed")
    assert be.family(v6, "routed") == "nft ip6" and be.family(generate(2), "routed") == "nft ip"
    assert "table bridge fwlab {" in be.render(v6, "bridge")


def test_nftables_ipv6_allows_neighbour_discovery():
    rs = generate(2, "linear", ip_version=6, client_net="2001:2:0:1::/64", server_net="2001:2:0:2::/64")
    text = get_backend("nftables").render(rs, "routed")
    assert "icmpv6 type" in text and "ip6 saddr 2001:2:0:1::/64" in text


@pytest.mark.parametrize("name", ["iptables-legacy", "iptables-nft"])
def test_iptables_restore_format(name):
    rs = generate(5, "linear", stateful_shortcut=True)
    text = get_backend(name).render(rs, "routed")
    lines = text.splitlines()
    assert lines[0] == "*filter" and lines[-1] == "COMMIT"
    assert ":FORWARD DROP [0:0]" in lines
    assert "--ctstate RELATED,ESTABLISHED" in lines[4]
    assert sum("--comment deny-" in l for l in lines) == 5
    assert "permit-rev" in lines[-3]


def test_ipset_has_one_set_match():
    rs = generate(100, "set")
    text = get_backend("ipset").render(rs, "routed")
    assert text.startswith("create fwl-deny hash:ip,port family inet")
    assert text.count("\nadd fwl-deny ") == 100
    assert text.count("--match-set fwl-deny src,dst") == 1


def test_unsupported_layouts_say_why():
    assert get_backend("ipset").unsupported("linear", "routed", False)
    assert get_backend("iptables-legacy").unsupported("set", "routed", False)
    assert get_backend("nftables").unsupported("set", "bridge", True) is None
