"""`fwlab run --ruleset` timing the classes a rule set drops, on the real data path: each is timed
on the rule set's marked copy (its drop, reject and policy-drop verdicts made "mark, accept"; the
in-kernel clock's leave right after the dropping chain drops the marked packets). Checked on the
data path: the DUT transmitted none of a dropped class's packets, the bracket of the dropping chain
saw every packet sent enter it and the clock dropped every one of them (an earlier bracket of the
path, e.g. an inet prerouting chain, may also see a few of the bed's own packets), the copy of the
class's own rule (or the policy's final rule) counted exactly the packets sent, and a later table's chain
on the same hook saw none of them (as for the real drop); the figures are labelled as times to
the drop verdict, the mix names them, and the mark statement's own time is measured."""

import json

import pytest

from fwlab.ruleset.run import RulesetRunConfig, run_ruleset
from fwlab.runners.engine_binary import find_engine

pytestmark = pytest.mark.skipif(find_engine() is None, reason="fwlab-engine is not built")

# a prerouting drop, a forward drop, a reject and a policy drop in table a; table b's forward
# chain comes after table a's on the same hook (it must not run for a dropped packet)
RULES = """table inet a {
    chain pre { type filter hook prerouting priority -150; policy accept;
        iifname "eth0" udp dport 5009 counter drop
    }
    chain filt { type filter hook forward priority 0; policy drop;
        ct state established,related counter accept
        iifname "eth0" udp dport 5001 counter accept
        iifname "eth0" udp dport 5002 counter drop
        iifname "eth0" udp dport 5003 counter reject
    }
}
table ip b {
    chain later { type filter hook forward priority 10; policy accept;
        counter
    }
}
"""


#: packets of the bed's own (neighbour discovery, MLD reports) that an earlier bracket of the
#: class's path may see beside the class's: a prerouting chain of an inet table sees every packet
#: entering the DUT (one was seen in a clean-clone run)
STRAY_MAX = 20


def assert_dropped_by_the_clock(m: dict, sent: int, trial: str) -> None:
    """A dropped class on the marked copy: every packet sent entered the dropping chain's bracket
    (the path's last) and left it timed, the clock dropped every one of them, and the copy's rule
    counter moved by exactly those plus the pilot's; an earlier bracket of the path timed every
    packet that entered it and saw the class's packets plus at most a few of the bed's own."""
    path = m["fw_class_path"]
    assert path and all(p["entered"] == p["timed"] for p in path), (trial, path)
    assert path[-1]["entered"] == sent, (trial, path, sent)
    assert all(sent <= p["entered"] <= sent + STRAY_MAX for p in path[:-1]), (trial, path, sent)
    assert m["fw_class_dropped_marked"] == sent, (trial, m["fw_class_dropped_marked"], sent)
    assert m["rule_counter_delta"] == sent + m["pilot_offered_count"], (trial, m["rule_counter_delta"])


