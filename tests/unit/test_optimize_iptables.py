"""``fwlab optimize`` on iptables-save input without root: runs of address rules -> ipset matches,
the rewritten file and its ipset file, order kept, what must not merge left alone, and the
equivalence check on derived probes (a hand-broken rewrite caught)."""

import pytest

from fwlab.dut.imported import detect_kind
from fwlab.rules.derive import BedAddresses, derive
from fwlab.rules.iptables_save import check_shape, parse_ipset, parse_iptables_save
from fwlab.rules.optimize import model_differences, union_probes
from fwlab.rules.optimize_iptables import propose_iptables

BED = BedAddresses(client_if="eth0", server_if="eth1", client={4: "198.18.1.2", 6: "2001:2::2"},
                   server={4: "198.19.1.2", 6: "2001:2:0:1::2"}, client_net={4: "198.18.1.0/24", 6: "2001:2::/64"},
                   server_net={4: "198.19.1.0/24", 6: "2001:2:0:1::/64"},
                   dut_own=("198.18.1.1", "198.19.1.1", "2001:2::1", "2001:2:0:1::1"))
HEAD = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"


def linear(n, target="DROP", opt="-s", extra=""):
    return "".join(f"-A FORWARD {opt} 10.9.{i // 100}.{2 * (i % 100) + 1}/32{extra} -j {target}\n" for i in range(n))


def check(original: str, proposal: str, ipset: str, ipver: int = 4):
    a = parse_iptables_save(original, ipver)
    b = parse_iptables_save(proposal, ipver, ipset)
    probes = union_probes(derive(a, BED).classes, derive(b, BED).classes)
    return probes, model_differences(a, b, probes)


def test_linear_list_becomes_one_ipset_rule_and_is_equivalent_on_every_probe():
    text = HEAD + linear(60) + "COMMIT\n"
    p = propose_iptables(text)
    assert (p.rules_before, p.rules_after, len(p.merges)) == (60, 1, 1)
    rules = [l for l in p.text.splitlines() if l.startswith("-A")]
    assert rules == ["-A FORWARD -m set --match-set fwlab1_FORWARD src -j DROP"]
    sets = parse_ipset(p.ipset_text)
    assert sets["fwlab1_FORWARD"][2] == "hash:ip" and len(sets["fwlab1_FORWARD"][1]) == 60
    assert p.ipset_text.startswith("create fwlab1_FORWARD hash:ip family inet ")
    assert detect_kind(p.text) == "iptables"
    check_shape(p.text)
    probes, diffs = check(text, p.text, p.ipset_text)
    assert len(probes) == 61 and diffs == []
    assert "60 rules (numbers 1..60) '-s X -j DROP' -> one rule '-m set --match-set fwlab1_FORWARD src" \
        in p.merges[0].describe()


def test_order_kept_other_matches_kept_comments_dropped_and_prefixes_hash_net():
    text = (HEAD + ":BL - [0:0]\n"
            "-A FORWARD -s 10.9.0.1/32 -m comment --comment \"incident 1\" -j DROP\n"
            "-A FORWARD -s 10.9.0.2/32 -m comment --comment \"incident 2\" -j DROP\n"
            "-A FORWARD -s 10.9.0.1/32 -j ACCEPT\n"  # an accept in between: the runs stay apart
            "-A FORWARD -s 10.9.0.3/32 -j DROP\n"
            "-A FORWARD -s 10.9.0.4/32 -j DROP\n"
            "-A FORWARD -d 198.19.1.0/25 -i eth0 -p tcp -m tcp --dport 22 -j REJECT --reject-with icmp-port-unreachable\n"
            "-A FORWARD -d 198.19.1.128/26 -i eth0 -p tcp -m tcp --dport 22 -j REJECT --reject-with icmp-port-unreachable\n"
            "-A FORWARD -j BL\n"
            "-A BL -s 10.8.0.1/32 -j DROP\n-A BL -s 10.8.0.2/32 -j DROP\nCOMMIT\n")
    p = propose_iptables(text)
    rules = [l for l in p.text.splitlines() if l.startswith("-A")]
    assert rules == [
        "-A FORWARD -m set --match-set fwlab1_FORWARD src -j DROP",
        "-A FORWARD -s 10.9.0.1/32 -j ACCEPT",
        "-A FORWARD -m set --match-set fwlab2_FORWARD src -j DROP",
        "-A FORWARD -m set --match-set fwlab3_FORWARD dst -i eth0 -p tcp -m tcp --dport 22 -j REJECT "
        "--reject-with icmp-port-unreachable",
        "-A FORWARD -j BL",
        "-A BL -m set --match-set fwlab4_BL src -j DROP"]
    assert [m.handles for m in p.merges] == [[1, 2], [4, 5], [6, 7], [1, 2]]
    assert "create fwlab3_FORWARD hash:net family inet" in p.ipset_text and "add fwlab3_FORWARD 198.19.1.0/25" \
        in p.ipset_text
    assert check(text, p.text, p.ipset_text)[1] == []


