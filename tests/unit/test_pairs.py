"""Client/server pairs without root: the suite key ``pairs`` (checked at load, one line and exit 2
when bad), the bed it describes (pairs = 1 is today's bed), the overlap/skew figures and flag
(raised and not), and iperf3's pair trial summed from per-pair client output on a fake bed."""

import subprocess
import sys
from dataclasses import dataclass, field

import pytest
from goldens import GOLDEN

from fwlab import cli
from fwlab.errors import SuiteError
from fwlab.errors import TestbedError as BedError
from fwlab.runners import TrafficSpec
from fwlab.runners.base import MIN_OVERLAP_SHARE as MIN_OVERLAP_FRACTION, overlap, skew_flag
from fwlab.runners.iperf3 import Iperf3
from fwlab.runners.iperf3_json import parse_json
from fwlab.suites import parse_suite
from fwlab.testbed import Topology
from fwlab.testbed.host import Spawned

TRAFFIC = [{"kind": "tcp"}]


def test_pairs_default_to_one_and_are_checked_at_load():
    assert parse_suite({"name": "t", "traffic": TRAFFIC}, "test").pairs == 1
    assert parse_suite({"name": "t", "traffic": TRAFFIC, "pairs": 2}, "test").pairs == 2
    for bad in (0, 9, "2", 1.5, True):
        with pytest.raises(SuiteError) as ei:
            parse_suite({"name": "t", "traffic": TRAFFIC, "pairs": bad}, "test")
        assert "pairs" in ei.value.one_line()
    with pytest.raises(SuiteError, match="link_delay"):
        parse_suite({"name": "t", "traffic": TRAFFIC, "pairs": 2, "link_delay": "1ms"}, "test")
    with pytest.raises(SuiteError, match="hosts"):
        parse_suite({"name": "t", "traffic": TRAFFIC, "pairs": 2,
                     "hosts": {"client": {"ssh": "root@h1", "ifaces": ["eth1"]}}}, "test")


