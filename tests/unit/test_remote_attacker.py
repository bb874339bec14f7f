"""The attacker role on a remote host, without root: the hosts file's ``[hosts.attacker]`` with a
remote DUT naming its attacker-side interface (checked at load, one line), the suites a flood
may run with (refused in one line and exit 2 otherwise), and the flood's commands on a bed of
fake hosts: the engine shipped to the attacker host runs there on its own interface, its
counters are read there, the remote DUT gets no route and the remote server no counter table."""

import json
import subprocess
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from fwlab.cli import main
from fwlab.errors import HostError
from fwlab.floods.flood import Flood
from fwlab.suites.background import FloodSpec
from fwlab.testbed.bed import Testbed
from fwlab.testbed.host import Spawned
from fwlab.testbed.hosts import Placement, parse_hosts
from fwlab.testbed.topology import Topology, new_run_id


def _remote(addr, **kw):
    return {"ssh": f"root@{addr}", "ifaces": ["eth0"], **kw}


def _lab(dut_ifaces=("eth1", "eth2", "eth3"), **roles) -> dict:
    hosts = {"attacker": _remote("10.0.3.1", ifaces=["ens9"]), "dut": _remote("10.0.2.1", ifaces=list(dut_ifaces))}
    hosts.update(roles)
    return {k: v for k, v in hosts.items() if v is not None}


# -- the hosts file -------------------------------------------------------------------------------
def test_a_remote_dut_names_its_attacker_side_beside_a_remote_attacker():
    p = Placement(parse_hosts({"hosts": _lab()}, "t"))
    assert p.is_remote("atk") and p.entry("atk").ifaces == ["ens9"]  # the bed's name of the role
    assert p.entry("dut").ifaces == ["eth1", "eth2", "eth3"]


@pytest.mark.parametrize("hosts, words", [
    (_lab(attacker=None), "third entry (the attacker side)"),
    (_lab(attacker={"ifaces": ["eth9"]}), "are not both remote"),
    ({"attacker": _remote("a"), "dut": {"ifaces": ["a", "b", "c"]}}, "are not both remote"),
    (_lab(dut_ifaces=("eth1", "eth2", "eth3", "eth4")), "hosts.dut.ifaces needs 2 interface(s)"),
    (_lab(attacker=_remote("a", ifaces=["e1", "e2"])), "hosts.attacker.ifaces needs 1"),
])
def test_bad_attacker_entries_are_one_line(hosts, words):
    with pytest.raises(HostError) as ei:
        parse_hosts({"hosts": hosts}, "'h.toml'")
    line = ei.value.one_line()
    assert words in line and "\n" not in line and "(fix: " in line


# -- which suites a flood runs with -----------------------------------------------------------------
@pytest.mark.parametrize("hosts, refused", [
    (_lab(), None),  # attacker and DUT remote, client and server here
    (_lab(client=_remote("10.0.0.1"), server=_remote("10.0.1.1")), None),  # every role remote
    (_lab(dut_ifaces=("eth1", "eth2")), "hosts.dut.ifaces names 2"),
    ({"attacker": _remote("a")}, "has the DUT on this machine"),
    ({"server": _remote("a")}, "needs every role here"),
    ({"dut": _remote("a", ifaces=["eth1", "eth2"])}, "needs every role here"),
])
def test_flood_roles(hosts, refused):
    from test_lab_units import _FLOOD, _plan, check_refusal

    from fwlab.run.preflight import check_remote_roles
    placement = Placement(parse_hosts({"hosts": hosts}, "t"))
    check_remote_roles(_plan("tcp", "iperf3"), placement)  # without a flood: not the attacker's business
    check_refusal(_plan("tcp", "iperf3", _FLOOD), placement, refused)


