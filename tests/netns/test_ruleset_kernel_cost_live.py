"""`fwlab run --ruleset` timing each class inside the firewall on the real data path: the in-kernel
clock around every base chain the rule set registers (prerouting and forward here), the class's own
packets at a light load (a dropped class's on the rule set's marked copy; a new-flow class's each
on a flow of its own, checked by the conntrack entry count), the probe's counts against the packets sent and the rule counters, a cost
or a "missing: reason" for every class, and established twins beside their new-flow classes."""

import json
from pathlib import Path

import pytest

from fwlab.ruleset.run import RulesetRunConfig, run_ruleset
from fwlab.runners.engine_binary import find_engine

pytestmark = pytest.mark.skipif(find_engine() is None, reason="fwlab-engine is not built")

RULES = """table inet kc {
    chain pre { type filter hook prerouting priority -150; policy accept;
        ip protocol udp counter
    }
    chain filt { type filter hook forward priority 0; policy drop;
        ct state established,related counter accept
        iifname "eth0" udp dport 5001 counter accept
        iifname "eth0" udp dport 5002 counter drop
        iifname "eth0" ip daddr 198.19.1.0/24 udp dport 7000-7999 counter accept
    }
}
"""
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "firewalld-style.nft"


def _run(tmp_path, text: str, name: str, repetitions: int = 2):
    f = tmp_path / name
    f.write_text(text)
    cfg = RulesetRunConfig(ruleset=f, repetitions=repetitions, probe_count=20, measure_rate=False, latency_count=0,
                           cost_duration_s=0.5)
    rec = run_ruleset(cfg, tmp_path, log=None)
    return rec, json.loads((rec.path / "run.json").read_text())["ruleset_import"]


def test_every_class_timed_in_the_kernel_or_missing_with_a_reason(tmp_path):
    rec, imp = _run(tmp_path, RULES, "kc.nft")
    checked = [p["class_id"] for p in imp["probes"] if p["status"] == "match"]
    assert checked and all(p["status"] == "match" for p in imp["probes"])
    per = imp["kernel_cost"]["classes"]
    assert sorted(per) == sorted(checked)
    classes = {c["class_id"]: c for c in imp["derivation"]["classes"] + imp["established"]["classes"]}
    trials = [t for t in rec.trials("ruleset-class") if t["traffic"] == "ruleset-class-cost"]
    # every class twice, and per round one dropped class of each IP version on the copy that marks twice
    marked2 = [t for t in trials if "-marked2-" in t["trial_id"]]
    assert marked2 and len(trials) == 2 * len(checked) + len(marked2)
    for t in trials:
        m, c = t["metrics"], classes[t["extra"]["class"]["class_id"]]
        assert m is not None, t["error"]
        sent = m["offered_count"]
        assert sent == m["intended_count"] > 0  # every packet sent (a busy host may send them a little late)
        # the forward bracket saw each of the class's packets exactly once
        assert m["fw_entered"] == sent, (t["trial_id"], m["fw_entered"], sent)
        new_flow = (c["packet"]["ct_state"] == "new" and c["packet"].get("ct_direction", "original") == "original"
                    and c["packet"]["proto"] in ("udp", "tcp"))  # (an ICMP class has no source port to cycle)
        if new_flow:  # each packet its own flow (source ports cycled): conntrack made one entry per packet
            assert m["fw_class_flows"].startswith("one flow per packet"), m["fw_class_flows"]
            if c["expected"] == "accept":  # (entries that expired meanwhile may take a few off)
                assert sent + m["pilot_offered_count"] - 10 <= m["conntrack_new_delta"] <= sent + m["pilot_offered_count"]
            else:  # dropped before conntrack confirms: no entry stays
                assert abs(m["conntrack_new_delta"]) <= 10, m["conntrack_new_delta"]
        else:
            assert not m["fw_class_flows"].startswith("one flow per packet")
        if c["expected"] == "accept":
            assert m["fw_timed"] == sent and m["fw_unfinished"] == 0
            assert m["fw_class_ns"] > 0 and m["fw_class_low_ns"] <= m["fw_class_ns"] <= m["fw_class_high_ns"]
            assert "forward" in m["fw_class_hooks"] and "prerouting" in m["fw_class_hooks"]
            assert m["fw_hdr_b64"]
            assert m["fw_ref_p50_ns"] and m["fw_ref_ratio_p50"]  # the nft reference timed the same packets
        else:
            # timed on the marked copy (tests/netns/test_ruleset_drop_cost_live.py checks it in full):
            # every packet timed to its verdict in the forward bracket, then dropped by the clock
            assert m["fw_timed"] == sent and m["fw_unfinished"] == 0 and m["fw_class_dropped_marked"] == sent
            assert m["fw_class_ns"] > 0 and m["fw_class_figure_kind"].startswith("time to the drop verdict")
        # the class's own rule counted the pilot's and the trial's packets, no more, no less
        if not c["rule_id"].startswith("policy:"):
            assert m["rule_counter_delta"] == sent + m["pilot_offered_count"], (t["trial_id"], m)
    for i, s in per.items():
        if classes[i]["expected"] == "accept":
            f = s["ns_per_packet"]
            assert f and f["n"] == 2 and f["low"] <= f["median"] <= f["high"], s
            assert s["referenced"] and s["floor_p50_ns"] > 0 and s["hooks"] == ["forward", "prerouting"]
        else:
            f = s["ns_per_packet"]
            assert f and f["low"] <= f["median"] <= f["high"] and "marked copy" in s["figure_kind"], s
    # established classes (the derivation's or twins): timed beside the new-flow class that opens their
    # flow, decided by the ct state rule (its counter moved by every packet: asserted above)
    est = [i for i, c in classes.items() if c["packet"]["ct_state"] == "established"]
    assert est, imp["derivation"]["classes"]
    pairs = {p["established"]: p["new"] for p in imp["kernel_cost"]["established"]}
    assert set(pairs) == set(est)
    for e, new in pairs.items():  # the flow's own direction and its reply direction (c5r), if derived
        assert "ct state established" in classes[e]["rule_text"]
        assert classes[new]["expected"] == "accept" and classes[new]["packet"]["ct_state"] == "new"
        assert per[e]["ns_per_packet"] and per[new]["ns_per_packet"], (per[e], per[new])
    mix = imp["mix"]["kernel_cost"]
    assert mix["ns_per_packet"] and not mix["left_out"]
    assert set(mix["to_drop_verdict"]) == {i for i, w in imp["mix"]["weights"].items()
                                           if w and classes[i]["expected"] != "accept"}
    from fwlab.report import write_report

    write_report(rec.path)
    html = (rec.path / "report.html").read_text()
    assert "Time inside the firewall per class (in-kernel)" in html and "established, in-kernel" in html


def test_the_gateway_example_gets_a_cost_or_a_reason_per_class(tmp_path):
    rec, imp = _run(tmp_path, EXAMPLE.read_text(), EXAMPLE.name, repetitions=1)
    per = imp["kernel_cost"]["classes"]
    checked = [p["class_id"] for p in imp["probes"] if p["status"] == "match"]
    assert sorted(per) == sorted(checked)
    for s in per.values():
        assert bool(s["ns_per_packet"]) != bool(s.get("missing")), s
        assert (s["expected"] == "drop") == bool(s.get("figure_kind")), s
        for n in s["counts"]:
            assert n["entered"] == n["sent"], s