def test_a_bad_pairs_in_a_suite_file_is_one_line_and_exit_2(tmp_path, capsys):
    f = tmp_path / "s.toml"
    f.write_text('name = "ok"\npairs = 0\n[[traffic]]\nkind = "tcp"\n', encoding="utf-8")
    assert cli.main(["run", str(f), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pairs" in err[0] and "(fix: " in err[0]
    f.write_text('name = "ok"\npairs = 2\n[[traffic]]\nkind = "tcp"\n', encoding="utf-8")
    assert cli.main(["run", str(f), "--dry-run"]) == 0


def test_one_pair_is_todays_bed():
    one = Topology(run_id="abc123")
    assert one.pairs == 1 and one.roles == ("client", "dut", "server") and one.pair_roles == ()
    assert Topology(run_id="abc123", attacker=True).roles == ("client", "dut", "server", "atk")
    assert Topology(run_id="abc123", mode="direct").roles == ("client", "server")
    assert one.pair_if("client", 1) == one.client_if and one.pair_if("server", 1) == one.server_if
    assert one.plan.pair_client(1, 4) == one.plan.client4 and one.plan.pair_server(1, 6) == one.plan.server6


def test_two_pairs_add_namespaces_switches_and_distinct_addresses():
    for mode in ("routed", "bridge"):
        t = Topology(run_id="abc123", mode=mode, pairs=2)
        assert t.roles == ("client", "dut", "server", "client2", "server2", "swc", "sws")
        assert t.ns("client2") == "fwl-abc123-client2" and t.ns("server2") == "fwl-abc123-server2"
        addrs = [t.plan.pair_client(k, v) for k in (1, 2) for v in (4, 6)] + \
                [t.plan.pair_server(k, v) for k in (1, 2) for v in (4, 6)]
        assert len(set(addrs)) == len(addrs)
    d = Topology(run_id="abc123", mode="direct", pairs=2)
    assert d.roles == ("client", "server", "client2", "server2")  # each pair its own wire: no switch
    t8 = Topology(run_id="abc123", pairs=8)
    names = [t8.pair_if(s, k) for s in ("client", "server") for k in range(1, 9)]
    names += [t8.switch_port_if(s, k) for s in ("client", "server") for k in range(1, 9)]
    names += [t8.switch_uplink_if(s) for s in ("client", "server")] + [t8.switch_bridge_if("client")]
    assert all(len(n) <= 15 for n in names) and len(set(names)) == len(names)
    assert t8.plan.pair_client(8, 4) == "198.18.1.248" and t8.plan.pair_server(8, 4) == "198.19.1.248"
    with pytest.raises(BedError):
        Topology(run_id="abc123", pairs=9)
    with pytest.raises(BedError):
        Topology(run_id="abc123", pairs=2, link_delay_us=1000.0)


def test_overlap_and_the_skew_flag_both_ways():
    def flag(ov, who):
        return skew_flag(ov["common_interval_s"], ov["shortest_s"], ov["start_skew_s"], f"the {who}",
                         "the summed rate overstates the load")

    ov = overlap([(10.0, 12.0), (10.05, 12.05)])
    assert ov["start_skew_s"] == pytest.approx(0.05) and ov["common_interval_s"] == pytest.approx(1.95)
    assert ov["overlap_ratio"] == pytest.approx(0.975)
    assert flag(ov, "2 client/server pairs") is None
    late = overlap([(10.0, 12.0), (10.5, 12.5)])  # 1.5 s of 2 s together: 75 %
    assert late["overlap_ratio"] == pytest.approx(0.75)
    f = flag(late, "2 client/server pairs")
    assert f["code"] == "generator-skew" and "2 client/server pairs" in f["message"]
    apart = overlap([(0.0, 1.0), (2.0, 3.0)])  # never together
    assert apart["common_interval_s"] < 0 and flag(apart, "x")["code"] == "generator-skew"
    edge = overlap([(0.0, 1.0), (1 - MIN_OVERLAP_FRACTION, 2 - MIN_OVERLAP_FRACTION)])
    assert flag(edge, "x") is None  # exactly the threshold passes


# -- iperf3 pair trial on a fake bed: real processes print recorded iperf3 output ---------------
@dataclass
class _Cp:
    stdout: str = "LISTEN 0 5 *:5201 *:*"
    returncode: int = 0


@dataclass
class _FakeHost:
    delays: dict  #: client role -> seconds before its "iperf3" prints
    golden: str
    spawned: list = field(default_factory=list)  #: every argv spawned here

    def role_of(self, ns):
        return ns.rsplit("-", 1)[1]

    def spawn(self, argv, ns=None):
        """An iperf3 client prints the golden output after its role's delay; a server waits."""
        self.spawned.append(argv)
        cmd = f"sleep {self.delays.get(self.role_of(ns), 0)}; cat {self.golden}" if "-c" in argv else "sleep 30"
        proc = subprocess.Popen(["sh", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        return Spawned(proc, ns, argv)

    def forget(self, sp):
        pass


@dataclass
class _FakeBed:
    topo: Topology
    host: _FakeHost
    reads: dict = field(default_factory=dict)

    def ns(self, role):
        return self.topo.ns(role)

    def host_for(self, role):
        return self.host

    def dev(self, role, dev):
        return dev

    def sh(self, role, *argv, check=True):
        return _Cp()

    def link_counters(self, role, dev):
        # each read of an interface adds 1000 packets of 1500 B for its pair's number
        n = self.reads[(role, dev)] = self.reads.get((role, dev), 0) + 1
        k = 2 if role.endswith("2") else 1
        return {"rx_packets": n * 1000 * k, "rx_bytes": n * 1500 * 1000 * k}


def _pair_trial(delays: dict):
    bed = _FakeBed(Topology(run_id="abc123", pairs=2), _FakeHost(delays, str(GOLDEN / "iperf3_tcp.json")))
    r = Iperf3()
    for role in ("server", "server2"):  # servers already listening: the fake bed runs no iperf3 -s
        r._servers[(role, bed.ns(role), 5201, 4)] = Spawned(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                                                                    start_new_session=True), bed.ns(role), [])
    try:
        return r.run_clients(bed, TrafficSpec(traffic="tcp", tool="iperf3", duration_s=2))
    finally:
        r.stop(bed)


def test_iperf3_pairs_are_summed_with_per_pair_figures():
    one = parse_json((GOLDEN / "iperf3_tcp.json").read_text(), "tcp")
    m = _pair_trial({})
    pairs = m.metrics["pairs"]
    assert m.metrics["pair_count"] == 2 and [p["pair"] for p in pairs] == [1, 2]
    assert all(p["bytes"] == one.metrics["bytes"] for p in pairs)
    assert m.metrics["bytes"] == 2 * one.metrics["bytes"]
    assert m.metrics["throughput_bps"] == pytest.approx(2 * one.metrics["throughput_bps"])
    # each pair's receiving interface over the trial; the trial's count is their sum
    assert [p["rx_if_packets"] for p in pairs] == [1000, 2000] and m.metrics["server_if_rx_packets"] == 3000
    assert [p["rx_links"] for p in pairs] == [["server:fwl-abc123-s0"], ["server2:fwl-abc123-s2"]]
    assert m.metrics["start_skew_s"] >= 0 and m.metrics["streams"] == 2 and len(m.raw["argv"]) == 2
    assert "198.19.1.242" in m.raw["argv"][1]  # pair 2's client streams to its own server


def test_iperf3_pairs_that_ran_apart_are_flagged():
    m = _pair_trial({"client2": 1.5})  # pair 2 ends 1.5 s later: together for ~0.5 s of 2 s
    assert m.metrics["start_skew_s"] > 1.0 and m.metrics["overlap_ratio"] < MIN_OVERLAP_FRACTION
    assert [f["code"] for f in m.flags] == ["generator-skew"]


def test_study_000_names_the_pairs_the_record_ran_with():
    from fwlab.published import load_study
    from fwlab.published.study_000 import compare

    study = load_study("seed-000")
    two = " ".join(compare(study, {"suite": {"parsed": {"pairs": 2}}}, []).scaling)
    assert "2 client and 2 server namespaces" in two and "pairs' sum" in two
    one = " ".join(compare(study, {"suite": {"parsed": {}}}, []).scaling)
    assert "pairs = 1: one pair where the seed had two" in one
