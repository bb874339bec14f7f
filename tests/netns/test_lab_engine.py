"""fwlab-engine on remote hosts: a lab of separate sshd "machines" (tests/netns/sshlab.py
HostsLab), every role remote. fwlab ships its engine binary to the client and server hosts
(checked by SHA-256), runs it there through the same runner code as a local trial, and leaves
nothing behind unless the hosts file says keep_engine."""

import glob
import json
import os
import shutil
import subprocess
import time

import pytest

from sshlab import HostsLab, changed
from fwlab.runners.engine import run_trial
from fwlab.runners.engine_args import EngineTrial
from fwlab.runners.engine_binary import engine_source_dir, find_engine, place_engine
from fwlab.testbed.cargo_build import source_digest
from fwlab.testbed import Testbed, Topology, new_run_id
from fwlab.testbed.host import LocalHost
from fwlab.testbed.hosts import Placement, parse_hosts
from fwlab.testbed.ship import sha256_file
from fwlab.testbed.ssh import SshHost

if find_engine() is None:
    pytest.skip("fwlab-engine is not built", allow_module_level=True)


@pytest.fixture
def spawns(monkeypatch):
    """argv of every process spawned locally and over SSH."""
    calls = {"local": [], "ssh": []}
    lspawn, sspawn = LocalHost.spawn, SshHost.spawn

    def rec_l(self, argv, ns=None):
        calls["local"].append(list(argv))
        return lspawn(self, argv, ns)

    def rec_s(self, argv, ns=None):
        calls["ssh"].append((self.name, list(argv)))
        return sspawn(self, argv, ns)

    monkeypatch.setattr(LocalHost, "spawn", rec_l)
    monkeypatch.setattr(SshHost, "spawn", rec_s)
    return calls


def _trial(bed, **kw):
    return run_trial(bed, EngineTrial(duration_s=0.5, rate_pps=20000, **kw), 10000)


def test_engine_runs_on_the_remote_client_and_server_hosts(tmp_path, spawns):
    lab = HostsLab(tmp_path).up()
    try:
        before = {n: lab.state(n) for n in lab.names}
        digest = sha256_file(find_engine())
        with Placement(parse_hosts({"hosts": lab.hosts()}, "test")) as placement:
            with Testbed(Topology(run_id=new_run_id(), mode="routed"), placement=placement) as bed:
                assert bed.local_roles == ()
                m = _trial(bed)
                shipped = m.metrics["engine_shipped"]
                for role, n in (("client", "cli1"), ("server", "srv")):
                    assert shipped[role]["sha256"] == digest and not shipped[role]["cached"]
                    assert shipped[role]["path"] == f"{tmp_path}/cache-{n}/fwlab-engine-{digest}"
                    assert sha256_file(shipped[role]["path"]) == digest
                mt = m.metrics
                assert mt["offered_count"] > 0 and mt["forwarded_count"] > 0.9 * mt["offered_count"]
                assert mt["rx_pps"] > 0 and mt["server_if_rx_packets"] >= mt["forwarded_count"]
                # the second trial reuses the shipped binary (no second copy)
                m2 = _trial(bed, ip_version=6, frame_size=78)
                assert m2.metrics["forwarded_count"] > 0
                # two hosts' clocks: the latency is flagged unless the offset is tighter than it
                lc = mt["latency_clocks"]
                assert lc["same_clock"] is False and lc["uncertainty_s"] > 0
                flagged = any(f["code"] == "clocks-unsynced" for f in m.flags)
                assert flagged == (lc["uncertainty_s"] * 1e9 > mt["latency_ns"]["p50"])
        # sender on the client host, receiver on the server host, nothing engine-like locally
        where = {(h.split("@")[0], a[1]) for h, a in spawns["ssh"] if "fwlab-engine" in a[0]}
        assert where == {("client", "send"), ("server", "recv")}
        assert not [a for a in spawns["local"] if "fwlab-engine" in " ".join(a)]
        # nothing left on any host: binaries and the cache directory fwlab made are gone
        after = {n: lab.state(n) for n in lab.names}
        assert changed(before, after) == []
        assert after["cli1"]["cache"] is None and after["srv"]["cache"] is None
        assert lab.wait_idle() == {n: [] for n in lab.names}
    finally:
        lab.down()


