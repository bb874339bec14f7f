"""Imported rule sets without root: parsers, the forward-path model, class derivation on the
shipped examples, the verdict check and the run's configuration."""

from pathlib import Path

import pytest

from fwlab.dut.imported import (ImportedFirewall, detect_ip_version, detect_kind, kernel_message, missing_feature,
                                 nfacct_names, refusal_lines)
from fwlab.errors import BackendError, SuiteError
from fwlab.rules.derive import BedAddresses, derive
from fwlab.rules.imported_model import DERIVE_L4, Packet, addr_interval, evaluate, intersect, subtract
from fwlab.rules.iptables_save import parse_iptables_save, parse_ipset
from fwlab.rules.nft_json import parse_nft_json
from fwlab.ruleset.probe import check_class, observed_verdict, parse_interfaces
from fwlab.ruleset.config import config_from_suite_file
from fwlab.ruleset.costs import summarize_costs
from fwlab.testbed.host import CommandFailed

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples"
DATA = Path(__file__).resolve().parent / "data"
BED = BedAddresses("eth0", "eth1", {4: "198.18.1.1", 6: "2001:2:0:1::1"}, {4: "198.19.1.1", 6: "2001:2:0:2::1"},
                   {4: "198.18.1.0/24", 6: "2001:2:0:1::/64"}, {4: "198.19.1.0/24", 6: "2001:2:0:2::/64"},
                   ("198.18.1.254", "198.19.1.254", "2001:2:0:1::fe", "2001:2:0:2::fe"))


def ip(a: str) -> int:
    return addr_interval(a)[1][0]


def pkt(src, dst, proto="udp", dport=5555, sport=10000, iif="eth0", oif="eth1", fam=4):
    return Packet(fam, ip(src), ip(dst), proto, sport, dport, iif, oif)


def nft_model():
    return parse_nft_json((DATA / "firewalld-style.nft.json").read_text(),
                          (DATA / "firewalld-style.nft.listing").read_text())


def test_nft_rules_carry_nfts_own_text():
    rs = nft_model()
    assert rs.rule("inet fwlab_example fwd_log_drop #25").text == "udp dport 33434-33534 counter reject"
    assert parse_nft_json((DATA / "firewalld-style.nft.json").read_text()).rule(
        "inet fwlab_example fwd_log_drop #25").text  # without the listing: a text built from the JSON


def ipt_model():
    return parse_iptables_save((EX / "firewalld-style.iptables").read_text(), 4,
                               (EX / "firewalld-style.ipset").read_text())


# -- interval arithmetic and the evaluator ---------------------------------------------------------
def test_intervals():
    assert subtract([(0, 10)], [(3, 4)]) == [(0, 2), (5, 10)]
    assert intersect([(0, 10), (20, 30)], [(5, 25)]) == [(5, 10), (20, 25)]
    assert subtract([(0, 10)], [(0, 10)]) == []


@pytest.mark.parametrize("model", [nft_model, ipt_model])
def test_evaluate_follows_jumps_goto_and_policy(model):
    rs = model()
    # blocked source: dropped in the base chain
    out = evaluate(rs, pkt("203.0.113.9", "198.19.1.1"))
    assert out.verdict == "drop" and len(out.decided_by) == 1
    # web server over tcp 443: accepted in the jumped-to chain
    out = evaluate(rs, pkt("198.18.1.99", "198.19.1.11", "tcp", 443))
    assert out.verdict == "accept" and "internal_to_dmz" in out.decided_by[0]
    # udp traceroute port: goto the log chain, rejected there
    out = evaluate(rs, pkt("198.18.1.99", "198.19.1.1", "udp", 33500))
    assert out.verdict == "drop" and out.terminal == "reject" and "log_drop" in out.decided_by[0]
    # server -> client dns answer accepted, anything else from the server dropped
    assert evaluate(rs, pkt("198.19.1.53", "198.18.1.1", sport=53, iif="eth1", oif="eth0")).verdict == "accept"
    assert evaluate(rs, pkt("198.19.1.54", "198.18.1.1", sport=53, iif="eth1", oif="eth0")).verdict == "drop"


