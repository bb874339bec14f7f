"""A real trial records per-role CPU use per second (extra.cpu_series) and the report plots it."""

import pytest

from fwlab.runners.engine_binary import find_engine

pytestmark = pytest.mark.skipif(find_engine() is None, reason="fwlab-engine is not built ('make engine')")


def test_trial_records_cpu_series_per_role(tmp_path):
    from fwlab.run.start import start as start_run
    from fwlab.report import write_report
    from fwlab.results import RunRecord
    from fwlab.suites import parse_suite

    suite = parse_suite({"name": "cpu-tiny", "backends": ["nftables"], "rules": [10], "duration_s": 2,
                         "repetitions": 1, "settle_s": 0, "traffic": [{"kind": "udp"}]}, "test")
    rec = start_run(suite, "", tmp_path, quiet=True)
    (t,) = [t for t in RunRecord.open(rec.path).trials()]
    assert not t["error"]
    cs = t["extra"]["cpu_series"]
    assert (cs["client_cpu"], cs["server_cpu"]) == (0, 1) and cs["dut_measure"] == "softirq"
    assert len(cs["samples"]) >= 2
    for row in cs["samples"]:
        for role in ("client", "dut", "server"):
            assert 0.0 <= row[f"{role}_busy_pct"] <= 100.0
    # the client CPU sent the traffic and (veth) forwarded it in its softirq: both not idle
    assert max(r["client_busy_pct"] for r in cs["samples"]) > 0
    assert max(r["dut_busy_pct"] for r in cs["samples"]) > 0
    html = write_report(rec.path).read_text()
    assert "CPU use per role over time" in html and "CPU busy [%]" in html