@pytest.mark.parametrize("body", [
    "-A FORWARD -s 10.9.0.1/32 -j DROP\n-A FORWARD -s 10.9.0.2/32 -j REJECT\n",  # different targets
    "-A FORWARD ! -s 10.9.0.1/32 -j DROP\n-A FORWARD ! -s 10.9.0.2/32 -j DROP\n",  # negated
    "-A FORWARD -s 10.9.0.1/32 -p tcp -j DROP\n-A FORWARD -s 10.9.0.2/32 -p udp -j DROP\n",  # two fields differ
    "-A FORWARD -s 10.9.0.1/32 -m limit --limit 5/sec -j ACCEPT\n"
    "-A FORWARD -s 10.9.0.2/32 -m limit --limit 5/sec -j ACCEPT\n",  # per-rule state
    "-A FORWARD -s 10.9.0.1/32 -j LOG\n-A FORWARD -s 10.9.0.2/32 -j LOG\n",  # not terminal
    "-A FORWARD -s 0.0.0.0/0 -j DROP\n-A FORWARD -s 10.9.0.2/32 -j DROP\n",  # /0 fits no hash:net
])
def test_what_must_not_merge_is_left_alone(body):
    text = HEAD + body + "COMMIT\n"
    p = propose_iptables(text)
    assert p.merges == [] and p.text == text and p.ipset_text == ""
    assert "no run" in p.summary()


def test_other_tables_and_existing_set_names_are_kept():
    text = ("*nat\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -s 10.9.0.1/32 -j ACCEPT\n"
            "-A PREROUTING -s 10.9.0.2/32 -j ACCEPT\nCOMMIT\n" + HEAD + linear(3) + "COMMIT\n")
    p = propose_iptables(text, ipset_text="create fwlab1_FORWARD hash:ip family inet\n")
    assert "-A PREROUTING -s 10.9.0.1/32 -j ACCEPT" in p.text  # nat untouched
    assert p.merges[0].set_name != "fwlab1_FORWARD"


def test_ipv6_runs_use_an_inet6_set():
    text = HEAD + "".join(f"-A FORWARD -s 2001:db8::{i}/128 -j DROP\n" for i in range(1, 5)) + "COMMIT\n"
    p = propose_iptables(text, ipver=6)
    assert "family inet6" in p.ipset_text and "add fwlab1_FORWARD 2001:db8::1" in p.ipset_text
    assert check(text, p.text, p.ipset_text, ipver=6)[1] == []


def test_a_hand_broken_set_is_caught_on_the_model():
    text = HEAD + linear(20) + "COMMIT\n"
    p = propose_iptables(text)
    broken = "\n".join(l for l in p.ipset_text.splitlines() if l != "add fwlab1_FORWARD 10.9.0.7") + "\n"
    probes, diffs = check(text, p.text, broken)
    assert len(diffs) == 1 and "10.9.0.7" in diffs[0].one_line() and "original drop" in diffs[0].one_line()
