"""One short suite whose trials are one of each kind a built-in suite writes besides those other
netns tests record (stream with an RTT probe, attack, rtt, transactions, connections, parallel):
every trial is measured and its line fits its kind's schema (docs/schema/trial-<kind>.schema.json).
rfc2544 and ruleset-class records come from test_rfc2544_device / test_ruleset_import_live."""

from record_schema import assert_record_valid, kinds_of

SUITE = """
name = "kinds-tiny"
mode = "routed"
backends = ["none"]
duration_s = 1
repetitions = 1
settle_s = 0
[[traffic]]
kind = "tcp"
options = { rtt_probe = true }
[[traffic]]
kind = "rtt"
tool = "ping"
options = { interval_ms = 20 }
[[traffic]]
kind = "http"
tool = "curl"
sizes = [16000]
streams = 1
[[traffic]]
kind = "conn_rate"
tool = "conn"
options = { max_rate_cps = 2000, min_rate_cps = 250, relative_width = 0.5, timeout_s = 1.0, addresses = 2 }
[[traffic]]
kind = "parallel"
tool = "parallel"
streams = 4
options = { interval_s = 1, probe_s = 1, max_probes = 1, tolerance = 0.5 }
[[background]]
kind = "udp_flood"
rates_pps = [2000]
frame_size = 64
sources = 16
only = { traffic = ["tcp"] }
"""


def test_every_kind_of_a_tiny_suite_fits_its_schema(tmp_path):
    from fwlab.run.start import start as start_run
    from fwlab.suites import load_suite

    path = tmp_path / "kinds-tiny.toml"
    path.write_text(SUITE)
    suite, text = load_suite(str(path))
    rec = start_run(suite, text, tmp_path / "results", quiet=True)
    trials = rec.trials()
    errors = {t["trial_id"]: t.get("error") for t in trials if t.get("error")}
    assert not errors, errors
    assert kinds_of(rec.path) == {"attack", "rtt", "transactions", "connections", "parallel"}
    assert assert_record_valid(rec.path) == len(trials)
