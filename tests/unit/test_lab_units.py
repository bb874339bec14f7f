"""Real-lab arithmetic without a network: shipping a binary by hash (to this machine as the
"host"), NIC fields and line rate, splitting a trial across generator hosts and aggregating them,
the one-way-latency clock flag, and the hosts file's generator entries."""

import os
import stat

import pytest

from fwlab.errors import HostError
from fwlab.runners.engine_args import EngineTrial, split_trial
from fwlab.runners.engine_clocks import clock_flag
from fwlab.runners.engine_counts import aggregate
from fwlab.testbed.host import LocalHost
from fwlab.testbed.hosts import Placement, parse_hosts
from fwlab.testbed.nic import (NicInfo, line_rate_pps, parse_ethtool_i, parse_ethtool_k, path_line,
                               pct_of_line_rate, speed_from, trial_line_rate)
from fwlab.testbed.ship import remote_sha256, sha256_file, ship
from trials import full_trial


# -- shipping -----------------------------------------------------------------------------------
def test_ship_copies_verifies_caches_and_removes_by_the_rule(tmp_path):
    src = tmp_path / "tool"
    src.write_bytes(b"#!/bin/sh\necho hi\n")
    cache = tmp_path / "cache"
    h = LocalHost()
    s = ship(h, str(src), "tool", cache_dir=str(cache))
    assert s.path == f"{cache}/tool-{sha256_file(src)}" and not s.cached and not s.kept
    assert remote_sha256(h, s.path) == sha256_file(src)
    assert os.stat(s.path).st_mode & stat.S_IXUSR and oct(os.stat(cache).st_mode & 0o777) == "0o700"
    h.close()  # not kept: the binary and the directory fwlab made are gone
    assert not cache.exists()
    # kept: stays, and the next ship finds it by hash
    h = LocalHost()
    assert not ship(h, str(src), "tool", cache_dir=str(cache), keep=True).cached
    h.close()
    h = LocalHost()
    again = ship(h, str(src), "tool", cache_dir=str(cache), keep=True)
    assert again.cached
    # a damaged cached file (same name, other content) is replaced, not trusted
    open(again.path, "wb").write(b"tampered")
    fixed = ship(h, str(src), "tool", cache_dir=str(cache))
    assert not fixed.cached and sha256_file(fixed.path) == sha256_file(src)
    h.close()
    assert os.listdir(cache) == []  # not kept this time; the directory was there before: it stays


def test_ship_refuses_an_unwritable_cache_dir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    src = tmp_path / "tool"
    src.write_bytes(b"x")
    with pytest.raises(HostError, match="cannot create"):
        ship(LocalHost(), str(src), "tool", cache_dir=str(blocker / "sub"))


# -- NICs and line rate -------------------------------------------------------------------------
ETHTOOL_I = """driver: ixgbe
version: 6.1.0-13-amd64
firmware-version: 0x800003e2, 1.1904.0
bus-info: 0000:03:00.0
supports-statistics: yes
"""
ETHTOOL_K = """Features for enp3s0f0:
rx-checksumming: on
tx-checksumming: on
tcp-segmentation-offload: off
generic-receive-offload: on
large-receive-offload: off [fixed]
"""


def test_ethtool_parsers():
    i = parse_ethtool_i(ETHTOOL_I)
    assert i["driver"] == "ixgbe" and i["firmware-version"] == "0x800003e2, 1.1904.0"
    k = parse_ethtool_k(ETHTOOL_K)
    assert k == {"rx-checksumming": "on", "tx-checksumming": "on", "tcp-segmentation-offload": "off",
                 "generic-receive-offload": "on", "large-receive-offload": "off [fixed]"}


def test_speed_known_missing_and_virtual():
    assert speed_from("10000\n", "ixgbe") == (10000, None)
    v, why = speed_from("10000\n", "veth")
    assert v is None and "virtual" in why and "10000" in why
    assert speed_from("-1\n", "ixgbe")[0] is None and "unknown" in speed_from("-1\n", "ixgbe")[1]
    assert speed_from(None, "ixgbe")[0] is None


