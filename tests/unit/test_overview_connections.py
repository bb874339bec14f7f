"""The overview's headline sentence for connection setup rates."""

from fwlab.report.overview import connection_sentences
from fwlab.results import TrialIdentity, trial_record


def _t(rules, cps, mode="routed", shortcut=True, kind="connections", error=None):
    ident = TrialIdentity(suite="s", mode=mode, backend="nftables", layout="linear", rules=rules,
                          stateful_shortcut=shortcut, ip_version=4, traffic="conn_rate", tool="conn",
                          size_bytes=None, streams=1, rate_bps=None, duration_s=1.0, repetition=1)
    return trial_record(ident.to_dict(), kind=kind, started_utc="t", error=error,
                        metrics={"conn_rate_cps": cps} if cps is not None else {})


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
