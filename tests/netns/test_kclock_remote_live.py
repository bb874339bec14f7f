"""The in-kernel clock on a remote Linux DUT over SSH: a lab of separate sshd "machines"
(tests/netns/sshlab.py HostsLab), every role remote. A suite with the cost item (tool
``kernel-cost``) runs through the hosts file like the namespace bed: the probe's BPF object and
loader are built here and copied to the DUT host, the loader runs there over SSH, the light load
is the engine shipped to the client and server hosts. Every cost trial carries the in-kernel
figures with one firewall pass per forwarded packet, and every host is left as it was handed over."""

import json

import pytest

from record_schema import assert_record_valid
from sshlab import HostsLab, changed, record_local
from fwlab.cli import main
from fwlab.runners.engine_binary import find_engine

if find_engine() is None:
    pytest.skip("fwlab-engine is not built", allow_module_level=True)

SUITE = """
name = "cost-remote-tiny"
mode = "routed"
backends = ["nftables"]
layouts = ["linear"]
rules = [0, 1000]
duration_s = 1
repetitions = 1
settle_s = 0
[[traffic]]
kind = "cost"
tool = "kernel-cost"
"""


def test_the_cost_item_on_a_remote_dut_over_ssh_has_the_namespace_beds_figures(tmp_path, monkeypatch):
    (tmp_path / "lab").mkdir()
    lab = HostsLab(tmp_path / "lab").up()
    try:
        before = {n: lab.state(n) for n in lab.names}
        (tmp_path / "hosts.toml").write_text(lab.hosts_toml())
        (tmp_path / "suite.toml").write_text(SUITE)
        local = record_local(monkeypatch)
        try:
            assert main(["run", str(tmp_path / "suite.toml"), "--hosts", str(tmp_path / "hosts.toml"),
                         "--out", str(tmp_path / "out"), "-q"]) == 0
        finally:
            monkeypatch.undo()
        run_dir = next((tmp_path / "out").iterdir())
        # the loader ran on the DUT host and the engine on the client and server hosts, never here
        assert not [c for c in local if any(x in " ".join(c) for x in ("fwlab-kclock", "fwlab-engine"))]
        assert not [c for c in local if c[0] == "ns" or "netns" in c]
        trials = [json.loads(x) for x in (run_dir / "trials.jsonl").read_text().splitlines() if x.strip()]
        assert len(trials) == 2
        by_rules = {}
        for t in trials:
            assert t["error"] is None, (t["trial_id"], t["error"])
            m = t["metrics"]
            assert m["fw_missing"] is None, m["fw_missing"]
            assert m["fw_p50_low_ns"] <= m["fw_p50_ns"] <= m["fw_p50_high_ns"] and m["fw_floor_p50_ns"] > 0
            assert m["forwarded_count"] > 0
            assert abs(m["fw_calls_per_packet"] - 1.0) < 0.02, m["fw_calls_per_packet"]
            assert m["fw_timed"] >= 0.98 * m["forwarded_count"]
            assert m["fw_ref_ratio_p50"] and m["fw_reference"].startswith("nft ip fwlab_kclock_ref")
            by_rules[t["rules"]] = m
        assert by_rules[1000]["fw_p50_ns"] > by_rules[0]["fw_p50_ns"]
        assert assert_record_valid(run_dir) == len(trials)
        assert "Time inside the firewall" in (run_dir / "report.html").read_text()
        # nothing left running on any host, every host as handed over (the reference table is gone)
        assert lab.wait_idle() == {n: [] for n in lab.names}
        assert changed(before, {n: lab.state(n) for n in lab.names}) == []
    finally:
        lab.down()