def test_a_flood_with_a_local_dut_and_a_remote_attacker_is_exit_2(tmp_path, capsys):
    (tmp_path / "s.toml").write_text(
        'name = "t"\nmode = "routed"\nbackends = ["nftables"]\nlayouts = ["linear"]\nrules = [0]\n'
        'duration_s = 1\nrepetitions = 1\n[[traffic]]\nkind = "tcp"\ntool = "iperf3"\n'
        '[[background]]\nkind = "udp_flood"\nrates_pps = [1000]\n')
    (tmp_path / "h.toml").write_text('[hosts.attacker]\nssh = "root@a"\nifaces = ["eth0"]\n')
    # refused before any host is connected (root@a does not exist)
    rc = main(["run", str(tmp_path / "s.toml"), "--hosts", str(tmp_path / "h.toml"), "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert "has the DUT on this machine" in err[0] and "[hosts.dut]" in err[0]
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


# -- the flood's commands on fake hosts ---------------------------------------------------------------
def _stats(rx: int, tx: int) -> dict:
    return {"rx": {"packets": rx, "bytes": 64 * rx, "dropped": 0},
            "tx": {"packets": tx, "bytes": 64 * tx, "dropped": 0}}


@dataclass
class _Host:
    """A host that answers ``ip`` reads from ``links`` (name -> [rx, tx]; each read adds ``step``)
    and runs a spawned command as ``sleep 0.3; printf <output>``."""

    name: str
    links: dict
    output: str = ""
    step: int = 0
    remote: bool = True
    ran: list = field(default_factory=list)
    spawned: list = field(default_factory=list)

    def run(self, argv, ns=None, *, input=None, check=True, timeout_s=120.0):
        self.ran.append((ns, list(argv)))
        if argv[:3] == ["ip", "-s", "-j"]:
            dev = argv[-1]
            rx, tx = self.links[dev]
            self.links[dev] = [rx + self.step, tx + self.step]
            return subprocess.CompletedProcess(argv, 0, json.dumps([{"ifname": dev, "stats64": _stats(rx, tx)}]), "")
        if argv[:3] == ["ip", "-j", "link"]:
            return subprocess.CompletedProcess(argv, 0, json.dumps([{"address": f"02:00:00:00:00:{argv[-1][-1]}0"}]),
                                               "")
        return subprocess.CompletedProcess(argv, 1, "", "not faked")

    def spawn(self, argv, ns=None):
        self.spawned.append((ns, list(argv)))
        proc = subprocess.Popen(["sh", "-c", 'sleep 0.3; printf "%s" "$0"', self.output], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        return Spawned(proc, ns, argv)

    def forget(self, sp):
        pass

    def describe(self):
        return {"name": self.name, "remote": self.remote}


SEND = {"kind": "send", "schema_version": 1, "offered_count": 500, "achieved_pps": 1000.0, "generator_short": False}


def _bed(hosts: dict, server_remote: bool, mode: str = "routed"):
    entries = {"attacker": _remote("10.0.3.1", ifaces=["ens9"]),
               "dut": _remote("10.0.2.1", ifaces=["eth1", "eth2", "eth3"])}
    if server_remote:
        entries["server"] = _remote("10.0.1.1", ifaces=["eth0"])
    placement = Placement(parse_hosts({"hosts": entries}, "t"), hosts=hosts)
    topo = Topology(run_id=new_run_id(), mode=mode, attacker=True)
    return Testbed(topo=topo, host=hosts.pop("local"), placement=placement)


@pytest.mark.parametrize("server_remote", [False, True])
def test_a_remote_attacker_floods_from_its_own_host(monkeypatch, server_remote):
    import fwlab.runners.engine_binary as eng_bin
    monkeypatch.setattr(eng_bin, "require_engine", lambda: "/here/fwlab-engine")
    atk = _Host("attacker@10.0.3.1", {"ens9": [0, 10]}, output=json.dumps(SEND), step=500)
    atk.__dict__["_fwlab_engine"] = SimpleNamespace(path="/var/cache/fwlab/fwlab-engine")  # shipped there
    dut = _Host("dut@10.0.2.1", {"eth3": [5, 0]}, step=400)
    local = _Host("local", {}, remote=False)
    hosts = {"attacker": atk, "dut": dut, "local": local}
    if server_remote:
        hosts["server"] = _Host("server@10.0.1.1", {})
    bed = _bed(hosts, server_remote)
    f = FloodSpec(kind="udp_flood", rate_pps=1000, lead_s=0.0, tail_s=0.0, dst_port=9)
    fl = Flood(bed, SimpleNamespace(backend=None, dut=None), f, 4, 0.5)
    fl.start()
    rec = fl.finish(0.5)

    # the engine shipped to the attacker host ran there, on its own interface, in no namespace,
    # towards the DUT's attacker-side MAC (read on the DUT, from the hosts file's third interface)
    [(ns, argv)] = atk.spawned
    assert ns is None and argv[0] == "/var/cache/fwlab/fwlab-engine"
    assert argv[1] == "send" and argv[argv.index("--iface") + 1] == "ens9"
    assert argv[argv.index("--dst-mac") + 1] == "02:00:00:00:00:30"
    assert argv[argv.index("--duration-s") + 1] == "0.5"
    assert argv[argv.index("--dst") + 1] == bed.topo.plan.server(4)
    # counters read on each host (the attacker's tx, the DUT's rx on its attacker side)
    assert rec["counts"]["atk_tx_packets"] == 500 and rec["counts"]["dut_rx_packets"] == 400
    assert rec["engine_send_json"]["offered_count"] == 500
    assert rec["attacker"] == atk.describe()
    # the remote DUT keeps its routes: only reads there
    assert all(a[:2] == ["ip", "-j"] or a[:3] == ["ip", "-s", "-j"] for _, a in dut.ran), dut.ran
    if server_remote:  # no counter table on a remote server host: its count is unknown, not guessed
        assert hosts["server"].ran == [] and rec["counts"]["server_flood_packets"] is None
    else:  # the local server namespace gets the ingress counter as before
        assert any(a[:2] == ["nft", "-f"] for _, a in local.ran)
    assert not local.spawned  # nothing of the flood ran here


def test_in_bridge_mode_a_remote_attacker_floods_to_the_server_hosts_mac(monkeypatch):
    import fwlab.runners.engine_binary as eng_bin
    monkeypatch.setattr(eng_bin, "require_engine", lambda: "/here/fwlab-engine")
    atk = _Host("attacker@10.0.3.1", {"ens9": [0, 0]}, output=json.dumps(SEND))
    atk.__dict__["_fwlab_engine"] = SimpleNamespace(path="/var/cache/fwlab/fwlab-engine")
    srv = _Host("server@10.0.1.1", {})
    hosts = {"attacker": atk, "dut": _Host("dut@10.0.2.1", {"eth3": [0, 0]}), "server": srv,
             "local": _Host("local", {}, remote=False)}
    bed = _bed(hosts, True, mode="bridge")
    fl = Flood(bed, SimpleNamespace(backend=None, dut=None), FloodSpec(kind="udp_flood", rate_pps=1000, lead_s=0.0,
                                                                     tail_s=0.0), 4, 0.2)
    fl.start()
    fl.finish(0.2)
    [(_, argv)] = atk.spawned
    assert argv[argv.index("--dst-mac") + 1] == "02:00:00:00:00:00"  # the server host's eth0 (its hosts-file name)
    assert srv.ran == [(None, ["ip", "-j", "link", "show", "eth0"])]  # read there, nothing written