def test_unsupported_match_is_a_fork_not_a_wall():
    text = "*filter\n:FORWARD DROP [0:0]\n-A FORWARD -m time --timestart 09:00 -j ACCEPT\n-A FORWARD -j DROP\nCOMMIT\n"
    rs = parse_iptables_save(text)
    out = evaluate(rs, pkt("198.18.1.1", "198.19.1.1"))
    assert out.verdict is None and out.uncertain_at == "filter FORWARD #1"  # never guessed
    assert out.fork is not None and "--timestart" in out.fork.fact_key
    d = derive(rs, BED)
    by_rule = {c.rule_id: c for c in d.classes}
    # both outcomes explored: the ACCEPT when the time matches, the DROP after it when it does not,
    # each class naming what it assumed
    assert by_rule["filter FORWARD #1"].expected == "accept"
    assert by_rule["filter FORWARD #1"].assumptions == ["--timestart 09:00 = true"]
    assert by_rule["filter FORWARD #2"].expected == "drop"
    assert by_rule["filter FORWARD #2"].assumptions == ["--timestart 09:00 = false"]


# -- derivation on the shipped examples -----------------------------------------------------------
@pytest.mark.parametrize("model,n_classes", [(nft_model, 12), (ipt_model, 11)])
def test_examples_derive_one_verified_class_per_reachable_terminal_rule(model, n_classes):
    rs = model()
    d = derive(rs, BED)
    assert len(d.classes) == n_classes
    for c in d.classes:
        out = evaluate(rs, c.packet)
        assert c.rule_id in out.decided_by and out.verdict == c.expected
        assert c.packet.saddr != ip("198.18.1.254") and c.packet.daddr != ip("198.19.1.254")
    reasons = " | ".join(n.reason for n in d.not_covered)
    assert "new or established" in reasons and "mark" in reasons  # invalid and the mark rule
    est = [c for c in d.classes if c.established]  # ct state established,related accept
    assert len(est) == 1 and est[0].expected == "accept" and est[0].packet.ct_state == "established"
    assert est[0].opened_by and evaluate(rs, est[0].packet).opening.verdict == "accept"
    assert {c.direction for c in d.classes} == {"c2s", "s2c"}
    assert {c.expected for c in d.classes} == {"accept", "drop"}
    assert any(c.terminal == "reject" for c in d.classes)
    assert any(c.packet.family == 6 for c in d.classes) == (model is nft_model)


def test_derivation_is_deterministic_and_says_how_it_samples():
    a = derive(nft_model(), BED, seed=3).to_dict()
    b = derive(nft_model(), BED, seed=3).to_dict()
    assert a == b and "seed 3" in a["sampling"]
    sampled = [c for c in a["classes"] if c["sampling"]]
    assert any("1 value of 3 allowed" in c["sampling"] for c in sampled)  # the web_servers set


def test_shadowed_rule_is_not_covered():
    text = ("*filter\n:FORWARD DROP [0:0]\n-A FORWARD -p udp -j ACCEPT\n-A FORWARD -p udp --dport 53 -j DROP\n"
            "-A FORWARD -p tcp -j DROP\nCOMMIT\n")
    d = derive(parse_iptables_save(text), BED)
    assert [c.rule_id for c in d.classes] == ["filter FORWARD #1", "filter FORWARD #3"]
    assert [n.rule_id for n in d.not_covered] == ["filter FORWARD #2", "policy:FORWARD"]


def test_interface_names_the_bed_lacks_are_not_covered():
    text = "*filter\n:FORWARD ACCEPT [0:0]\n-A FORWARD -i wlan0 -j DROP\nCOMMIT\n"
    d = derive(parse_iptables_save(text), BED)
    assert "wlan0" in d.not_covered[0].reason and [c.rule_id for c in d.classes] == ["policy:FORWARD"]


def test_icmp_only_rule_is_not_covered():
    text = "*filter\n:FORWARD DROP [0:0]\n-A FORWARD -p icmp -j ACCEPT\nCOMMIT\n"
    d = derive(parse_iptables_save(text), BED)
    assert "(udp, tcp)" in d.not_covered[0].reason
    d = derive(parse_iptables_save(text), BED, protocols=DERIVE_L4)  # echo requests asked for
    (c,) = [c for c in d.classes if c.rule_id == "filter FORWARD #1"]
    assert c.packet.l4proto == "icmp" and c.packet.icmp_type == 8 and c.expected == "accept"


def test_negated_matches():
    text = "*filter\n:FORWARD DROP [0:0]\n-A FORWARD ! -s 198.18.1.0/24 -j DROP\n-A FORWARD -j ACCEPT\nCOMMIT\n"
    d = derive(parse_iptables_save(text), BED)
    c1, c2 = d.classes
    assert not (ip("198.18.1.0") <= c1.packet.saddr <= ip("198.18.1.255"))
    assert ip("198.18.1.0") <= c2.packet.saddr <= ip("198.18.1.255")