def test_keep_engine_leaves_the_binary_and_the_next_run_reuses_it(tmp_path):
    lab = HostsLab(tmp_path).up()
    try:
        digest = sha256_file(find_engine())
        hosts = lab.hosts(keep_engine=True)
        for expect_cached in (False, True):
            with Placement(parse_hosts({"hosts": hosts}, "test")) as placement:
                with Testbed(Topology(run_id=new_run_id(), mode="routed"), placement=placement) as bed:
                    m = _trial(bed)
                    assert m.metrics["engine_shipped"]["client"]["cached"] is expect_cached
                    assert m.metrics["engine_shipped"]["client"]["kept"] is True
            assert lab.state("cli1")["cache"] == [f"fwlab-engine-{digest}"]
        # a damaged cached copy is not trusted: replaced, verified by hash
        (tmp_path / "cache-cli1" / f"fwlab-engine-{digest}").write_bytes(b"not the engine")
        with Placement(parse_hosts({"hosts": lab.hosts()}, "test")) as placement:
            with Testbed(Topology(run_id=new_run_id(), mode="routed"), placement=placement) as bed:
                m = _trial(bed)
                assert m.metrics["engine_shipped"]["client"]["cached"] is False
                assert m.metrics["forwarded_count"] > 0
        assert lab.state("cli1")["cache"] == []  # keep_engine off: removed (the directory was there)
    finally:
        lab.down()


def _cargo_here() -> bool:
    return bool(shutil.which("cargo")) or os.access(os.path.expanduser("~/.cargo/bin/cargo"), os.X_OK)


def test_the_engine_is_built_with_cargo_on_a_lab_host(tmp_path, monkeypatch):
    """The build path (testbed.cargo_build) over real SSH against one lab host. The lab's hosts
    share this machine's architecture, so FWLAB_SHIP=build forces what a host of another
    architecture gets: sources packed and sent, cargo build --offline there (the crates are in
    this machine's cargo cache, which the lab host shares), the build directory removed.
    A release build takes 1-3 min on this project's 2-core test machine (164 s measured at load
    5.7), too long for ``make test``: it runs only with FWLAB_TEST_CARGO_BUILD=1."""
    if os.environ.get("FWLAB_TEST_CARGO_BUILD") != "1":
        pytest.skip("a release build of the engine takes minutes: set FWLAB_TEST_CARGO_BUILD=1 to run it")
    if not _cargo_here():
        pytest.skip("no cargo on this machine (the lab hosts are this machine's namespaces)")
    local = find_engine()
    src = engine_source_dir(local)
    if not (src / "Cargo.toml").is_file():
        pytest.skip(f"no engine sources beside {local}")
    lab = HostsLab(tmp_path).up()
    try:
        before = lab.state("cli1")
        builds_before = set(glob.glob("/var/tmp/fwlab-build.*"))
        monkeypatch.setenv("FWLAB_SHIP", "build")
        entry = lab.hosts()["client"]
        with Placement(parse_hosts({"hosts": {"client": entry}}, "test")) as placement:
            host = placement.hosts["client"]
            t0 = time.monotonic()
            s = place_engine(host, placement.entry("client"), local)
            print(f"engine built on the lab host in {time.monotonic() - t0:.0f} s")
            assert (s.method, s.cached) == ("built", False) and "FWLAB_SHIP=build" in s.why_built
            assert s.path == f"{entry['cache_dir']}/fwlab-engine-src-{source_digest(src)}"
            assert s.sha256 == sha256_file(s.path)  # the lab host shares this file system
            out = host.run([s.path, "version"], timeout_s=30).stdout
            assert json.loads(out)["version"] == json.loads(
                subprocess.run([local, "version"], capture_output=True, text=True, check=True).stdout)["version"]
            assert set(glob.glob("/var/tmp/fwlab-build.*")) == builds_before  # build directory gone
        assert lab.state("cli1") == before  # the binary and the cache directory fwlab made: gone
        assert lab.wait_idle()["cli1"] == []
    finally:
        lab.down()
