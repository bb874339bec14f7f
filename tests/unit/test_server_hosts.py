"""Several server hosts without root: the hosts file's ``server2`` ... entries (checked at load,
one line and exit 2 when bad), the pairs a bed of remote hosts makes of them (client k -> server
k), iperf3's pair trial over such a bed summed from per-pair client output (the same code as the
namespace pairs), and the refusal of tools that split a trial across generators to one server."""

import sys
from dataclasses import dataclass, field

import pytest
from goldens import GOLDEN

from test_pairs import _Cp, _FakeHost

from fwlab.cli import main
from fwlab.errors import HostError
from fwlab.runners import TrafficSpec
from fwlab.runners.base import MIN_OVERLAP_SHARE as MIN_OVERLAP_FRACTION
from fwlab.runners.iperf3 import Iperf3
from fwlab.runners.iperf3_json import parse_json
from fwlab.testbed import Topology
from fwlab.testbed.hosts import Placement, parse_hosts
from fwlab.testbed.pairs import stream_pairs


def _remote(addr, **kw):
    return {"ssh": f"root@{addr}", "ifaces": ["eth0"], **kw}


def _lab(servers: int = 2, clients: int | None = None) -> dict:
    """client, client2.., server, server2.. (each its own address), and a DUT."""
    clients = servers if clients is None else clients
    hosts = {"client": _remote("10.0.0.1"), "server": _remote("10.0.1.1"),
             "dut": _remote("10.0.2.1", ifaces=["eth1", "eth2"])}
    for k in range(2, clients + 1):
        hosts[f"client{k}"] = _remote(f"10.0.0.{k}", addresses={"client4": f"198.18.1.{k}",
                                                                 "client6": f"2001:2:0:1::{k}"})
    for k in range(2, servers + 1):
        hosts[f"server{k}"] = _remote(f"10.0.1.{k}", ifaces=[f"eth{k}"],
                                      addresses={"server4": f"198.19.1.{k}"})
    return hosts


# -- the hosts file -------------------------------------------------------------------------------
def test_server_hosts_pair_with_their_clients():
    p = Placement(parse_hosts({"hosts": _lab(3)}, "t"))
    assert p.server_roles == ("server", "server2", "server3")
    assert p.generator_roles == ("client", "client2", "client3")
    # server2's server4 is its own address, not the plan's (the server stays 198.19.1.1)
    assert p.plan_overrides() == ()
    assert Placement(parse_hosts({"hosts": _lab(1, clients=2)}, "t")).server_roles == ("server",)


@pytest.mark.parametrize("hosts, words", [
    ({**_lab(1), "server2": _remote("b", addresses={"server4": "198.19.1.2"})},
     "hosts.server2 has no hosts.client2"),
    ({**_lab(2), "client3": _remote("c", addresses={"client4": "198.18.1.3"})},
     "hosts.client3 has no hosts.server3"),
    ({**_lab(2), "server2": {"ifaces": ["eth0"]}}, "hosts.server2 is an extra server host and must be remote"),
    ({**_lab(2), "server2": _remote("b")}, "hosts.server2 needs addresses.server4"),
    ({**_lab(2), "server2": _remote("b", addresses={"client4": "198.18.1.9", "server4": "198.19.1.2"})},
     "hosts.server2.addresses.client4 is not one of server4, server6"),
    ({**_lab(2), "server2": _remote("b", addresses={"server4": "not-an-ip"})}, "is not an IP address"),
    ({**_lab(2), "server2": _remote("b", ifaces=["eth0", "eth1"], addresses={"server4": "198.19.1.2"})},
     "hosts.server2.ifaces needs 1"),
    ({**{k: v for k, v in _lab(2).items() if k != "server"}}, "needs a remote hosts.server"),
    ({**_lab(2), "server17": _remote("b")}, "unknown role 'server17'"),
])
def test_bad_server_entries_are_one_line(hosts, words):
    with pytest.raises(HostError) as ei:
        parse_hosts({"hosts": hosts}, "'h.toml'")
    line = ei.value.one_line()
    assert words in line and "\n" not in line and "(fix: " in line