def test_line_rate_counts_preamble_sfd_and_gap():
    # RFC 2544's classic figures: 64-byte frames at 10 Gbit/s = 14,880,952 fps; 1518 B = 812,743 fps
    assert line_rate_pps(10e9, 64) == pytest.approx(14_880_952.38, rel=1e-9)
    assert line_rate_pps(10e9, 1518) == pytest.approx(812_743.82, rel=1e-8)
    assert line_rate_pps(1e9, 64) == pytest.approx(1_488_095.24, rel=1e-8)
    assert pct_of_line_rate(744_047.62, 64, 1e9) == pytest.approx(50.0, rel=1e-6)
    with pytest.raises(ValueError):
        line_rate_pps(0, 64)


def _nic(role, iface, mbps, why=None):
    return NicInfo(role=role, iface=iface, speed_mbps=mbps, speed_missing=why)


def test_path_line_is_the_slowest_known_link_and_sums_generators():
    nics = [_nic("client", "c0", 1000), _nic("dut", "d0", 10000), _nic("dut", "d1", 10000),
            _nic("server", "s0", 25000)]
    p = path_line(nics, ["client"])
    assert (p.speed_bps, p.link) == (1e9, "client:c0")
    two = nics + [_nic("client2", "c0", 10000)]
    p2 = path_line(two, ["client", "client2"])
    assert p2.speed_bps == 10e9 and p2.link == "dut:d0"  # 1 + 10 Gbit/s of generators > the DUT's 10
    veth = [_nic("client", "eth0", None, "veth is a virtual interface"), _nic("server", "eth0", None, "x")]
    p3 = path_line(veth, ["client"])
    assert p3.speed_bps is None and "veth is a virtual interface" in p3.missing
    m = trial_line_rate({"frame_size": 64, "rx_pps": 1e6}, p3)
    assert m["line_rate_pct"] is None and "no link speed" in m["line_rate_missing"]
    m = trial_line_rate({"frame_size": 64, "rx_pps": 744_047.62}, path_line(nics, ["client"]))
    assert m["line_rate_pct"] == pytest.approx(50.0, rel=1e-6) and m["line_rate_link"] == "client:c0"
    # an RFC 2544 result's throughput, not the last trial's received rate
    m = trial_line_rate({"frame_size": 64, "rx_pps": 1.0, "throughput_pps": 1_488_095.24}, p)
    assert m["line_rate_pct"] == pytest.approx(100.0, rel=1e-6)
    assert trial_line_rate({"throughput_bps": 1e9}, p) == {}  # a byte stream has no frame rate


def test_an_emulated_wire_bounds_the_path_where_it_is_slowest_or_alone():
    nics = [_nic("client", "c0", 1000), _nic("server", "s0", 10000)]
    wire = (1e8, "client:c0")
    p = path_line(nics, ["client"], emulated=wire)
    assert p.speed_bps == 1e8 and p.link == "emulated wire (client:c0 egress shaped to Ethernet line time)"
    assert path_line(nics, ["client"], emulated=(1e10, "client:c0")).link == "client:c0"  # the NIC is slower
    veth = [_nic("client", "eth0", None, "veth is a virtual interface")]
    p = path_line(veth, ["client"], emulated=wire)
    assert p.speed_bps == 1e8 and p.missing is None and p.link.startswith("emulated wire")


# -- several generators ---------------------------------------------------------------------------
def test_split_trial_shares_rate_count_and_ports():
    t = EngineTrial(duration_s=2, rate_pps=30000, count=10, src_ports=(1024, 1033))
    parts = [split_trial(t, 3, i) for i in range(3)]
    assert [p.rate_pps for p in parts] == [10000] * 3
    assert [p.count for p in parts] == [4, 3, 3]
    assert [p.src_ports for p in parts] == [(1024, 1027), (1028, 1030), (1031, 1033)]
    assert split_trial(t, 1, 0) is t
    assert split_trial(EngineTrial(duration_s=1), 2, 1).rate_pps is None


