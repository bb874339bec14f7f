"""IPv6 through every firewall backend for the stress kinds: a bidirectional TCP trial with the
RTT probe, ping (kind rtt) and the engine, each with a per-second series in the record."""

import pytest

from fwlab.run.start import start as start_run
from fwlab.results import RunRecord
from fwlab.runners.engine_binary import find_engine
from fwlab.suites import parse_suite
from record_schema import assert_record_valid


@pytest.mark.parametrize("backend,layout", [("nftables", "linear"), ("iptables-legacy", "linear"),
                                            ("iptables-nft", "linear"), ("ipset", "set"), ("none", "linear")])
def test_ipv6_stream_rtt_and_series_on_every_backend(tmp_path, backend, layout):
    traffic = [{"kind": "tcp", "label": "bidir", "options": {"direction": "bidir", "rtt_probe": True}},
               {"kind": "rtt", "tool": "ping", "options": {"interval_ms": 20}}]
    if find_engine():
        traffic.append({"kind": "engine", "sizes": [128], "rate_pps": 5000})
    suite = parse_suite({"name": "v6-tiny", "backends": [backend], "layouts": [layout], "rules": [100],
                         "ip_versions": [6], "duration_s": 2, "repetitions": 1, "settle_s": 0,
                         "traffic": traffic}, "test")
    rec = start_run(suite, "", tmp_path, quiet=True)
    trials = RunRecord.open(rec.path).trials()
    assert assert_record_valid(rec.path) == len(trials)
    assert trials and all(not t["error"] for t in trials), [t["error"] for t in trials]
    by = {t["traffic"]: t for t in trials}
    tcp = by["tcp"]["metrics"]
    assert tcp["throughput_up_bps"] > 0 and tcp["throughput_down_bps"] > 0
    assert tcp["rtt_samples"] > 10 and tcp["rtt_p99_ms"] >= tcp["rtt_p50_ms"] > 0
    rtt = by["rtt"]["metrics"]
    assert rtt["rtt_samples"] > 10 and rtt["loss_ratio"] == 0
    for t in trials:
        assert len(t["series"]) >= 1, f"{t['trial_id']} has no time series"
        assert t["ip_version"] == 6
    if "engine" in by:
        assert by["engine"]["series"][0].get("source") == "link"
    if backend != "none":
        assert by["tcp"]["ruleset_family"] and ("ip6" in by["tcp"]["ruleset_family"])
