"""A background flood from a remote attacker host (issue 16): ``fwlab run`` against a lab of
separate sshd "machines" (tests/netns/sshlab.py HostsLab with an attacker host cabled to the
DUT's eth3; every role remote), seed 000's TCP under a spoofed UDP flood, shortened: an iperf3
TCP trial through the DUT's nftables while the attacker host floods. The engine is shipped to
the attacker host and runs there; the record has the flood's figures, offered and sent (read on
the attacker host) and received and dropped by the DUT (read on the DUT host), and the attacker's
own counter, read here apart from fwlab, saw at least what was offered. Nothing of it ran on
this machine; afterwards nothing runs on any host and every host is as the hosts file handed it
over (no route for the spoofed sources on the remote DUT: docs/lab.md)."""

import json

import pytest

from sshlab import HostsLab, changed, record_local
from fwlab.cli import main
from fwlab.runners.engine_binary import find_engine
from fwlab.runners.iperf3 import Iperf3

if Iperf3().unavailable():
    pytest.skip(Iperf3().unavailable(), allow_module_level=True)
pytestmark = pytest.mark.skipif(find_engine() is None, reason="fwlab-engine is not built ('make engine')")

SUITE = """
name = "lab-attacker"
mode = "routed"
backends = ["nftables"]
layouts = ["linear"]
rules = [10]
duration_s = 2
repetitions = 1
settle_s = 0
[[traffic]]
kind = "tcp"
tool = "iperf3"
[[background]]
kind = "udp_flood"
rates_pps = [2000]
lead_s = 0.5
tail_s = 1.5
"""


def tx_packets(lab: HostsLab, name: str) -> int:
    """A lab host's eth0 transmit packet counter, read on that host (not through fwlab)."""
    doc = json.loads(lab.sh(name, "ip", "-s", "-j", "link", "show", "eth0").stdout)
    return int(doc[0]["stats64"]["tx"]["packets"])


def test_a_remote_attacker_floods_beside_an_iperf3_trial(tmp_path, monkeypatch):
    local = record_local(monkeypatch)
    (tmp_path / "lab").mkdir()
    lab = HostsLab(tmp_path / "lab", attacker=True).up()
    try:
        before = {n: lab.state(n) for n in lab.names}
        atk_tx_before = tx_packets(lab, "atk")
        local.clear()  # the lab's own set-up and snapshots; from here on: fwlab's commands
        (tmp_path / "hosts.toml").write_text(lab.hosts_toml())
        (tmp_path / "s.toml").write_text(SUITE)
        assert main(["run", str(tmp_path / "s.toml"), "--hosts", str(tmp_path / "hosts.toml"),
                     "--out", str(tmp_path / "results"), "-q"]) == 0
        fwlab_local = list(local)
        atk_tx = tx_packets(lab, "atk") - atk_tx_before
        rdir = next((tmp_path / "results").iterdir())
        run_doc = json.loads((rdir / "run.json").read_text())
        [t] = [json.loads(x) for x in (rdir / "trials.jsonl").read_text().splitlines()]
        assert t["error"] is None, t["error"]
        assert set(run_doc["beds"][0]["placement"]) >= {"client", "dut", "server", "atk"}

        m, bg = t["metrics"], t["extra"]["background"]
        assert t["kind"] == "attack" and t["background"] == bg["spec"] and m["throughput_bps"] > 0
        # the engine shipped to the attacker host ran there, on its own interface
        assert bg["attacker"]["remote"] is True
        assert bg["engine_argv"][0].startswith(str(lab.tmp / "cache-atk"))
        assert bg["engine_argv"][bg["engine_argv"].index("--iface") + 1] == "eth0"
        offered = m["flood_offered_packets"]
        assert offered > 0 and m["flood_offered_pps"] > 0
        # sent (the attacker host's link), received by the DUT (its attacker side) and dropped by
        # its default policy (the spoofed sources match no permit rule): at least what was offered
        assert m["flood_atk_tx_packets"] >= offered
        assert m["flood_dut_rx_packets"] >= offered
        assert m["flood_dut_rule_drops"] >= offered
        assert m["flood_server_packets"] is None  # no counter table on a remote server host
        assert atk_tx >= m["flood_atk_tx_packets"]  # the host's own counter, read apart from fwlab
        assert bg["attacker"]["name"].startswith("attacker@")
        # whether the flood outlasted the measurement is this machine's timing: consistent, not asserted
        assert bg["covered_measurement"] == (bg["ran_s"] >= 0.5 + bg["measured_s"])
        codes = [f["code"] for f in t["flags"]]
        assert ("flood-ended-early" in codes) == (not bg["covered_measurement"]), t["flags"]
        assert "flood-no-result" not in codes and "flood-overran" not in codes, t["flags"]

        # nothing on the data path ran here: no local namespace entered, no traffic tool started
        assert not [c for c in fwlab_local if c[0] == "ns" or "netns" in c]
        assert not [c for c in fwlab_local if any(tool in " ".join(c) for tool in ("fwlab-engine", "iperf3"))]
        # nothing left running on any host; every host as the hosts file handed it over
        assert lab.wait_idle() == {n: [] for n in lab.names}
        assert changed(before, {n: lab.state(n) for n in lab.names}) == []
    finally:
        lab.down()