def _send(start_s, elapsed, offered, threads=1):
    return {"kind": "send", "started_unix_ns": int(start_s * 1e9), "elapsed_s": elapsed,
            "offered_count": offered, "intended_count": offered, "intended_pps": offered / elapsed,
            "achieved_pps": offered / elapsed, "errors": 0, "threads": [{}] * threads}


def test_aggregate_sums_rates_over_the_common_interval_with_offsets():
    # host B's clock is 0.5 s ahead: its reading 1000.6 is 1000.1 here, so the skew is 0.1 s
    sends = [_send(1000.0, 2.0, 20000), _send(1000.6, 2.0, 10000, threads=2)]
    recv = {"streams": [{"stream_id": 1, "unique": 19000}, {"stream_id": 101, "unique": 4000},
                        {"stream_id": 102, "unique": 5000}]}
    a = aggregate(sends, recv, [("client", 1, 0.0), ("client2", 101, 0.5)])
    assert a["start_skew_s"] == pytest.approx(0.1, abs=1e-6)
    assert a["common_interval_s"] == pytest.approx(1.9, abs=1e-6)
    assert a["rx_pps"] == pytest.approx(19000 / 2 + 9000 / 2)
    assert [g["forwarded_count"] for g in a["generators"]] == [19000, 9000]
    assert a["send"]["offered_count"] == 30000 and a["send"]["intended_count"] == 30000
    assert len(a["send"]["threads"]) == 3
    # without B's offset the skew would look like 0.6 s
    assert aggregate(sends, recv, [("client", 1, 0.0), ("client2", 101, 0.0)])["start_skew_s"] == pytest.approx(0.6)


# -- clocks ------------------------------------------------------------------------------------
def test_clock_flag_only_when_the_offset_is_looser_than_the_latency():
    two = {"same_clock": False, "uncertainty_s": 200e-6, "correction_s": 0.0, "sender": "client",
           "receiver": "server"}
    assert clock_flag(two, {"p50": 50_000})["code"] == "clocks-unsynced"  # 50 us < +-200 us
    assert clock_flag(two, {"p50": 5_000_000}) is None  # 5 ms > +-200 us: the offset is tight enough
    assert clock_flag({"same_clock": True}, {"p50": 1}) is None  # one clock
    assert clock_flag(two, None) is None  # no latency measured


# -- hosts file: generator hosts ------------------------------------------------------------------
def _remote(addr, **kw):
    return {"ssh": f"root@{addr}", "ifaces": ["eth0"], **kw}


def test_hosts_file_extra_generators():
    hosts = {"client": _remote("10.0.0.1"), "client2": _remote("10.0.0.2", addresses={"client4": "198.18.1.2"}),
             "client10": _remote("10.0.0.3", addresses={"client4": "198.18.1.3"})}
    p = Placement(parse_hosts({"hosts": hosts}, "t"))
    assert p.generator_roles == ("client", "client2", "client10")
    assert p.plan_overrides() == ()  # an extra generator's address is its own, not the plan's


@pytest.mark.parametrize("hosts, words", [
    ({"client2": _remote("a", addresses={"client4": "198.18.1.2"})}, "needs a remote hosts.client"),
    ({"client": _remote("a"), "client2": {"ifaces": ["eth0"]}}, "must be remote"),
    ({"client": _remote("a"), "client2": _remote("b")}, "needs addresses.client4"),
    ({"client": _remote("a"), "client2": _remote("b", addresses={"server4": "1.2.3.4"})}, "client4"),
    ({"client17": _remote("a")}, "unknown role 'client17'"),
    ({"client": _remote("a", cache_dir="relative/dir")}, "cache_dir"),
    ({"client": {"ifaces": ["eth0"], "keep_engine": True}}, "only for a remote role"),
])
def test_bad_generator_entries_are_one_line(hosts, words):
    with pytest.raises(HostError) as ei:
        parse_hosts({"hosts": hosts}, "'h.toml'")
    line = ei.value.one_line()
    assert words in line and "\n" not in line


