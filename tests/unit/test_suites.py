import pytest

from fwlab.errors import SuiteError
from fwlab.suites import builtin_names, load_suite, parse_suite
from fwlab.run.plan import expand

BASE = {"name": "t", "traffic": [{"kind": "udp", "sizes": [64]}]}


def test_builtins_validate_and_expand():
    names = builtin_names()
    assert {"quick", "rule-scaling"} <= set(names)
    for n in names:
        suite, text = load_suite(n)
        assert text.strip()
        assert expand(suite).trials


def test_quick_plan_shape():
    suite, _ = load_suite("quick")
    plan = expand(suite)
    assert len(plan.trials) == 2 * 4 * 3 * 2  # layouts x rule counts x traffic (tcp, udp, cost) x repetitions
    assert sum(t.traffic == "cost" and t.tool == "kernel-cost" for t in plan.trials) == 2 * 4 * 2
    assert {t.rules for t in plan.trials} == {0, 100, 1000, 10000}
    # repetitions are the outer loop inside a bed: rep 1 finishes before rep 2 starts
    reps = [t.repetition for t in plan.trials]
    assert reps == sorted(reps)
    assert len({t.trial_id for t in plan.trials}) == len(plan.trials)


def test_rule_scaling_covers_every_backend_and_skips_with_reasons():
    suite, _ = load_suite("rule-scaling")
    plan = expand(suite)
    assert {t.backend for t in plan.trials} == {"none", "nftables", "iptables-legacy", "iptables-nft", "ipset"}
    assert {(t.backend, t.layout) for t in plan.trials} >= {("nftables", "linear"), ("nftables", "set"),
                                                            ("ipset", "set"), ("iptables-nft", "linear")}
    assert {t.stateful_shortcut for t in plan.trials} == {False, True}
    assert {s["backend"] for s in plan.skipped} == {"iptables-legacy", "iptables-nft", "ipset"}
    assert all(s["reason"] for s in plan.skipped)


def test_trial_id_reads_like_csit():
    suite = parse_suite({**BASE, "backends": ["nftables"], "rules": [1000], "stateful_shortcut": [True],
                         "repetitions": 1}, "x")
    (t,) = expand(suite).trials
    assert t.trial_id == "ip4udp-64B-nftables-1000r-linear-sf-routed-r1"


@pytest.mark.parametrize("bad,needle", [
    ({"backends": ["pf"]}, "unknown backend 'pf'"),
    ({"traffic": [{"kind": "sctp"}]}, "cannot generate 'sctp'"),
    ({"traffic": [{"kind": "udp", "tool": "netperf", "options": {"x": 1}}]}, "takes no options"),
    ({"traffic": [{"kind": "udp", "options": {"x": 1}}]}, "unknown: x"),
    ({"traffic": [{"kind": "tcp", "options": {"direction": "sideways"}}]}, "direction 'sideways'"),
    ({"traffic": [{"kind": "parallel", "streams": 100, "options": {"max_probes": 1000}}]}, "max_probes"),
    ({"traffic": [{"kind": "udp"}, {"kind": "udp"}]}, "same trial id"),
    ({"rules": [-5]}, "rule count -5"),
    ({"duraton_s": 3}, "duraton_s"),
    ({"traffic": [{"kind": "udp", "tool": "hping"}]}, "unknown traffic tool 'hping'"),
    ({"traffic": [{"kind": "udp", "tool": "ping"}]}, "cannot generate 'udp'"),
    ({"mode": "nat"}, "mode"),
])
def test_bad_suites_give_one_line_errors(bad, needle):
    with pytest.raises(SuiteError) as ei:
        expand(parse_suite({**BASE, **bad}, "'bad.toml'"))
    msg = ei.value.one_line()
    assert needle in msg and "\n" not in msg and "fix:" in msg


def test_labels_tell_items_apart():
    suite = parse_suite({**BASE, "backends": ["nftables"], "rules": [1], "repetitions": 1,
                         "traffic": [{"kind": "udp", "sizes": [64]},
                                     {"kind": "udp", "sizes": [64], "label": "b"}]}, "x")
    ids = [t.trial_id for t in expand(suite).trials]
    assert ids == ["ip4udp-64B-nftables-1r-linear-routed-r1", "ip4udp-b-64B-nftables-1r-linear-routed-r1"]


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(SuiteError, match="no built-in suite"):
        load_suite("no-such-suite")
    f = tmp_path / "broken.toml"
    f.write_text("name = \n")
    with pytest.raises(SuiteError, match="not valid TOML"):
        load_suite(str(f))


def test_direct_mode_runs_only_the_no_firewall_reference():
    suite = parse_suite({**BASE, "mode": ["direct"], "backends": ["nftables"], "rules": [0, 100], "repetitions": 1}, "x")
    plan = expand(suite)
    assert [(t.backend, t.rules) for t in plan.trials] == [("none", 0)]


def test_item_repetitions_cap_that_item_only():
    suite = parse_suite({**BASE, "backends": ["nftables"], "rules": [1], "repetitions": 3,
                         "traffic": [{"kind": "udp", "sizes": [64]},
                                     {"kind": "udp", "sizes": [64], "label": "once", "repetitions": 1}]}, "x")
    reps = sorted((t.label or "-", t.repetition) for t in expand(suite).trials)
    assert reps == [("-", 1), ("-", 2), ("-", 3), ("once", 1)]


def test_item_repetitions_need_fixed_repetitions():
    suite = parse_suite({**BASE, "backends": ["nftables"], "rules": [1], "repetitions": 2, "precision": 0.05,
                         "traffic": [{"kind": "udp", "sizes": [64], "repetitions": 1}]}, "x")
    with pytest.raises(SuiteError) as ei:
        expand(suite)
    assert "precision" in ei.value.one_line() and "fix:" in ei.value.one_line()


def test_seed_001_quick_repeats_its_throughput_searches():
    """Its verdicts are read on 95 % intervals, which one repetition cannot give."""
    suite, _ = load_suite("seed-001-quick")
    plan = expand(suite)
    tp = [t for t in plan.trials if t.traffic == "throughput"]
    assert {t.repetition for t in tp} == {1, 2, 3}
    assert {t.mode for t in tp} == {"routed", "bridge"}