# -- parsers: malformed input fails in one line ---------------------------------------------------
@pytest.mark.parametrize("text,words", [
    ("*filter\n:FORWARD DROP [0:0]\n-A FORWARD -j ACCEPT\n", "no COMMIT"),
    ("-A FORWARD -j ACCEPT\n", "outside a table"),
    ("*filter\n-A FORWARD -j ACCEPT\nCOMMIT\n", "not declared"),
    ("*filter\n:FORWARD DROP [0:0]\n-A FORWARD -s 10.0.0.300 -j ACCEPT\nCOMMIT\n", "line 3"),
])
def test_malformed_iptables_save(text, words):
    with pytest.raises(BackendError) as e:
        parse_iptables_save(text)
    assert words in e.value.one_line() and "\n" not in e.value.one_line()


def test_ipset_file():
    sets = parse_ipset((EX / "firewalld-style.ipset").read_text())
    assert sets["web_servers"][1] == [addr_interval("198.19.1.10")[1], addr_interval("198.19.1.11")[1],
                                      addr_interval("198.19.1.12")[1]]
    with pytest.raises(BackendError):
        parse_ipset("add nosuch 1.2.3.4\n")


def test_nft_json_garbage():
    with pytest.raises(BackendError):
        parse_nft_json("not json")


def test_detect_kind_and_version():
    assert detect_kind((EX / "firewalld-style.nft").read_text()) == "nft"
    assert detect_kind((EX / "firewalld-style.iptables").read_text()) == "iptables"
    assert detect_ip_version("# Generated by ip6tables-save v1.8\n*filter\nCOMMIT\n") == 6
    assert detect_ip_version((EX / "firewalld-style.iptables").read_text()) == 4
    with pytest.raises(BackendError):
        ImportedFirewall.from_text((EX / "firewalld-style.nft").read_text(), "x.nft", ipset_text="create a hash:ip\n")


def test_kernel_message_is_one_line():
    """nft's /dev/stdin positions become the user's file and line, with the line's text; nft's echo of
    the rule and its carets are left out; further errors are counted."""
    text = "table inet t {\n chain c {\n  type filter hook forward priority 0;\n  jump nowhere\n x\n y\n }\n}\n"
    exc = CommandFailed(["nft", "-f", "-"], 1, "",
                        "/dev/stdin:4:8-14: Error: Could not process rule: No such file or directory\n"
                        "  jump nowhere\n       ^^^^^^^\n/dev/stdin:5:1: Error: x\n\n/dev/stdin:6:1: Error: y\n", None)
    msg = kernel_message(exc, text, "my-rules.nft")
    assert "\n" not in msg and "/dev/stdin" not in msg
    assert msg.startswith("my-rules.nft:4: Could not process rule: No such file or directory: 'jump nowhere'")
    assert msg.endswith("(+1 more error)")


def test_refusals_name_the_missing_kernel_feature():
    """The refusals this kernel gives for a conntrack helper it lacks and for a flowtable ('No such
    file or directory' at /dev/stdin) name the file, the line and the feature."""
    text = ('table inet t {\n  ct helper rtsp { type "rtsp" protocol tcp; }\n'
            '  flowtable ft { hook ingress priority 0; devices = { eth0 }; }\n}\n')
    err = ("/dev/stdin:2:13-16: Error: Could not process rule: No such file or directory\n"
           '  ct helper rtsp { type "rtsp" protocol tcp; }\n            ^^^^\n'
           "/dev/stdin:3:13-14: Error: Could not process rule: No such file or directory\n")
    lines = refusal_lines(err, text, "fw4.nft")
    assert lines[0].startswith("fw4.nft:2: ") and "nf_conntrack_rtsp" in lines[0]
    assert lines[1].startswith("fw4.nft:3: ") and "NF_FLOW_TABLE" in lines[1]
    ipt = "*filter\n:FORWARD ACCEPT [0:0]\n-A FORWARD -p tcp -j CT --helper rtsp\nCOMMIT\n"
    got = refusal_lines("iptables-restore v1.8.9 (nf_tables): \nline 3: RULE_APPEND failed (No such file or "
                        "directory): rule in chain FORWARD\n", ipt, "host.ipt")
    assert got == ["host.ipt:3: RULE_APPEND failed (No such file or directory): rule in chain FORWARD: "
                   "'-A FORWARD -p tcp -j CT --helper rtsp' — no conntrack helper rtsp in this kernel "
                   "(module nf_conntrack_rtsp)"]
    assert missing_feature("tcp dport 80 counter accept") is None


