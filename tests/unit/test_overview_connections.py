"""The overview's headline sentence for connection setup rates."""

from fwlab.report.overview import connection_sentences


def _t(rules, cps, mode="routed", shortcut=True, kind="connections", error=None):
    return {"kind": kind, "traffic": "conn_rate", "mode": mode, "backend": "nftables", "layout": "linear",
            "stateful_shortcut": shortcut, "rules": rules, "error": error,
            "metrics": {"conn_rate_cps": cps} if cps is not None else {}}


def test_rate_at_largest_rule_count_relative_to_zero_rules():
    trials = [_t(0, 14000), _t(0, 12000), _t(1000, 12000), _t(10000, 7800), _t(10000, 7800)]
    (s,) = connection_sentences(trials)
    assert "10,000 rules" in s and "stateful shortcut on" in s and "routed" in s
    assert "sets up 60 % of the connections" in s
    assert "7,800 vs 13,000/s" in s


def test_needs_a_zero_rule_reference_and_skips_failed_or_other_trials():
    assert connection_sentences([_t(1000, 12000), _t(10000, 7800)]) == []
    assert connection_sentences([_t(0, 14000), _t(10000, None, error="boom")]) == []
    assert connection_sentences([_t(0, 14000, kind="stream"), _t(10000, 7800, kind="stream")]) == []
