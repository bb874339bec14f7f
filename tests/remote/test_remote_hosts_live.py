"""Against the real hosts in $FWLAB_REMOTE_HOSTS: connect, read metadata and clocks, run one
short stream trial through the placed roles. Skipped without that file (or without root)."""

import json
import os
from pathlib import Path

import pytest

HOSTS = os.environ.get("FWLAB_REMOTE_HOSTS")
if not HOSTS:
    pytest.skip("set FWLAB_REMOTE_HOSTS=hosts.toml to test against real remote hosts", allow_module_level=True)
if os.geteuid() != 0:
    pytest.skip("needs root (the local roles' namespaces)", allow_module_level=True)


def test_connect_metadata_and_clock():
    from fwlab.results.metadata import remote_host_metadata
    from fwlab.testbed.hosts import Placement, load_hosts

    entries, _ = load_hosts(HOSTS)
    with Placement(entries) as p:
        assert p.remote_roles
        for role, h in p.hosts.items():
            meta = remote_host_metadata(h)
            assert meta["kernel"], f"{role}: no kernel reported"
            assert p.clocks[role].uncertainty_s < 1.0


def test_one_stream_trial(tmp_path):
    from fwlab.run.start import start as start_run
    from fwlab.suites import parse_suite
    from fwlab.testbed.hosts import load_hosts

    entries, _ = load_hosts(HOSTS)
    suite = parse_suite({"name": "remote-live", "rules": [10], "repetitions": 1, "duration_s": 2,
                         "traffic": [{"kind": "tcp", "tool": "iperf3"}]}, "test")
    rec = start_run(suite, "", tmp_path, quiet=True, hosts=entries)
    t = json.loads((Path(rec.path) / "trials.jsonl").read_text().splitlines()[-1])
    assert t["error"] is None, t["error"]
    assert t["metrics"]["throughput_bps"] > 0