def test_nfacct_names_are_found():
    text = "*filter\n-A FORWARD -m nfacct --nfacct-name web -j ACCEPT\n-A FORWARD -m nfacct --nfacct-name dns\n"
    assert nfacct_names(text) == ["web", "dns"]
    assert nfacct_names("*filter\nCOMMIT\n") == []


# -- the verdict check: reproduced, not reproduced, inconclusive ------------------------------------
def test_observed_verdict_thresholds():
    assert observed_verdict(40, 40) == "passed"
    # more arriving than sent means packets that are not the probe's were counted: never a pass
    assert observed_verdict(40, 42) == "inconclusive"
    assert observed_verdict(40, 0) == "dropped" and observed_verdict(40, 4) == "dropped"
    assert observed_verdict(40, 20) == "inconclusive" and observed_verdict(0, 0) == "inconclusive"


def test_check_class():
    assert check_class("accept", "passed", 40, 40, False)[0] == "match"
    assert check_class("drop", "dropped", None, 40, True)[0] == "match"
    assert check_class("accept", "dropped", 0, 40, False)[0] == "mismatch"
    assert check_class("drop", "passed", 40, 40, False)[0] == "mismatch"
    st, why = check_class("drop", "dropped", 0, 40, False)  # dropped, but by another rule
    assert st == "mismatch" and "counter" in why
    assert check_class("drop", "inconclusive", 40, 40, False)[0] == "inconclusive"


def test_summarize_costs_orders_by_cost_and_keeps_the_range():
    d = derive(ipt_model(), BED)
    a, b = d.classes[:2]
    rates = {(a.class_id, "rules"): [1e6, 1e6], (a.class_id, "reference"): [2e6, 2e6],
             (b.class_id, "rules"): [1.9e6, 1.8e6], (b.class_id, "reference"): [2e6, 2e6]}
    out = summarize_costs([b, a], rates)
    assert out[0]["class_id"] == a.class_id and out[0]["cost_ns_per_packet"]["median"] == pytest.approx(500)
    assert out[1]["cost_ns_per_packet"]["min"] == pytest.approx(1e9 / 1.9e6 - 500)
    assert out[1]["cost_ns_per_packet"]["n"] == 2


# -- configuration -------------------------------------------------------------------------------
def test_interfaces_map():
    assert parse_interfaces("ens3=server,ens4=client") == {"ens3": "server", "ens4": "client"}
    # several names per side: the first of a side is its primary
    assert parse_interfaces("br-lan=client,pppoe-wan=server,wan6=server,docker0=client") == {
        "br-lan": "client", "docker0": "client", "pppoe-wan": "server", "wan6": "server"}
    for bad in ("eth0=client", "eth0=client,eth1=client", "eth0", "averyveryverylongname=client,e=server",
                "lo=client,eth1=server", "eth*=client,eth1=server", "eth0=client,eth0=server",
                "eth0=inside,eth1=server", "fwl-x=client,eth1=server"):
        with pytest.raises(SuiteError):
            parse_interfaces(bad)


def test_suite_ruleset_table(tmp_path):
    (tmp_path / "r.nft").write_text("table inet t {}\n")
    f = tmp_path / "s.toml"
    f.write_text('name = "mine"\nrepetitions = 2\n[ruleset]\nfile = "r.nft"\n'
                 'interfaces = { lan0 = "client", wan0 = "server" }\nrate_count = 5000\n')
    cfg = config_from_suite_file(f)
    assert cfg.ruleset == tmp_path / "r.nft" and cfg.repetitions == 2 and cfg.rate_count == 5000
    assert cfg.interfaces == {"lan0": "client", "wan0": "server"}
    f.write_text('name = "mine"\n[ruleset]\nfile = "r.nft"\nbogus = 1\n')
    with pytest.raises(SuiteError, match="bogus"):
        config_from_suite_file(f)
    f.write_text('name = "plain"\nbackends = ["nftables"]\n')
    assert config_from_suite_file(f) is None


def test_ip6tables_save():
    text = ("# Generated by ip6tables-save v1.8.9\n*filter\n:FORWARD DROP [0:0]\n"
            "-A FORWARD -s 2001:2:0:1::/64 -d 2001:2:0:2::1/128 -p tcp -m tcp --dport 443 -j ACCEPT\n"
            "-A FORWARD -p udp -j REJECT --reject-with icmp6-port-unreachable\nCOMMIT\n")
    assert detect_kind(text) == "iptables" and detect_ip_version(text) == 6
    d = derive(parse_iptables_save(text, 6), BED)
    assert [(c.rule_id, c.packet.family, c.packet.l4proto, c.expected) for c in d.classes] == [
        ("filter FORWARD #1", 6, "tcp", "accept"), ("filter FORWARD #2", 6, "udp", "drop"),
        ("policy:FORWARD", 6, "tcp", "drop")]


