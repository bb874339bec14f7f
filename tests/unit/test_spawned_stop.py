"""Stopping background processes from several threads (probes during a load share the iperf3
runner with the load: each failure path stops servers).

Before the fix, two threads in ``Spawned.stop`` both read the same pipes and one closed them
under the other (OSError EBADF, a traceback that ended a seed-004 run); and a failed probe
stopped every iperf3 server of the bed, the load's too ("the server has terminated")."""

from __future__ import annotations

import subprocess
import sys
import threading
from dataclasses import dataclass

from fwlab.runners.iperf3 import Iperf3
from fwlab.testbed.host import Spawned
from fwlab.testbed.topology import Topology


def _sleeper() -> subprocess.Popen:
    code = "import sys, time; sys.stdout.write('x' * 200000); sys.stdout.flush(); time.sleep(30)"
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def test_stop_from_several_threads_reads_once_and_returns_the_same_output():
    for _ in range(5):
        sp = Spawned(_sleeper(), None, ["sleeper"])
        got, errors = [], []

        def stop() -> None:
            try:
                got.append(sp.stop())
            except Exception as exc:  # the failure this test is about: EBADF from a second reader
                errors.append(exc)

        threads = [threading.Thread(target=stop) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert errors == [] and len(got) == 4
        assert all(g == got[0] for g in got)
        assert sp.proc.poll() is not None


def test_stop_twice_returns_the_first_output():
    sp = Spawned(_sleeper(), None, ["sleeper"])
    first = sp.stop()
    assert sp.stop() == first


@dataclass
class _Bed:
    topo: Topology

    def ns(self, role):
        return self.topo.ns(role)

    def host_for(self, role):
        return self

    def forget(self, sp):
        pass


def test_iperf3_stop_on_ports_leaves_the_other_servers_running():
    bed = _Bed(Topology(run_id="abc123"))
    r = Iperf3()
    for port in (5201, 5202, 5203):
        r._servers[("server", bed.ns("server"), port, 4)] = Spawned(_sleeper(), bed.ns("server"), [])
    load = r._servers[("server", bed.ns("server"), 5201, 4)]
    probe = r._servers[("server", bed.ns("server"), 5203, 4)]
    try:
        r.stop(bed, ports=[5203])  # the probe's client failed: only its server restarts
        assert probe.proc.poll() is not None and load.proc.poll() is None
        assert sorted(p for _, _, p, _ in r._servers) == [5201, 5202]
    finally:
        r.stop(bed)
    assert r._servers == {} and load.proc.poll() is not None


@dataclass
class _SpawningBed(_Bed):
    """Spawns a sleeper for each iperf3 server and says every port is listening."""

    def __post_init__(self):
        self.spawned: list[list[str]] = []

    def spawn(self, args, ns=None):
        self.spawned.append(args)
        return Spawned(_sleeper(), ns, args)

    def sh(self, role, *args, check=True):
        return subprocess.CompletedProcess(args, 0, stdout="LISTEN 0 4096 *:5201 *:*\n", stderr="")


def test_a_port_serves_one_ip_version_at_a_time(monkeypatch):
    """An iperf3 -6 server beside a -4 one on the same port failed IPv6 trials with a window
    ('unable to start stream listener: Address already in use'): a trial of the other version
    replaces the port's server, and one of the same version reuses it."""
    monkeypatch.setattr("fwlab.runners.iperf3.require_tool", lambda name: None)
    bed = _SpawningBed(Topology(run_id="abc123"))
    r = Iperf3()
    try:
        r._start_port(bed, 5201, "server", 4)
        v4 = r._servers[("server", bed.ns("server"), 5201, 4)]
        r._start_port(bed, 5201, "server", 4)
        assert len(bed.spawned) == 1 and "-4" in bed.spawned[0]
        r._start_port(bed, 5202, "server", 4)  # another port: its own server
        r._start_port(bed, 5201, "server", 6)
        assert "-6" in bed.spawned[-1] and v4.proc.poll() is not None
        assert sorted(k[2:] for k in r._servers) == [(5201, 6), (5202, 4)]
    finally:
        r.stop(bed)
    assert r._servers == {}