# -- report ------------------------------------------------------------------------------------
def test_report_shows_pct_of_line_rate_or_the_missing_reason():
    from fwlab.report.line_rate import render

    def trials(*metrics):
        return [full_trial({"trial_id": f"t{i}", "kind": "stream", "mode": "routed", "backend": "nftables",
                            "layout": "linear", "traffic": "engine", "tool": "engine", "ip_version": 4,
                            "size_bytes": 64, "rules": 100, "repetition": i + 1, "error": None, "metrics": m})
                for i, m in enumerate(metrics)]
    known = trials(*({"line_rate_pct": v, "line_rate_link": "dut:enp1s0f0", "line_rate_bps": 10e9,
                      "frame_size": 64} for v in (40.0, 50.0, 60.0)))
    html = render(known)
    assert "% of line rate" in html and "<td>50.0</td>" in html and "40.0–60.0" in html and "10 Gbit/s" in html
    miss = trials({"line_rate_pct": None, "line_rate_missing": "no link speed known (veth)"})
    assert "missing — no link speed known (veth)" in render(miss)
    assert render(trials({"throughput_bps": 1.0})) == ""


def test_chrony_tracking_line_and_latency_clock_warning():
    from fwlab.testbed.clock import ClockOffset, parse_chrony_tracking
    line = ("A9FEA97B,169.254.169.123,4,1700000000.123,0.000012345,-0.000003,0.000020,-12.5,0.001,0.05,"
            "0.000400,0.000150,64.2,Normal")
    c = parse_chrony_tracking(line)
    assert c["reference"] == "169.254.169.123" and c["stratum"] == 4 and c["leap_status"] == "Normal"
    assert c["system_time_offset_s"] == pytest.approx(12.345e-6)
    assert c["error_bound_s"] == pytest.approx(12.345e-6 + 200e-6 + 150e-6)
    with pytest.raises(ValueError):
        parse_chrony_tracking("a,b,c")
    hosts = {"client": _remote("10.0.0.1"), "server": _remote("10.0.0.2")}
    p = Placement(parse_hosts({"hosts": hosts}, "t"))
    p.clocks = {"client": ClockOffset(0.0, 300e-6, 600e-6, 9), "server": ClockOffset(0.0, 100e-6, 200e-6, 9)}
    assert "+-300 us" in p.latency_clock_warning()
    same = Placement(parse_hosts({"hosts": {"client": _remote("10.0.0.1"), "server": _remote("10.0.0.1")}}, "t"))
    assert same.latency_clock_warning() is None  # one host, one clock
    assert Placement(parse_hosts({"hosts": {"dut": {**_remote("10.0.0.9"), "ifaces": ["a", "b"]}}},
                                 "t")).latency_clock_warning() is None  # client and server both local


def test_remote_probe_scripts_never_exit_127_when_a_tool_is_absent(tmp_path):
    """A remote exit 127 means 'program missing' to SshHost.run; the probes' own 'absent' answers
    must use other codes (dash's 'command -v' of a missing name exits 127)."""
    import subprocess
    from fwlab.testbed import clock
    from fwlab.testbed.host import LocalHost

    class Probe(LocalHost):
        remote = True

    env_path = {"PATH": str(tmp_path)}  # no chronyc, ptp4l, sha256sum there
    for sh in ("dash", "bash"):
        import shutil
        if shutil.which(sh) is None:
            continue
        cp = subprocess.run([shutil.which(sh), "-c", "command -v chronyc >/dev/null 2>&1 || exit 3; exec chronyc"],
                            env=env_path, capture_output=True)
        assert cp.returncode == 3
    got = clock.sync_status(Probe())
    assert got["source"] in (None, "chrony")


# -- which tools a lab of remote hosts can run ---------------------------------------------------
_SUITE = """
name = "t"
mode = "routed"
backends = ["nftables"]
layouts = ["linear"]
rules = [0]
duration_s = 1
repetitions = 1
[[traffic]]
kind = "{kind}"
tool = "{tool}"
{extra}
"""
_FLOOD = '[[background]]\nkind = "udp_flood"\nrates_pps = [1000]\nframe_size = 64\n'