def test_report_section_names_findings_and_the_most_expensive():
    from fwlab.report.section_ruleset import render

    d = derive(ipt_model(), BED).to_dict()
    a, b = d["classes"][:2]
    probes = [{"class_id": a["class_id"], "sent": 40, "arrived": 40, "observed": "passed", "expected": "accept",
               "rule_counter_delta": 40, "status": "match", "why": "ok"},
              {"class_id": b["class_id"], "sent": 40, "arrived": 0, "observed": "dropped", "expected": "accept",
               "rule_counter_delta": 0, "status": "mismatch", "why": "the rule set says accept, the probes were dropped"}]
    rng = lambda m: {"median": m, "min": m - 1, "max": m + 1, "n": 3}  # noqa: E731
    costs = [{"class_id": b["class_id"], "rule_id": b["rule_id"], "rule_text": "EXPENSIVE", "expected": "accept",
              "traversed_rules": 5, "rate_pps": rng(1e5), "reference_rate_pps": rng(2e5), "cost_ns_per_packet": rng(5000)}]
    run = {"ruleset_import": {"file": "x", "derivation": d, "probes": probes, "costs": costs, "rate": {}}}
    html = render(run, [])
    assert "Findings" in html and "the probes were dropped" in html
    assert "Most expensive classes" in html and "EXPENSIVE" in html and "[4,999 … 5,001]" in html
    run["ruleset_import"].update(probes=probes[:1], costs=[], rate_missing="not measured (--no-rate)")
    html = render(run, [])
    assert "Every class's observed verdict equals" in html and "not measured (--no-rate)" in html


def test_imported_firewall_names_its_programs():
    """ruleset_run / ruleset_optimize ask the firewall for its restore/save programs (public),
    not through its private helpers."""
    from fwlab.dut.imported import ImportedFirewall

    v4 = ImportedFirewall.from_text("*filter\n:FORWARD DROP [0:0]\n-A FORWARD -p tcp -j ACCEPT\nCOMMIT\n", "r")
    v6 = ImportedFirewall.from_text("*filter\n:FORWARD DROP [0:0]\n-A FORWARD -s 2001:2::/64 -j ACCEPT\nCOMMIT\n", "r")
    assert (v4.restore_program, v4.save_program) == ("iptables-restore", "iptables-save")
    assert (v6.restore_program, v6.save_program) == ("ip6tables-restore", "ip6tables-save")


def test_one_class_trial_identity_for_rate_latency_and_optimize():
    """The spec of a class trial is built in one place (it was built three times); the records'
    identity fields are unchanged: run --ruleset tells its conditions apart by backend/layout
    imported | none, optimize by layout original | proposal."""
    from types import SimpleNamespace

    from fwlab.ruleset.probe import class_spec
    from fwlab.ruleset.run import _identity

    c = derive(parse_iptables_save("*filter\n:FORWARD DROP [0:0]\n-A FORWARD -p udp -j ACCEPT\nCOMMIT\n", 4),
               BED).classes[0]
    rec = SimpleNamespace(run={"suite": {"name": "s"}})
    old_rules = {"trial_id": f"{c.class_id}-rules-r1", "suite": "s", "mode": "routed", "backend": "imported",
                 "class_id": c.class_id, "condition": "rules", "repetition": 1, "ip_version": 4,
                 "traffic": "ruleset-class", "tool": "fwlab-engine", "size_bytes": 64, "layout": "imported",
                 "rules": 0, "stateful_shortcut": False, "streams": 1, "rate_bps": None, "duration_s": 0.5}
    ident = _identity("rules", "D", "F")
    assert class_spec(rec, c, "rules", 1, trial_id=f"{c.class_id}-rules-r1", traffic="ruleset-class",
                      backend=ident["backend"], layout=ident["layout"], duration_s=0.5) == old_rules
    assert ident["ruleset"] == {"digest": "D", "family": "F"}
    ref = _identity("reference", "D", "F")
    assert (ref["backend"], ref["layout"], ref["ruleset"]) == ("none", "none", {"digest": None, "family": None})
    opt = class_spec(rec, c, "proposal", 2, trial_id="x", traffic="ruleset-class", backend="imported",
                     layout="proposal", duration_s=None)
    assert (opt["layout"], opt["backend"], opt["duration_s"]) == ("proposal", "imported", 0.0)