def test_a_bad_server_host_in_a_hosts_file_is_one_line_and_exit_2(tmp_path, capsys):
    f = tmp_path / "hosts.toml"
    f.write_text('[hosts.client]\nssh = "root@a"\nifaces = ["eth0"]\n'
                 '[hosts.server]\nssh = "root@b"\nifaces = ["eth0"]\n'
                 '[hosts.server2]\nssh = "root@c"\nifaces = ["eth0"]\naddresses = { server4 = "198.19.1.2" }\n')
    rc = main(["run", "quick", "--dry-run", "--hosts", str(f)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert "hosts.server2 has no hosts.client2" in err[0] and "add [hosts.client2]" in err[0]


# -- which tools run with server hosts --------------------------------------------------------------
@pytest.mark.parametrize("kind, tool, refused", [
    ("tcp", "iperf3", None),
    ("udp", "iperf3", None),
    ("engine", "engine", "tool 'engine' splits its trial across the generator hosts towards one server"),
    ("throughput", "rfc2544", "tool 'rfc2544' splits its trial"),
])
def test_tools_that_split_across_generators_are_refused_with_server_hosts(kind, tool, refused):
    from test_lab_units import _plan, check_refusal

    from fwlab.run.preflight import check_remote_roles
    plan = _plan(kind, tool)
    check_remote_roles(plan, Placement(parse_hosts({"hosts": _lab(1, clients=2)}, "t")))  # one server: the split
    check_refusal(plan, Placement(parse_hosts({"hosts": _lab(2)}, "t")), refused, "server2")


# -- the pairs of a bed of remote hosts, and iperf3's trial over them -------------------------------
@dataclass
class _HostOf(_FakeHost):
    """One "remote host" per role (test_pairs' fake host: iperf3 clients print recorded output)."""

    role: str = "client"

    def role_of(self, ns):
        return self.role


@dataclass
class _RemoteBed:
    """The parts of a Testbed an iperf3 trial reads, with every role on its own remote host."""

    topo: Topology
    placement: Placement
    hosts: dict
    reads: dict = field(default_factory=dict)

    def ns(self, role):
        return None  # remote hosts without ``ns``: each runs in its own root namespace

    def host_for(self, role):
        return self.hosts[role]

    def dev(self, role, dev):
        # the hosts file's own names for the bed's standard interfaces of client and server
        std = {"client": self.topo.client_if, "server": self.topo.server_if}
        return self.placement.entry(role).ifaces[0] if std.get(role) == dev else dev

    def sh(self, role, *argv, check=True):
        return _Cp()

    def link_counters(self, role, dev):
        # each read of an interface adds 1000 packets of 1500 B times its pair's number
        n = self.reads[(role, dev)] = self.reads.get((role, dev), 0) + 1
        k = int(role[6:] or 1)
        return {"rx_packets": n * 1000 * k, "rx_bytes": n * 1500 * 1000 * k}


def _remote_bed(delays: dict | None = None) -> _RemoteBed:
    placement = Placement(parse_hosts({"hosts": _lab(2)}, "t"))
    golden = str(GOLDEN / "iperf3_tcp.json")
    hosts = {r: _HostOf(delays or {}, golden, role=r) for r in placement.entries}
    return _RemoteBed(Topology(run_id="abc123"), placement, hosts)


def test_stream_pairs_of_remote_hosts():
    bed = _remote_bed()
    pairs = stream_pairs(bed)
    assert [(p.k, p.client, p.server) for p in pairs] == [(1, "client", "server"), (2, "client2", "server2")]
    # pair 1 reads the bed's standard interfaces (the bed maps them to the hosts file's), pair 2
    # its hosts' own; each server its own address
    assert [(p.client_if, p.server_if) for p in pairs] == [("fwl-abc123-c0", "fwl-abc123-s0"), ("eth0", "eth2")]
    assert [p.server_addr(4) for p in pairs] == ["198.19.1.1", "198.19.1.2"]
    assert pairs[1].server_addr(6) is None  # not given in the hosts file
    # one server host: the one pair (further generator hosts are the engine's split)
    one = _RemoteBed(Topology(run_id="abc123"), Placement(parse_hosts({"hosts": _lab(1, clients=2)}, "t")), {})
    assert [(p.client, p.server) for p in stream_pairs(one)] == [("client", "server")]


def _trial(bed: _RemoteBed, spec: TrafficSpec):
    r = Iperf3()
    try:
        return r.run_clients(bed, spec)
    finally:
        r.stop(bed)


def test_iperf3_over_server_hosts_runs_each_client_to_its_own_server_and_sums_them():
    one = parse_json((GOLDEN / "iperf3_tcp.json").read_text(), "tcp")
    bed = _remote_bed()
    m = _trial(bed, TrafficSpec(traffic="tcp", tool="iperf3", duration_s=2))
    # an iperf3 server on each server host, each client on its own host to its own server
    assert [a[:2] for a in bed.hosts["server"].spawned] == [["iperf3", "-s"]]
    assert [a[:2] for a in bed.hosts["server2"].spawned] == [["iperf3", "-s"]]
    assert bed.hosts["client"].spawned[0][:3] == ["iperf3", "-c", "198.19.1.1"]
    assert bed.hosts["client2"].spawned[0][:3] == ["iperf3", "-c", "198.19.1.2"]
    pairs = m.metrics["pairs"]
    assert [(p["pair"], p["client"], p["server"]) for p in pairs] == [(1, "client", "server"),
                                                                      (2, "client2", "server2")]
    assert m.metrics["bytes"] == sum(p["bytes"] for p in pairs) == 2 * one.metrics["bytes"]
    assert [p["rx_links"] for p in pairs] == [["server:eth0"], ["server2:eth2"]]  # each host's own names
    assert [p["rx_if_packets"] for p in pairs] == [1000, 2000] and m.metrics["server_if_rx_packets"] == 3000
    assert m.metrics["pair_count"] == 2 and m.metrics["start_skew_s"] >= 0
    assert m.metrics["overlap_ratio"] >= MIN_OVERLAP_FRACTION and m.flags == []


def test_iperf3_server_hosts_that_ran_apart_are_flagged():
    m = _trial(_remote_bed({"client2": 1.5}), TrafficSpec(traffic="tcp", tool="iperf3", duration_s=2))
    assert m.metrics["start_skew_s"] > 1.0 and m.metrics["overlap_ratio"] < MIN_OVERLAP_FRACTION
    assert [f["code"] for f in m.flags] == ["generator-skew"]


def test_iperf3_ipv6_without_a_server6_address_is_one_line():
    from fwlab.errors import RunnerError

    with pytest.raises(RunnerError) as ei:
        _trial(_remote_bed(), TrafficSpec(traffic="tcp", tool="iperf3", duration_s=2, ip_version=6))
    line = ei.value.one_line()
    assert "server host server2 has no server6 address" in line and "[hosts.server2]" in line


def test_the_stop_of_one_server_host_leaves_no_other_running():
    bed = _remote_bed()
    r = Iperf3()
    r.start(bed, TrafficSpec(traffic="tcp", tool="iperf3", duration_s=2))
    procs = list(r._servers.values())
    assert len(procs) == 2  # one per server host, though both run in namespace None
    r.stop(bed)
    assert r._servers == {} and all(sp.proc.poll() is not None for sp in procs)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