def _plan(kind, tool, extra=""):
    import tomllib

    from fwlab.suites import parse_suite
    from fwlab.run.plan import expand
    return expand(parse_suite(tomllib.loads(_SUITE.format(kind=kind, tool=tool, extra=extra)), "t"), None)


@pytest.mark.parametrize("kind, tool, extra, hosts, refused", [
    ("engine", "engine", "", {"client": _remote("a"), "server": _remote("b")}, None),
    ("tcp", "iperf3", "", {"client": _remote("a")}, None),
    ("conn_rate", "conn", "", {"client": _remote("a"), "server": _remote("b")}, None),
    ("conn_rate", "conn", "", {"dut": _remote("a", ifaces=["eth1", "eth2"])}, None),  # client and server local
    ("http", "curl", "", {"server": _remote("a")}, "tool 'curl' runs only on this machine"),
    ("tcp", "iperf3", _FLOOD, {"server": _remote("a")}, "from this machine's attacker namespace needs every role"),
    # a local attacker namespace cannot be cabled to a remote DUT (tests/unit/test_remote_attacker.py)
    ("tcp", "iperf3", _FLOOD, {"dut": _remote("a", ifaces=["eth1", "eth2"])}, "needs every role here"),
])
def test_remote_roles_only_for_tools_that_run_there(kind, tool, extra, hosts, refused):
    from fwlab.run.preflight import check_remote_roles
    plan, placement = _plan(kind, tool, extra), Placement(parse_hosts({"hosts": hosts}, "t"))
    check_remote_roles(plan, None)  # the namespace bed runs everything
    check_refusal(plan, placement, refused)


def check_refusal(plan, placement, refused: str | None, *also: str) -> None:
    """`check_remote_roles` lets `plan` through on `placement` (refused None), or refuses it in one
    line naming `refused`, docs/lab.md and every one of `also`."""
    from fwlab.errors import SuiteError
    from fwlab.run.preflight import check_remote_roles
    if refused is None:
        check_remote_roles(plan, placement)
        return
    with pytest.raises(SuiteError) as ei:
        check_remote_roles(plan, placement)
    line = ei.value.one_line()
    assert refused in line and "docs/lab.md" in line and "\n" not in line
    assert all(word in line for word in also), line


def test_local_ip_commands_in_a_namespace_use_ip_n():
    h = LocalHost()
    assert h._argv(["ip", "-s", "-j", "link", "show"], "fwl-x") == ["ip", "-n", "fwl-x", "-s", "-j", "link", "show"]
    assert h._argv(["nft", "-f", "-"], "fwl-x") == ["ip", "netns", "exec", "fwl-x", "nft", "-f", "-"]
    assert h._argv(["ip", "netns", "pids", "a"], "fwl-x") == ["ip", "netns", "exec", "fwl-x", "ip", "netns", "pids", "a"]
    assert h._argv(["ip", "link"], None) == ["ip", "link"]


def test_link_counters_are_read_and_parsed_in_one_place():
    import json as _json
    from types import SimpleNamespace

    from fwlab.testbed.linkseries import read_links

    seen = []
    st = {"rx": {"packets": 5, "bytes": 500, "dropped": 1}, "tx": {"packets": 7, "bytes": 700, "dropped": 0}}

    class Fake:
        def run(self, argv, ns=None, **kw):
            seen.append((argv, ns))
            return SimpleNamespace(stdout=_json.dumps([{"ifname": "c0", "stats64": st}, {"ifname": "lo", "stats64": st}]))
    got = read_links("fwl-c", ["c0", "gone"], host=Fake())
    assert seen == [(["ip", "-s", "-j", "link", "show"], "fwl-c")]
    assert got == {"c0": {"rx_packets": 5, "rx_bytes": 500, "rx_dropped": 1, "tx_packets": 7, "tx_bytes": 700,
                          "tx_dropped": 0}}
