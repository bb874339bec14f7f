"""The interface map of `fwlab run --ruleset`: several names per side, refusals before anything is
built, the names a rule set uses (iifname/oifname, -i/-o, flowtable and netdev devices, wildcards),
the proposed map and the one line about unmapped names."""

from pathlib import Path

import pytest

from fwlab.errors import SuiteError
from fwlab.ruleset.interfaces import check_name, concrete, covers, parse_map, propose, unmapped, unmapped_line, used_names

SETS = Path(__file__).resolve().parents[1] / "netns" / "rulesets"


def test_several_names_per_side_first_is_primary():
    m = parse_map("br-lan=client,pppoe-wan=server,wan6=server")
    assert m.client == ["br-lan"] and m.server == ["pppoe-wan", "wan6"]
    assert m.primary("server") == "pppoe-wan" and m.extras("server") == ["wan6"]
    assert m.pairs() == [("br-lan", "pppoe-wan"), ("br-lan", "wan6")]
    assert parse_map({"lan0": "client", "wan0": "server"}).as_dict() == {"lan0": "client", "wan0": "server"}


@pytest.mark.parametrize("bad,word", [("lo=client,eth1=server", "loopback"), ("eth0=client", "server side"),
                                      ("eth*=client,eth1=server", "wildcard"), ("eth0=lan,eth1=server", "role"),
                                      ("eth0=client,eth0=server", "twice"), ("", "NAME=ROLE"),
                                      ("a-very-long-name0=client,b=server", "15")])
def test_bad_maps_are_one_line_with_a_fix(bad, word):
    with pytest.raises(SuiteError) as e:
        parse_map(bad)
    assert word in str(e.value) and e.value.fix


def test_names_the_rule_set_uses():
    nft = ('table inet t {\n flowtable ft { hook ingress priority 0; devices = { eth0, "wg0" }; }\n'
           ' chain ing { type filter hook ingress device "eth9" priority 0; }\n'
           ' chain f { type filter hook forward priority 0;\n'
           '  iifname { "br-lan", "veth*" } oifname != "pppoe-wan" accept # iifname "commented"\n'
           '  iif "lan9" drop\n }\n}\n')
    u = used_names(nft, "nft")
    assert u.matched == ["br-lan", "veth*", "pppoe-wan", "lan9"]
    assert u.devices == ["eth0", "wg0", "eth9", "lan9"]  # must exist for the rule set to load
    ipt = "*filter\n-A FORWARD -i docker0 ! -o docker0 -j ACCEPT\n-A FORWARD ! -i eth+ -o br-x -j DROP\nCOMMIT\n"
    assert used_names(ipt, "iptables").matched == ["docker0", "eth+", "br-x"]


def test_wildcards():
    assert covers("veth*", "veth0") and covers("eth+", "eth12") and not covers("eth+", "wlan0")
    assert covers("br-lan", "br-lan") and not covers("br-lan", "br-wan")
    assert concrete("veth*") == "veth0" and concrete("eth+") == "eth0" and concrete("br-lan") == "br-lan"
    assert check_name(concrete("abcdefghijklmno*")) is None  # still within 15 characters


def test_proposal_puts_paired_names_on_opposite_sides():
    m = propose((SETS / "fw4-style.nft").read_text(), "nft")
    assert m.client == ["br-lan"] and set(m.server) == {"pppoe-wan", "wan6"}
    # neither looks like a LAN, but one rule pairs them: opposite sides
    m = propose('table ip t { chain f { type filter hook forward priority 0;\n'
                ' iifname "ens3" oifname "ens4" accept\n } }\n', "nft")
    assert {m.side("ens3"), m.side("ens4")} == {"client", "server"}
    m = propose((SETS / "docker-style.iptables").read_text(), "iptables")
    assert m.client == ["docker0"] and m.server  # a server side even when the file names none
    assert propose("table ip t { chain f { type filter hook forward priority 0; accept; } }", "nft") is None


def test_unmapped_names_in_one_line():
    text = (SETS / "fw4-style.nft").read_text()
    m = parse_map("br-lan=client,pppoe-wan=server")
    loose, make = unmapped(text, "nft", m)
    assert loose == ["wan6"] and make == []
    line = unmapped_line(text, "nft", m)
    assert "\n" not in line and "wan6" in line and "not covered" in line and "--interfaces" in line
    assert unmapped_line(text, "nft", parse_map("br-lan=client,pppoe-wan=server,wan6=server")) is None
    ft = 'table inet t { flowtable f { hook ingress priority 0; devices = { lan1 }; } }\n'
    assert unmapped(ft, "nft", parse_map("eth0=client,eth1=server")) == (["lan1"], ["lan1"])
