"""The DUT role on a host reached only over SSH: a real OpenSSH server in the DUT's namespace,
a key made for the test, the nftables backend loading and counting over SSH, real traffic.

The "remote host" is a namespace this test sets up like a user sets up a firewall box
(tests/netns/sshlab.py); fwlab gets only the hosts file and must never enter that namespace
itself: every local command is recorded and checked for its name.
"""

import json
import signal
import time

import pytest

from probes import tcp_probe, udp_probe
from sshlab import SshLab, record_local
from fwlab.dut import DutContext, get_backend
from fwlab.errors import HostError
from fwlab.run.start import start as start_run
from fwlab.rules import generate
from fwlab.suites import parse_suite
from fwlab.testbed import Testbed, Topology, new_run_id
from fwlab.testbed.host import CommandTimeout, LocalHost
from fwlab.testbed.hosts import Placement, load_hosts, parse_hosts
from fwlab.testbed.ssh import SshHost


@pytest.fixture
def lab(tmp_path):
    lab = SshLab(tmp_path).up()
    try:
        yield lab
    finally:
        lab.down()


@pytest.fixture
def local_calls(monkeypatch):
    """Every argv this process runs through LocalHost (run and spawn)."""
    return record_local(monkeypatch)


@pytest.fixture
def ssh_calls(monkeypatch):
    calls: list[list[str]] = []
    run = SshHost.run

    def rec_run(self, argv, ns=None, **kw):
        calls.append(list(argv))
        return run(self, argv, ns, **kw)

    monkeypatch.setattr(SshHost, "run", rec_run)
    return calls


def test_stream_trial_with_the_dut_reached_only_over_ssh(lab, tmp_path, local_calls, ssh_calls):
    hosts_file = tmp_path / "hosts.toml"
    hosts_file.write_text(lab.hosts_toml())
    hosts, _ = load_hosts(hosts_file)
    suite = parse_suite({"name": "remote-ssh", "mode": ["routed"], "backends": ["nftables"],
                         "rules": [100], "repetitions": 1, "duration_s": 2, "settle_s": 0.1,
                         "traffic": [{"kind": "tcp", "tool": "iperf3"}]}, "test")
    rec = start_run(suite, "", tmp_path / "results", quiet=True, hosts=hosts)

    trials = [json.loads(x) for x in (rec.path / "trials.jsonl").read_text().splitlines()]
    assert len(trials) == 1 and trials[0]["error"] is None, trials[0].get("error")
    t = trials[0]
    assert t["metrics"]["throughput_bps"] > 0
    assert t["metrics"]["server_if_rx_packets"] > 0
    assert t["extra"]["rendered_lines"] > 100 and len(t["ruleset_digest"]) == 64 and t["rule_load_s"] > 0
    # counters were read from the remote DUT: the permit rule counted the trial's packets
    assert t["dut_counters_after"]["permit"] - t["dut_counters_before"]["permit"] > 1000
    assert t["dut_counters_after"]["deny"] == 0

    # the DUT's commands went over SSH; nothing local entered the DUT's namespace
    assert ["nft", "-f", "-"] in ssh_calls
    assert ["nft", "list", "ruleset"] in ssh_calls  # counters and listing read on the remote DUT
    assert not [c for c in local_calls if lab.dut_ns in " ".join(c)], "fwlab entered the DUT namespace locally"

    run = json.loads((rec.path / "run.json").read_text())
    remote = run["remote_hosts"]
    assert remote["metadata"]["dut"]["kernel"] and remote["metadata"]["dut"]["tools"]["nft"].startswith("nftables")
    off = remote["clock_offsets"]["dut"]
    # same machine, same clock: the true offset is 0, so the estimate must lie within its bound
    assert abs(off["offset_s"]) <= off["uncertainty_s"] + 1e-6 and off["rtt_s"] > 0
    bed = run["beds"][0]
    assert bed["placement"]["dut"]["ifaces"] == ["eth1", "eth2"]
    assert bed["placement"]["dut"]["host"]["ssh"] == "root@198.19.254.2"
    assert bed["backend_version"].startswith("nftables")
    assert "dut" in bed["clock_offsets"]
    # the flush ran over SSH at the end of the bed; the borrowed cables are back here
    assert lab.sh(lab.dut_ns, "nft", "list", "ruleset").stdout.strip() == ""
    for dev in (lab.client_end, lab.server_end):
        assert LocalHost().run(["ip", "link", "show", dev], check=False).returncode == 0


