"""`fwlab run` end to end against a lab of separate sshd "machines" (tests/netns/sshlab.py
HostsLab): two client hosts, a DUT host, a server host, each reached only over SSH with the
hosts file docs/lab.md shows. The engine (shipped to the generator and server hosts) and iperf3
run there; the record carries the hosts, the NIC fields, the clock offsets and the split across
the two generators; afterwards every host is as the hosts file handed it over."""

import json

import pytest

from sshlab import HostsLab, changed, record_local, to_toml
from fwlab.cli import main
from fwlab.runners.engine_binary import find_engine

if find_engine() is None:
    pytest.skip("fwlab-engine is not built", allow_module_level=True)

SUITE = """
name = "lab-e2e"
mode = "routed"
backends = ["nftables"]
layouts = ["linear"]
rules = [0, 100]
duration_s = 1
repetitions = 1
settle_s = 0
[[traffic]]
kind = "engine"
sizes = [64]
rate_pps = 20000
[[traffic]]
kind = "tcp"
tool = "iperf3"
"""


def test_fwlab_run_over_a_lab_of_ssh_hosts(tmp_path, capsys, monkeypatch):
    local = record_local(monkeypatch)
    lab = HostsLab(tmp_path, clients=2).up()
    try:
        before = {n: lab.state(n) for n in lab.names}
        local.clear()  # the lab's own set-up and snapshots; from here on: fwlab's commands
        (tmp_path / "hosts.toml").write_text(lab.hosts_toml())
        (tmp_path / "lab-e2e.toml").write_text(SUITE)
        assert main(["run", str(tmp_path / "lab-e2e.toml"), "--hosts", str(tmp_path / "hosts.toml"),
                     "--out", str(tmp_path / "results"), "-q"]) == 0
        rdir = next((tmp_path / "results").iterdir())
        run_doc = json.loads((rdir / "run.json").read_text())
        trials = [json.loads(x) for x in (rdir / "trials.jsonl").read_text().splitlines()]
        assert len(trials) == 4 and [t["error"] for t in trials] == [None] * 4

        # hosts and clock offsets in run.json (same kernel underneath: the true offset is 0)
        rh = run_doc["remote_hosts"]
        assert set(rh["entries"]) == {"client", "client2", "dut", "server"}
        for role, off in rh["clock_offsets"].items():
            assert abs(off["offset_s"]) <= off["uncertainty_s"] + 1e-6, role
        bed = run_doc["beds"][0]
        assert set(bed["placement"]) == {"client", "client2", "dut", "server"}
        # NIC fields: every data interface, veth -> no line rate, with the reason
        nics = {(n["role"], n["iface"]): n for n in bed["nics"]}
        assert set(nics) == {("client", "eth0"), ("client2", "eth0"), ("dut", "eth1"), ("dut", "eth2"),
                             ("server", "eth0")}
        for n in nics.values():
            assert n["driver"] == "veth" and n["speed_mbps"] is None and "virtual" in n["speed_missing"]
            assert n["offloads"]["tcp-segmentation-offload"] == "off"
        assert bed["line_rate"]["speed_bps"] is None and "no link speed known" in bed["line_rate"]["missing"]

        eng = [t for t in trials if t["tool"] == "engine"]
        ip3 = [t for t in trials if t["tool"] == "iperf3"]
        for t in eng:
            m = t["metrics"]
            assert m["rx_pps"] > 0 and m["forwarded_count"] > 0.9 * m["offered_count"]
            # split across the two generator hosts, each one's packets counted apart
            assert [g["role"] for g in m["generators"]] == ["client", "client2"]
            assert all(g["forwarded_count"] > 0 for g in m["generators"])
            assert m["start_skew_s"] is not None and m["common_interval_s"] > 0
            assert m["line_rate_pct"] is None and "veth" in m["line_rate_missing"]
            assert t["conditions"]["nics"] == bed["nics"]
            assert set(m["engine_shipped"]) == {"client", "client2", "server"}
            assert m["latency_clocks"]["same_clock"] is False
            assert t["dut_counters_delta"]["permit"] >= 0.9 * m["offered_count"]
        assert all(t["metrics"]["throughput_bps"] > 0 for t in ip3)
        # nothing on the data path ran here: no local command entered a lab host's namespace
        assert not [c for c in local if any(ns in " ".join(c) for ns in lab.ns.values())]
        html = (rdir / "report.html").read_text() if (rdir / "report.html").exists() else ""
        if html:
            assert "% of line rate: missing" in html

        # teardown restored what the hosts file handed over, on every host
        assert lab.wait_idle() == {n: [] for n in lab.names}
        assert changed(before, {n: lab.state(n) for n in lab.names}) == []
    finally:
        lab.down()


def test_unreachable_host_in_the_hosts_file_is_one_line_exit_2(tmp_path, capsys):
    lab = HostsLab(tmp_path).up()
    try:
        hosts = lab.hosts()
        hosts["server"]["port"] = 2299  # nothing listens there
        (tmp_path / "hosts.toml").write_text(to_toml(hosts))
        (tmp_path / "s.toml").write_text(SUITE)
        rc = main(["run", str(tmp_path / "s.toml"), "--hosts", str(tmp_path / "hosts.toml"),
                   "--out", str(tmp_path / "results"), "-q"])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1 and "cannot connect to host server@" in err[0] and "2299" in err[0]
        assert "Traceback" not in err[0]
    finally:
        lab.down()