def test_dropped_classes_are_timed_to_their_drop_verdict_on_a_marked_copy(tmp_path):
    f = tmp_path / "drops.nft"
    f.write_text(RULES)
    cfg = RulesetRunConfig(ruleset=f, repetitions=2, probe_count=20, measure_rate=False, latency_count=0,
                           cost_duration_s=0.5)
    rec = run_ruleset(cfg, tmp_path, log=None)
    imp = json.loads((rec.path / "run.json").read_text())["ruleset_import"]
    assert all(p["status"] == "match" for p in imp["probes"]), imp["probes"]
    classes = {c["class_id"]: c for c in imp["derivation"]["classes"] + imp["established"]["classes"]}
    dropped = {i for i, c in classes.items() if c["expected"] == "drop"}
    kinds = {classes[i]["terminal"] for i in dropped}
    assert {"drop", "reject"} <= kinds, classes
    assert any(classes[i]["rule_id"].startswith("policy:") for i in dropped), classes
    assert any(classes[i]["rule_id"].startswith("inet a pre #") for i in dropped), classes  # the prerouting drop
    kc = imp["kernel_cost"]
    assert sorted(kc["marked_copy_classes"]) == sorted(dropped)
    trials = [t for t in rec.trials("ruleset-class") if t["traffic"] == "ruleset-class-cost"]
    seen, after_drop = set(), 0
    for t in trials:
        m, c = t["metrics"], classes[t["extra"]["class"]["class_id"]]
        assert m is not None, t["error"]
        sent = m["offered_count"]
        assert sent == m["intended_count"] > 0
        # the DUT transmitted every packet of an accepted class (pilot and trial) and none of a dropped one
        if c["expected"] == "accept":
            assert m["dut_transmitted_delta"] == sent + m["pilot_offered_count"], (t["trial_id"], m)
            assert not m.get("fw_class_figure_kind")
            continue
        seen.add(c["class_id"])
        assert m["dut_transmitted_delta"] == 0, (t["trial_id"], m["dut_transmitted_delta"])
        assert m["fw_class_figure_kind"].startswith("time to the " + ("reject" if c["terminal"] == "reject"
                                                                      else "drop") + " verdict (timed on a marked copy")
        # every packet entered the dropping chain's bracket, left it timed, and the clock dropped it;
        # the copy of the class's own rule (a policy: the copy's final marking rule) counted the pilot
        # and the trial
        assert_dropped_by_the_clock(m, sent, t["trial_id"])
        assert m["fw_class_ns"] > 0 and m["fw_class_low_ns"] <= m["fw_class_ns"] <= m["fw_class_high_ns"]
        # no later chain on the hook ran: table b's bracket (IPv4 only) saw none of a dropped packet
        later = [b for b in t["raw"]["probe"]["brackets"] if any("ip b/later" in x for x in b["chains"])]
        assert all(b.get("entered") == 0 for b in later), later
        after_drop += bool(later)
        if " pre " in c["rule_id"]:  # dropped at prerouting: never reached the forward hook
            fwd = [b for b in t["raw"]["probe"]["brackets"] if b["hook"] == "forward" and b["role"] == "chains"]
            assert all(b.get("entered") == 0 for b in fwd), fwd
        if m["fw_marked_copy_marks"] == 1:
            assert c["rule_id"] in m["fw_marked_copy_changed"]["rules"] or c["rule_id"].startswith("policy:")
    assert seen == dropped and after_drop
    per = kc["classes"]
    for i in dropped:
        s = per[i]
        assert s["ns_per_packet"] and s["ns_per_packet"]["n"] == 2, s
        assert s["figure_kind"].startswith("time to the") and "marked copy" in s["figure_kind"]
        ms = s["mark_statement"]
        assert ms["ns"] is not None and ms["low"] <= ms["ns"] <= ms["high"] and ms["n"] == 2, ms
    mix = imp["mix"]["kernel_cost"]
    assert mix["weight_covered"] == pytest.approx(1.0) and not mix["left_out"], mix
    assert set(mix["to_drop_verdict"]) == {i for i in dropped if imp["mix"]["weights"].get(i)}
    from fwlab.report import write_report

    write_report(rec.path)
    assert "time to the drop verdict (timed on a marked copy)" in (rec.path / "report.html").read_text()


def test_the_iptables_example_times_its_drops_on_a_marked_copy(tmp_path):
    """iptables-restore text (iptables-nft here, or legacy): -j DROP / -j REJECT and the DROP policy
    rewritten to the FWLAB_DROPMARK chain; the same data-path checks as above."""
    from pathlib import Path

    ex = Path(__file__).resolve().parents[2] / "examples"
    cfg = RulesetRunConfig(ruleset=ex / "firewalld-style.iptables", ipset=ex / "firewalld-style.ipset",
                           repetitions=1, probe_count=20, measure_rate=False, latency_count=0, cost_duration_s=0.5)
    rec = run_ruleset(cfg, tmp_path, log=None)
    imp = json.loads((rec.path / "run.json").read_text())["ruleset_import"]
    classes = {c["class_id"]: c for c in imp["derivation"]["classes"] + imp["established"]["classes"]}
    checked = {p["class_id"] for p in imp["probes"] if p["status"] == "match"}
    dropped = {i for i in checked if classes[i]["expected"] == "drop"}
    assert dropped and set(imp["kernel_cost"]["marked_copy_classes"]) == dropped
    n = 0
    for t in rec.trials("ruleset-class"):
        m = t["metrics"]
        if t["traffic"] != "ruleset-class-cost" or classes[t["extra"]["class"]["class_id"]]["expected"] != "drop":
            continue
        assert m is not None, t["error"]
        sent = m["offered_count"]
        assert m["dut_transmitted_delta"] == 0 and sent > 0, (t["trial_id"], m)
        assert_dropped_by_the_clock(m, sent, t["trial_id"])
        assert m["fw_class_ns"] > 0 and "marked copy" in m["fw_class_figure_kind"]
        n += 1
    assert n >= len(dropped)
    for i in dropped:
        assert imp["kernel_cost"]["classes"][i]["ns_per_packet"], imp["kernel_cost"]["classes"][i]