@pytest.mark.parametrize("ipv", [4, 6])
def test_ssh_dut_passes_permit_and_drops_a_deny_entry(lab, ipv):
    with Placement(parse_hosts({"hosts": lab.hosts()}, "test")) as placement:
        with Testbed(Topology(run_id=new_run_id(), mode="routed"), placement=placement) as bed:
            assert bed.local_roles == ("client", "server") and bed.ns("dut") is None
            be = get_backend("nftables")
            ctx = DutContext(bed.host_for("dut"), bed.ns("dut"), "routed")
            assert isinstance(ctx.host, SshHost)
            plan = bed.topo.plan
            rs = generate(1000, "linear", ip_version=ipv, client_net=plan.client_net(ipv),
                          server_net=plan.server_net(ipv), seed=5)
            res = be.load(ctx, rs)
            assert len(res.digest) == 64
            # what the kernel in the DUT's namespace holds, looked at from outside fwlab
            assert lab.sh(lab.dut_ns, "nft", "list", "chain", "ip" if ipv == 4 else "ip6",
                          "fwlab", "forward").stdout.count("deny-") == 1000

            client, server = plan.client(ipv), plan.server(ipv)
            assert udp_probe(bed, client, server, 7000) == 20, "permitted UDP must pass"
            assert tcp_probe(bed, client, server, 7001), "permitted TCP must connect"

            entry = next(e for e in rs.entries if e.proto == "udp")
            bed.sh("client", "ip", "addr", "add", f"{entry.src}/{32 if ipv == 4 else 128}", "dev",
                   bed.topo.client_if, *(["nodad"] if ipv == 6 else []))
            before = be.counters(ctx)
            assert udp_probe(bed, entry.src, server, entry.dport) == 0, "deny entry must drop"
            after = be.counters(ctx)
            assert after["deny"] - before["deny"] >= 20
            assert after["permit"] > 0
            # link counters of the remote DUT's own interfaces, read over SSH
            assert bed.link_counters("dut", bed.topo.dut_client_if)["rx_packets"] > 0
            be.flush(ctx)


def test_remote_namespace_spawn_stop_put_file_and_timeout(lab):
    with Placement(parse_hosts({"hosts": {"dut": lab.dut_entry()}}, "test")) as placement:
        h = placement.hosts["dut"]
        # ns on the remote side: the mgmt namespace, entered by the remote host's ip netns exec
        assert "198.19.254.1/30" in h.run(["ip", "-br", "addr"], ns=lab.mgmt_ns).stdout
        assert "198.19.254.1/30" not in h.run(["ip", "-br", "addr"]).stdout
        # arguments arrive unchanged through the remote shell
        odd = ["a b", "'", '"', "$HOME", "*", ";", "", "-x"]
        out = h.run(["python3", "-c", "import json,sys; print(json.dumps(sys.argv[1:]))", *odd]).stdout
        assert json.loads(out) == odd
        path = h.put_file(b"fwlab\x00bytes", "blob.bin")
        assert h.run(["od", "-c", path]).stdout.count("\\0") == 1
        # a spawned process: output comes back, stop() ends its whole process group remotely
        def running(args: str) -> int:  # processes whose command line is exactly ``args``
            return [ln.strip() for ln in h.run(["ps", "-eo", "args"]).stdout.splitlines()].count(args)

        sp = h.spawn(["sh", "-c", "echo started; sleep 60.7 & sleep 60.7; wait"])
        deadline = time.monotonic() + 10
        while running("sleep 60.7") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        out, _ = sp.stop(wait_s=3)
        assert out.startswith("started")
        assert running("sleep 60.7") == 0
        # SIGINT reaches the remote tool (tools such as trafgen print their totals on SIGINT)
        sp = h.spawn(["sleep", "61.3"])
        while running("sleep 61.3") < 1 and time.monotonic() < deadline + 5:
            time.sleep(0.05)
        sp.stop(sig=signal.SIGINT, wait_s=3)
        assert sp.proc.returncode == 128 + signal.SIGINT  # the wrapper's exit: killed by SIGINT, not TERM
        # a command that outlives its time-out is killed on both sides
        with pytest.raises(CommandTimeout, match="did not finish within 1"):
            h.run(["sleep", "30.9"], timeout_s=1)
        assert running("sleep 30.9") == 0
    assert not h.connected()


def test_a_dead_ssh_connection_is_one_error_line_and_cleanup_still_runs(lab):
    with Placement(parse_hosts({"hosts": lab.hosts()}, "test")) as placement:
        bed = Testbed(Topology(run_id=new_run_id(), mode="routed"), placement=placement)
        with pytest.raises(HostError) as ei:
            with bed:
                sp = bed.host_for("dut").spawn(["sleep", "60"])
                lab.kill_sshd()  # the DUT host goes away mid-run
                bed.sh("dut", "nft", "list", "ruleset")
        line = ei.value.one_line()
        assert "\n" not in line and "lost the SSH connection to host dut@" in line and "fix:" in line
        assert sp.proc.poll() is not None
    # teardown ran: the bed's namespaces are gone (conftest checks) and the cables are back
    for dev in (lab.client_end, lab.server_end):
        assert LocalHost().run(["ip", "link", "show", dev], check=False).returncode == 0


def test_unreachable_or_untrusted_host_is_one_error_line(lab, tmp_path):
    wrong = tmp_path / "wrong_known_hosts"
    wrong.write_text(f"[198.19.254.2]:2222 {(tmp_path / 'id_ed25519.pub').read_text()}")
    cases = [(lab.dut_entry(known_hosts=str(wrong)), "known_hosts"),
             (lab.dut_entry(port=2223), "port 2223")]
    for entry, fix_mentions in cases:
        with pytest.raises(HostError) as ei:
            Placement(parse_hosts({"hosts": {"dut": entry}}, "test")).open()
        line = ei.value.one_line()
        assert "\n" not in line and line.startswith("cannot connect to host dut@root@198.19.254.2")
        assert fix_mentions in ei.value.fix
