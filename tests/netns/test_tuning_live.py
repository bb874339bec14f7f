"""A tuning profile on a real bed: its per-namespace sysctls are set in the bed's namespaces,
the host's own values stay as they were, and a run records the profile with every trial."""

import json
import shutil
import tomllib
from pathlib import Path

import pytest

from fwlab.run.start import start as start_run
from fwlab.suites import parse_suite
from fwlab.testbed import Testbed, Topology, new_run_id

KEYS = ("net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_rmem", "net.ipv4.tcp_timestamps", "net.core.rmem_max")


def host_values() -> dict[str, str]:
    return {k: " ".join(Path("/proc/sys", *k.split(".")).read_text().split()) for k in KEYS}


def test_profile_lands_in_the_beds_namespaces_not_the_host():
    before = host_values()
    with Testbed(Topology(run_id=new_run_id(), mode="routed", tuning="seed-000-appendix-i")) as bed:
        for role in ("client", "dut", "server"):
            got = bed.sh(role, "sysctl", "-n", "net.ipv4.tcp_fin_timeout").stdout.strip()
            assert got == "15"
            assert " ".join(bed.sh(role, "sysctl", "-n", "net.ipv4.tcp_rmem").stdout.split()) == "4096 87380 16777216"
        st = bed.describe()["tuning"]
        assert st["profile"] == "seed-000-appendix-i" and st["applied"]["client"]["net.ipv4.tcp_timestamps"] == "0"
        assert "host-global" in st["not_applied"]["net.core.rmem_max"]
        assert host_values() == before
    assert host_values() == before


RUN = """
name = "tuning-live"
mode = "direct"
backends = ["none"]
duration_s = 1
repetitions = 1
tuning = "seed-000-appendix-i"
[[traffic]]
kind = "tcp"
tool = "iperf3"
"""


def test_every_trial_records_the_tuning(tmp_path):
    if not shutil.which("iperf3"):
        pytest.skip("iperf3 is not installed")
    rec = start_run(parse_suite(tomllib.loads(RUN), "test"), RUN, tmp_path, quiet=True)
    trials = [json.loads(x) for x in (rec.path / "trials.jsonl").read_text().splitlines() if x.strip()]
    assert trials and all(t["error"] is None for t in trials)
    assert all(t["conditions"]["tuning"]["profile"] == "seed-000-appendix-i" for t in trials)
    assert all(t["conditions"]["tuning"]["applied"]["client"]["net.ipv4.tcp_fin_timeout"] == "15" for t in trials)
