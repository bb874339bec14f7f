"""Several generator hosts and several server hosts (seed 000's 2 + 2) over SSH: ``fwlab run``
against a lab of separate sshd "machines" (tests/netns/sshlab.py HostsLab: 2 client hosts, a DUT
host, 2 server hosts, every role remote), an iperf3 stream suite through the DUT. Each client
host streams to its own server host, both at once: the record has both pairs, their sum and the
start skew; each server host received its own pair's bytes through the DUT (read on the hosts by
the test, apart from fwlab); nothing of the data path ran on this machine; afterwards every host
is as the hosts file handed it over."""

import json

import pytest

from sshlab import HostsLab, changed, record_local
from fwlab.cli import main
from fwlab.runners.base import MIN_OVERLAP_SHARE as MIN_OVERLAP_FRACTION
from fwlab.runners.iperf3 import Iperf3

if Iperf3().unavailable():
    pytest.skip(Iperf3().unavailable(), allow_module_level=True)

SUITE = """
name = "lab-pairs"
mode = "routed"
backends = ["nftables"]
layouts = ["linear"]
rules = [100]
duration_s = 2
repetitions = 1
settle_s = 0
[[traffic]]
kind = "tcp"
tool = "iperf3"
[[traffic]]
kind = "udp"
tool = "iperf3"
sizes = [512]
rate_bps = 20000000
"""


ENGINE_SUITE = SUITE.split("[[traffic]]")[0] + """[[traffic]]
kind = "engine"
sizes = [64]
rate_pps = 10000
"""


def rx_bytes(lab: HostsLab, name: str) -> int:
    """A lab host's eth0 receive byte counter, read on that host (not through fwlab)."""
    doc = json.loads(lab.sh(name, "ip", "-s", "-j", "link", "show", "eth0").stdout)
    return int(doc[0]["stats64"]["rx"]["bytes"])


def test_two_client_and_two_server_hosts_stream_in_pairs(tmp_path, monkeypatch, capsys):
    local = record_local(monkeypatch)
    (tmp_path / "lab").mkdir()
    lab = HostsLab(tmp_path / "lab", clients=2, servers=2).up()
    try:
        before = {n: lab.state(n) for n in lab.names}
        rx_before = {n: rx_bytes(lab, n) for n in lab.server_names}
        local.clear()  # the lab's own set-up and snapshots; from here on: fwlab's commands
        (tmp_path / "hosts.toml").write_text(lab.hosts_toml())
        (tmp_path / "lab-pairs.toml").write_text(SUITE)
        assert main(["run", str(tmp_path / "lab-pairs.toml"), "--hosts", str(tmp_path / "hosts.toml"),
                     "--out", str(tmp_path / "results"), "-q"]) == 0
        fwlab_local = list(local)
        rx_after = {n: rx_bytes(lab, n) for n in lab.server_names}
        rdir = next((tmp_path / "results").iterdir())
        run_doc = json.loads((rdir / "run.json").read_text())
        trials = [json.loads(x) for x in (rdir / "trials.jsonl").read_text().splitlines()]
        assert [t["error"] for t in trials] == [None, None], [t["error"] for t in trials]
        assert sorted(t["traffic"] for t in trials) == ["tcp", "udp"]

        bed = run_doc["beds"][0]
        assert set(bed["placement"]) == {"client", "client2", "dut", "server", "server2"}
        assert {(n["role"], n["iface"]) for n in bed["nics"]} == {
            ("client", "eth0"), ("client2", "eth0"), ("dut", "eth1"), ("dut", "eth2"), ("server", "eth0"),
            ("server2", "eth0")}
        for t in trials:
            m = t["metrics"]
            pairs = m["pairs"]
            assert m["pair_count"] == 2
            assert [(p["pair"], p["client"], p["server"]) for p in pairs] == [(1, "client", "server"),
                                                                              (2, "client2", "server2")]
            # each pair's client streamed to its own server: bytes in iperf3's report and at the
            # server host's interface; the trial's figures are the sum of the pairs'
            assert all(p["rx_if_bytes"] > 0 and p["throughput_bps"] > 0 for p in pairs), pairs
            assert [p["rx_links"] for p in pairs] == [["server:eth0"], ["server2:eth0"]]
            assert m["server_if_rx_packets"] == sum(p["rx_if_packets"] for p in pairs)
            if t["traffic"] == "tcp":  # iperf3 counts bytes for TCP (UDP's rate is the link-counted one)
                assert all(p["bytes"] > 0 for p in pairs) and m["bytes"] == sum(p["bytes"] for p in pairs)
            # the skew fields, consistent with the pairs' own intervals (their values are this
            # machine's: not asserted)
            starts = [p["start_unix_s"] for p in pairs]
            ends = [p["end_unix_s"] for p in pairs]
            assert m["start_skew_s"] == pytest.approx(max(starts) - min(starts))
            assert m["common_interval_s"] == pytest.approx(min(ends) - max(starts))
            assert isinstance(m["launch_skew_s"], float) and m["launch_skew_s"] >= 0
            skewed = m["overlap_ratio"] is None or m["overlap_ratio"] < MIN_OVERLAP_FRACTION
            assert ("generator-skew" in [f["code"] for f in t["flags"]]) == skewed
            # the DUT's permit rule counted both pairs' packets
            assert t["dut_counters_delta"]["permit"] >= m["server_if_rx_packets"] * 0.5
        # the server hosts' own counters (read here on the hosts, apart from fwlab): each one
        # received at least what fwlab recorded for its pair, all of it through the DUT (its only cable)
        for name, role in zip(lab.server_names, ("server", "server2")):
            recorded = sum(p["rx_if_bytes"] for t in trials for p in t["metrics"]["pairs"] if p["server"] == role)
            assert rx_after[name] - rx_before[name] >= recorded > 0
        # nothing on the data path ran here: no local namespace entered, no traffic tool started
        assert not [c for c in fwlab_local if c[0] == "ns" or "netns" in c]
        assert not [c for c in fwlab_local if any(tool in " ".join(c) for tool in ("fwlab-engine", "iperf3"))]

        # the engine's split (every generator to one receiver) is not the pairs': refused, one line
        capsys.readouterr()
        (tmp_path / "engine.toml").write_text(ENGINE_SUITE)
        assert main(["run", str(tmp_path / "engine.toml"), "--hosts", str(tmp_path / "hosts.toml"),
                     "--out", str(tmp_path / "results-engine"), "-q"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "tool 'engine' splits its trial" in err[0] and "server2" in err[0], err

        # teardown restored what the hosts file handed over, on every host; nothing left running
        assert lab.wait_idle() == {n: [] for n in lab.names}
        assert changed(before, {n: lab.state(n) for n in lab.names}) == []
    finally:
        lab.down()
