"""Remote hosts without a network: quoting for the remote shell, the hosts file's one-line errors,
clock-offset arithmetic, remote metadata parsing, and SSH command lines."""

import json
import subprocess
import sys

import pytest

from fwlab.errors import HostError
from fwlab.results.metadata import parse_remote_metadata
from fwlab.suites import parse_suite
from fwlab.run.plan import check_suite
from fwlab.errors import SuiteError
from fwlab.testbed.clock import (ClockOffset, ClockSample, offset_from_samples, one_way_correction_s,
                                 parse_remote_time)
from fwlab.testbed.hosts import Placement, load_hosts, parse_hosts
from fwlab.testbed.ssh import RUN_SCRIPT, SPAWN_SCRIPT, SshHost, SshTarget, remote_argv, remote_command
from fwlab.testbed.topology import Topology

ODD = ["plain", "a b", "'", '"', "$HOME", "`id`", "$(id)", "*", ";", "&&", "|", "\\", "", "-x", "--",
       "é ü", "tab\there", "{a,b}", "~", "#comment", "!"]


# -- quoting ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_remote_command_reaches_argv_unchanged_through_a_login_shell(shell):
    """What ssh hands the remote login shell, run by a real local shell, gives back exactly argv."""
    argv = [sys.executable, "-c", "import json,sys; print(json.dumps(sys.argv[1:]))", *ODD]
    cmd = remote_command(RUN_SCRIPT, ["0", *argv])
    out = subprocess.run([shell, "-c", cmd], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == ODD


def test_run_script_applies_the_timeout_and_passes_the_exit_status():
    cmd = remote_command(RUN_SCRIPT, ["0.3", "sleep", "5"])
    assert subprocess.run(["sh", "-c", cmd], timeout=10).returncode == 124
    cmd = remote_command(RUN_SCRIPT, ["5", "sh", "-c", "exit 7"])
    assert subprocess.run(["sh", "-c", cmd], timeout=10).returncode == 7


def test_spawn_script_stops_the_command_when_its_stdin_ends():
    """The watchdog: closing the session's stdin (fwlab gone, connection lost) stops argv."""
    cmd = remote_command(SPAWN_SCRIPT, ["sh", "-c", "echo up; exec sleep 30"])
    p = subprocess.Popen(["sh", "-c", cmd], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "up"
    p.stdin.write("INT\n")
    p.stdin.flush()
    assert p.wait(timeout=5) != 0  # killed by SIGINT, not timed out
    p = subprocess.Popen(["sh", "-c", cmd], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "up"
    p.stdin.close()
    assert p.wait(timeout=8) != 0


def test_remote_argv_adds_namespace_and_env():
    assert remote_argv(["nft", "-f", "-"], None) == ["nft", "-f", "-"]
    assert remote_argv(["nft", "-f", "-"], "fw") == ["ip", "netns", "exec", "fw", "nft", "-f", "-"]
    assert remote_argv(["x"], "fw", {"B": "2", "A": "1"}) == ["ip", "netns", "exec", "fw", "env", "A=1", "B=2", "x"]


def test_newlines_in_arguments_are_refused():
    with pytest.raises(HostError, match="newline"):
        remote_command(RUN_SCRIPT, ["echo", "a\nb"])


def test_ssh_argv_has_batch_mode_timeouts_key_and_multiplexing(tmp_path):
    key = tmp_path / "id"
    key.write_text("k")
    h = SshHost(name="dut", target=SshTarget("root@192.0.2.7", port=2200, key=str(key), known_hosts="/kh",
                                             ssh_config="none", options=("ProxyJump=jump",),
                                             connect_timeout_s=4))
    a = h.ssh_argv()
    joined = " ".join(a)
    for want in ("-F none", "-p 2200", "BatchMode=yes", "ConnectTimeout=4", "ServerAliveInterval=5",
                 f"-i {key}", "IdentitiesOnly=yes", "UserKnownHostsFile=/kh", "StrictHostKeyChecking=yes",
                 "ProxyJump=jump"):
        assert want in joined
    assert "ControlPath" not in joined  # not connected yet
    h._dir = str(tmp_path)
    assert f"ControlPath={tmp_path}/cm" in " ".join(h.ssh_argv())
    assert "ControlMaster=yes" in " ".join(h.ssh_argv(master=True))
    assert "ControlMaster=no" in " ".join(h.ssh_argv())


def test_commands_on_a_closed_connection_are_one_line_host_errors():
    h = SshHost(name="dut", target=SshTarget("root@192.0.2.7"))
    with pytest.raises(HostError) as ei:
        h.run(["true"])
    assert "lost the SSH connection to host dut" in ei.value.one_line() and ei.value.fix


# -- the hosts file ----------------------------------------------------------------------------------
DUT = {"ssh": "root@198.51.100.7", "ifaces": ["eth1", "eth2"]}


@pytest.mark.parametrize("hosts,message", [
    ({"fw": {}}, "unknown role 'fw'"),
    ({"dut": {**DUT, "ssh": "-oProxyCommand=x"}}, "is not [user@]host"),
    ({"dut": {**DUT, "ssh": "root@host name"}}, "is not [user@]host"),
    ({"dut": {"ssh": "root@h"}}, "remote role 'dut' needs ifaces"),
    ({"dut": {**DUT, "ifaces": ["eth1"]}}, "needs 2 interface(s) (client side, server side), got 1"),
    ({"client": {"ifaces": ["a", "b"]}}, "needs 1 interface(s), got 2"),
    ({"client": {"port": 2222}}, "port: only for a remote role"),
    ({"client": {"ns": "x", "key": "/k"}}, "key, ns: only for a remote role"),
    ({"dut": {**DUT, "port": 0}}, "port"),
    ({"dut": {**DUT, "key": "/nonexistent/key"}}, "hosts.dut.key file /nonexistent/key does not exist"),
    ({"dut": {**DUT, "ssh_options": ["ControlPath=/tmp/x"]}}, "set by fwlab"),
    ({"dut": {**DUT, "ssh_options": ["ProxyJump"]}}, "is not Key=Value"),
    ({"dut": {**DUT, "addresses": {"client4": "198.18.1.9"}}}, "addresses.client4 is not one of"),
    ({"dut": {**DUT, "addresses": {"dut_client_side4": "300.1.1.1"}}}, "is not an IP address"),
    ({"dut": {**DUT, "ifaces": ["an-interface-name-too-long", "x"]}}, "not a Linux interface name"),
    ({"dut": {**DUT, "sshh": "x"}}, "Extra inputs"),
    ({"dut": {**DUT, "host_key_checking": "no"}}, "host_key_checking"),
])
def test_bad_hosts_entries_are_one_line_errors(hosts, message):
    with pytest.raises(HostError) as ei:
        parse_hosts({"hosts": hosts}, "'h.toml'")
    line = ei.value.one_line()
    assert "\n" not in line and line.startswith("hosts file 'h.toml' is invalid") and message in line
    assert "fix:" in line


def test_a_good_hosts_file_and_its_placement(tmp_path):
    key = tmp_path / "id"
    key.write_text("k")
    f = tmp_path / "hosts.toml"
    f.write_text(f'[hosts.dut]\nssh = "root@198.51.100.7"\nport = 2222\nkey = "{key}"\nns = "fw"\n'
                 f'ifaces = ["enp1s0", "enp2s0"]\naddresses = {{ dut_client_side4 = "198.18.1.253" }}\n\n'
                 f'[hosts.client]\nifaces = ["enp3s0"]\n')
    entries, text = load_hosts(f)
    assert "root@198.51.100.7" in text
    p = Placement(entries)
    assert p.remote_roles == ("dut",) and p.is_remote("dut") and not p.is_remote("client")
    assert not p.is_remote("server")
    t = entries["dut"].target()
    assert (t.destination, t.port, t.key) == ("root@198.51.100.7", 2222, str(key))
    topo = Topology(run_id="abcdef", plan_overrides=p.plan_overrides())
    assert topo.plan.dut_client_side4 == "198.18.1.253" and topo.plan.client4 == "198.18.1.1"


def test_hosts_file_errors_name_the_file(tmp_path):
    with pytest.raises(HostError, match="does not exist"):
        load_hosts(tmp_path / "none.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[hosts.dut\n")
    with pytest.raises(HostError, match="bad.toml is not valid TOML"):
        load_hosts(bad)


def test_a_suite_may_carry_hosts_and_they_are_checked():
    base = {"name": "s", "traffic": [{"kind": "tcp"}]}
    s = parse_suite({**base, "hosts": {"dut": DUT}}, "t")
    assert s.hosts["dut"]["ssh"] == "root@198.51.100.7"
    with pytest.raises(SuiteError) as ei:
        check_suite(parse_suite({**base, "hosts": {"dut": {"ssh": "root@h"}}}, "t"))
    assert "needs ifaces" in ei.value.one_line() and "\n" not in ei.value.one_line()


# -- clocks ------------------------------------------------------------------------------------------
def test_offset_uses_the_fastest_round_trip():
    # remote clock 2.5 s ahead; the slow sample's reading is skewed by queuing
    samples = [ClockSample(100.0, 102.8, 100.4),   # rtt 0.4 s
               ClockSample(101.0, 103.501, 101.002),  # rtt 2 ms: midpoint 101.001
               ClockSample(102.0, 104.6, 102.2)]
    off = offset_from_samples(samples)
    assert off.offset_s == pytest.approx(2.5)
    assert off.rtt_s == pytest.approx(0.002) and off.uncertainty_s == pytest.approx(0.001)
    assert off.to_local(103.501) == pytest.approx(101.001)


def test_offset_bound_holds_for_any_reading_inside_the_round_trip():
    """Whenever the remote clock was read inside [sent, received], the true offset lies within
    offset_s +- uncertainty_s."""
    true = -7.25
    for frac in (0.0, 0.1, 0.5, 0.9, 1.0):
        t0, t1 = 50.0, 50.010
        s = ClockSample(t0, t0 + frac * (t1 - t0) + true, t1)
        off = offset_from_samples([s])
        assert abs(off.offset_s - true) <= off.uncertainty_s + 1e-9


def test_clock_parsing_and_resolution():
    assert parse_remote_time("1700000000.123456789\n") == (pytest.approx(1700000000.123456789), pytest.approx(1e-9))
    assert parse_remote_time("1700000000.N") == (1700000000.0, 1.0)  # BSD date: no %N
    with pytest.raises(ValueError):
        parse_remote_time("Tue Jan 1")
    with pytest.raises(ValueError):
        offset_from_samples([])
    with pytest.raises(ValueError):
        offset_from_samples([ClockSample(2.0, 1.0, 1.0)])
    off = offset_from_samples([ClockSample(10.0, 10.0, 10.2)], resolution_s=1.0)
    assert off.uncertainty_s == pytest.approx(1.1)


def test_one_way_correction_between_two_hosts():
    sender = ClockOffset(0.010, 0.0, 0.0, 1)  # sender clock 10 ms ahead of ours
    receiver = ClockOffset(-0.005, 0.0, 0.0, 1)  # receiver 5 ms behind
    # a packet taking 1 ms: sent at local 0 (sender reads 0.010), received at local 0.001
    # (receiver reads -0.004): raw difference -0.014, corrected: -0.014 - (-0.015) = 0.001
    raw = -0.004 - 0.010
    assert raw - one_way_correction_s(sender, receiver) == pytest.approx(0.001)


# -- metadata ----------------------------------------------------------------------------------------
def test_remote_metadata_parsing():
    text = ("hostname=fw1\nkernel=6.1.0-18-amd64\nkernel_version=#1 SMP\nmachine=x86_64\nos=Linux\n"
            "cpu_model=Intel Xeon\ncpus=8\nmemory_kib=16000000\nbpf_jit_enable=1\ncpufreq_governor=\n"
            "tool:nft=nftables v1.0.6 (Lester Gooch #5)\ntool:ipset=sh: 1: ipset: not found\ntool:iperf3=\n")
    m = parse_remote_metadata(text)
    assert m["hostname"] == "fw1" and m["kernel"] == "6.1.0-18-amd64" and m["cpus"] == 8
    assert m["memory_kib"] == 16000000 and m["cpufreq_governor"] is None
    assert m["tools"] == {"nft": "nftables v1.0.6 (Lester Gooch #5)", "ipset": None, "iperf3": None}
