"""The connection runner: TCP connection capacity and connection setup/tear-down rate through
the DUT, driven by fwlab-engine's ``conn-server`` / ``conn-hold`` / ``conn-rate``.

Owns: preparing the client and server namespaces for many connections (extra client addresses
from the bed's client subnet, per-namespace port range and backlogs), reading and flushing the
DUT's connection table, the engine command lines, the two measurers the
searches call (its options are runners.conn_options, the reading of its documents
runners.conn_counts), and the runner (traffic kinds ``conn_rate`` and ``conn_capacity``, record kind
``connections``). Never touches the firewall rules or the bed's construction; the one
host-global change (the connection-table limit, only when a suite allows it) goes through
``fwlab.testbed.host_sysctl``.

Remote roles (a hosts file): the client and server ends run on their own hosts over SSH, the
engine shipped there (``runners.engine_binary.engine_on``), ready and held files in the host's scratch
directory. The extra client addresses it adds on a remote client host are removed when fwlab
lets go of the host (normal end, error, Ctrl-C, SIGTERM). The port range and backlog sysctls are
never written on a remote host (as for a tuning profile, ``testbed.tuning``): their values there
are read and recorded as not applied, so the host is left as the hosts file handed it over.

What is counted (intended / offered / forwarded, as for packets):
- rate: intended = rate x duration transactions, offered = started (connect called),
  forwarded = succeeded (full echo and the server's FIN). A failed transaction is a connect
  timeout, refusal, reset, short reply or reply timeout (RFC 9411: < 0.001 % may fail).
  Generator-side errors (no descriptor, no local port) are not DUT failures: they lower offered.
- capacity: intended = connections asked for, offered = started, forwarded = connections that
  were still open after the hold and echoed their probe byte (every connection with
  ``probe_every = 1``).

The DUT's connection table (``nf_conntrack_count``) is flushed before each trial (``conntrack
-F`` in the DUT namespace) so one trial's TIME_WAIT entries (120 s) do not fill the table for
the next; conntrack is only active in the DUT when its rule set uses it (the stateful shortcut).
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from fwlab.dut.memory import parse_meminfo
from fwlab.errors import RunnerError
from fwlab.runners.conn_counts import hold_trial_result, rate_trial_result, slim
from fwlab.runners.conn_options import MAX_ADDRESSES, workers_for
from fwlab.runners.engine import wait_ready
from fwlab.runners.engine_binary import engine_on, engine_unavailable, engine_version, find_engine
from fwlab.search.measurer import TrialResult
from fwlab.testbed.cpuseries import PROC_STAT, read_proc_stat
from fwlab.testbed.netstat import SNMP, read_counters

if TYPE_CHECKING:
    from fwlab.testbed.bed import Testbed

PORT_BASE = 5601
FIRST_EXTRA_HOST = 10  #: extra client addresses start at .10 of the client subnet
READY_TIMEOUT_S = 10.0
CLIENT_SYSCTLS = {"net.ipv4.ip_local_port_range": "1024 65535"}
SERVER_SYSCTLS = {"net.core.somaxconn": "65535", "net.ipv4.tcp_max_syn_backlog": "65535"}
CONNTRACK_KEYS = ("nf_conntrack_max", "nf_conntrack_buckets", "nf_conntrack_count")


# -- the bed --------------------------------------------------------------------------------------
def extra_addresses(bed: "Testbed", ip_version: int, n: int) -> list[str]:
    """``n`` client source addresses from the client subnet (.10, .11, ... / ::a, ::b, ...)."""
    net = ipaddress.ip_network(bed.topo.plan.client_net(ip_version))
    out = []
    for k in range(n):
        a = net.network_address + FIRST_EXTRA_HOST + k
        if a not in net or a == net.broadcast_address:
            raise RunnerError(f"the client subnet {net} has no room for {n} extra addresses",
                              fix=f"ask for at most {MAX_ADDRESSES} addresses")
        out.append(str(a))
    reserved = {bed.topo.plan.client(ip_version), bed.topo.plan.server(ip_version)}
    dut = bed.topo.plan.dut_client_side4 if ip_version == 4 else bed.topo.plan.dut_client_side6
    reserved.add(str(dut) if dut else "")
    clash = reserved & set(out)
    if clash:
        raise RunnerError(f"extra client addresses clash with the bed's {sorted(clash)}", fix="ask for fewer addresses")
    return out


def prepare_bed(bed: "Testbed", need: dict[int, int]) -> dict:
    """Extra client addresses (per IP version), per-namespace port range and backlogs (in the
    namespaces this process created; a remote role's are read and listed under
    ``sysctls_not_applied``). Idempotent per bed: returns what it set, for the record."""
    info: dict[str, Any] = {"addresses": {}, "sysctls": {}}
    for ipv, n in sorted(need.items()):
        addrs = extra_addresses(bed, ipv, n)
        plen = bed.topo.plan.client_net(ipv).split("/")[1]
        dev = bed.dev("client", bed.topo.client_if)
        for a in addrs:
            args = ["ip", "addr", "add", f"{a}/{plen}", "dev", dev]
            if ipv == 6:
                args.append("nodad")
            cp = bed.sh("client", *args, check=False)
            if cp.returncode != 0 and "File exists" not in cp.stderr:
                raise RunnerError(f"cannot add client address {a}: {cp.stderr.strip()}", fix="run 'fwlab clean'")
            if cp.returncode == 0 and bed.is_remote("client"):
                _undo_at_close(bed, "client", ["ip", "addr", "del", f"{a}/{plen}", "dev", dev])
        info["addresses"][str(ipv)] = addrs
    info["sysctls_not_applied"] = {}
    for role, table in (("client", CLIENT_SYSCTLS), ("server", SERVER_SYSCTLS)):
        for k, v in table.items():
            if bed.is_remote(role):  # a remote host's settings are the hosts file's: read, never written
                cp = bed.sh(role, "sysctl", "-n", k, check=False)
                now = " ".join(cp.stdout.split()) if cp.returncode == 0 else "unreadable"
                info["sysctls_not_applied"][f"{role}:{k}"] = f"remote host left as handed over (it has {now})"
                continue
            bed.sh(role, "sysctl", "-q", "-w", f"{k}={v}")
            info["sysctls"][f"{role}:{k}"] = v
    # Let the DUT and the server learn the new addresses (bridge: ARP straight from the server).
    for ipv, addrs in need.items():
        if addrs:
            bed.sh("client", "ping", f"-{ipv}", "-c", "1", "-W", "1", "-I", info["addresses"][str(ipv)][0],
                   bed.topo.plan.server(ipv), check=False)
    return info


def tcp_segments_sent(bed: "Testbed", role: str) -> int | None:
    """TCP segments (RSTs included) sent so far in ``role``'s namespace (/proc/net/snmp Tcp
    OutSegs), None when unreadable."""
    n = (read_counters(bed, role, SNMP, "Tcp") or {}).get("OutSegs")
    return n if n is not None and n >= 0 else None


def _undo_at_close(bed: "Testbed", role: str, argv: list[str]) -> None:
    """Run ``argv`` in ``role``'s namespace on its (remote) host when fwlab lets go of the host."""
    host, ns = bed.host_for(role), bed.ns(role)
    host.on_close(lambda: host.run(argv, ns=ns, check=False, timeout_s=30))


def read_conntrack(bed: "Testbed") -> dict[str, int | None]:
    """The DUT namespace's connection-table limit, hash size and count (None in direct mode)."""
    out: dict[str, int | None] = {k: None for k in CONNTRACK_KEYS}
    if not bed.topo.has_dut:
        return out
    # one command for the three (a remote DUT: one SSH session); -e: a key the kernel lacks is skipped
    cp = bed.sh("dut", "sysctl", "-e", *(f"net.netfilter.{k}" for k in CONNTRACK_KEYS), check=False)
    for line in cp.stdout.splitlines():
        key, sep, val = line.partition("=")
        k = key.strip().removeprefix("net.netfilter.")
        if sep and k in out and val.strip().isdigit():
            out[k] = int(val.strip())
    return out


def mem_available_b(bed: "Testbed") -> int | None:
    """MemAvailable [bytes] of the host the connections live on: with remote roles the least of
    the client's, server's and DUT's hosts (None when unreadable)."""
    hosts = []
    for r in ("client", "server", "dut"):
        h = bed.host_for(r)
        if all(h is not o for o in hosts):
            hosts.append(h)
    got = [parse_meminfo(h.run(["cat", "/proc/meminfo"], check=False).stdout).get("MemAvailable") for h in hosts]
    kib = [v for v in got if v is not None]
    return min(kib) * 1024 if kib else None


def _has_conntrack_tool(bed: "Testbed") -> bool:
    if not bed.is_remote("dut"):
        return shutil.which("conntrack") is not None
    host = bed.host_for("dut")
    if "_fwlab_has_conntrack" not in host.__dict__:
        cp = host.run(["sh", "-c", "command -v conntrack"], check=False, timeout_s=30)
        host.__dict__["_fwlab_has_conntrack"] = cp.returncode == 0
    return host.__dict__["_fwlab_has_conntrack"]


def flush_conntrack(bed: "Testbed") -> bool:
    """Empty the DUT's connection table (``conntrack -F``, on the DUT's host); False when the
    tool is missing there."""
    if not bed.topo.has_dut or not _has_conntrack_tool(bed):
        return False
    bed.sh("dut", "conntrack", "-F", check=False)
    return True


# -- the engine processes ---------------------------------------------------------------------------
def parse_doc(text: str, kind: str) -> dict:
    """One engine JSON document of ``kind`` (conn-server, conn-rate, conn-hold): the engine
    runner's check (JSON, kind, schema_version)."""
    from fwlab.runners.engine_counts import parse_result

    return parse_result(text, kind)


def ports_arg(n: int) -> str:
    return str(PORT_BASE) if n == 1 else f"{PORT_BASE}-{PORT_BASE + n - 1}"


def server_args(engine: str, *, ip_version: int, ports: int, ready: str, cpu: int | None,
                duration_s: float, lean: bool = False) -> list[str]:
    args = [engine, "conn-server", "--bind", "0.0.0.0" if ip_version == 4 else "::",
            "--port", ports_arg(ports), "--workers", str(ports), "--ready-file", ready,
            "--duration-s", f"{duration_s:.3f}"]
    if cpu is not None:
        args += ["--cpu", str(cpu)]
    if lean:
        args.append("--lean")
    return args


def src_arg(addrs: list[str]) -> str:
    return ",".join(addrs)


@dataclass
class ConnServer:
    """conn-server in the server namespace for one trial (or one search)."""

    bed: "Testbed"
    ip_version: int
    ports: int
    backstop_s: float
    lean: bool = False
    proc: Any = None
    doc: dict | None = None

    def __enter__(self) -> "ConnServer":
        engine = engine_on(self.bed, "server")
        self.host = self.bed.host_for("server")
        self.ready = self.host.scratch_path(f"conn-ready-{os.getpid()}-{time.monotonic_ns()}")
        cpu = None if self.bed.is_remote("server") else self.bed.topo.pinning.server_cpu
        self.args = server_args(engine, ip_version=self.ip_version, ports=self.ports, ready=self.ready,
                                cpu=cpu, duration_s=self.backstop_s, lean=self.lean)
        self.proc = self.host.spawn(self.args, ns=self.bed.ns("server"))
        try:
            wait_ready(self.host, self.proc, self.ready, "conn-server", timeout_s=READY_TIMEOUT_S)
        except RunnerError:
            self.host.forget(self.proc)
            self._remove_ready()
            raise
        return self

    def _remove_ready(self) -> None:
        if self.host.remote:  # the remote scratch directory goes when the host is let go
            return
        try:
            os.unlink(self.ready)
        except OSError:
            pass

    def __exit__(self, *exc) -> None:
        out, err = self.proc.stop(sig=2, wait_s=20.0)
        self.host.forget(self.proc)
        self._remove_ready()
        try:
            self.doc = parse_doc(out, "conn-server") if out.strip() else None
        except RunnerError:
            self.doc = None


def _client_cpu(bed: "Testbed") -> list[str]:
    if bed.is_remote("client"):
        return []  # the bed's CPU numbers are this machine's
    c = bed.topo.pinning.client_cpu
    return ["--cpu", str(c)] if c is not None else []


def run_rate(bed: "Testbed", *, ip_version: int, rate_cps: float | None, duration_s: float, o: dict,
             srcs: list[str], proc_stat: list | None = None) -> tuple[dict, dict | None, dict, dict]:
    """One conn-rate trial: flush the DUT's table, server up, client run, server down.
    ``rate_cps`` None: closed loop, as fast as the client goes with ``max_inflight`` in flight.
    ``proc_stat`` (a list): this machine's ``/proc/stat`` per CPU (``cpuseries.read_proc_stat``)
    is appended right before and right after the client's run, for CPU accounting of the run alone.
    Returns (client doc, server doc, conntrack before, conntrack after)."""
    engine = engine_on(bed, "client")
    flush_conntrack(bed)
    ct_before = read_conntrack(bed)
    workers = int(o.get("workers", 1))
    args = [engine, "conn-rate", "--dst", bed.topo.plan.server(ip_version), "--port", ports_arg(o["ports"]),
            "--src", src_arg(srcs), "--rate-cps", "max" if rate_cps is None else f"{rate_cps:.3f}",
            "--duration-s", f"{duration_s:.3f}",
            "--req-bytes", str(o["req_bytes"]), "--timeout-s", f"{o['timeout_s']}",
            "--max-inflight", str(o["max_inflight"]), "--close", o.get("close", "fin"),
            "--workers", str(workers), *(_client_cpu(bed) if workers == 1 else []),
            *(["--lean"] if o.get("lean") else [])]
    with ConnServer(bed, ip_version, o["ports"], duration_s + o["timeout_s"] + 60, lean=bool(o.get("lean"))) as srv:
        if proc_stat is not None:
            proc_stat.append(read_proc_stat(PROC_STAT.read_text()))
        cp = bed.host_for("client").run(args, ns=bed.ns("client"), check=False,
                                        timeout_s=duration_s + o["timeout_s"] + 60)
        if proc_stat is not None:
            proc_stat.append(read_proc_stat(PROC_STAT.read_text()))
        ct_after = read_conntrack(bed)
    if cp.returncode != 0:
        raise RunnerError(f"fwlab-engine conn-rate failed (exit {cp.returncode}): {cp.stderr.strip()[:200]}",
                          fix="check the test bed and the engine build")
    doc = parse_doc(cp.stdout, "conn-rate")
    doc["argv"] = args
    return doc, srv.doc, ct_before, ct_after


def run_hold(bed: "Testbed", *, ip_version: int, count: int, o: dict, srcs: list[str],
             stop_on_failure: bool = False) -> tuple[dict, dict | None, dict, dict]:
    """One conn-hold trial. The DUT's table is read while every connection is held.
    Returns (client doc, server doc, conntrack before, conntrack while held)."""
    engine = engine_on(bed, "client")
    flush_conntrack(bed)
    ct_before = read_conntrack(bed)
    w = workers_for(count)
    host = bed.host_for("client")
    held = host.scratch_path(f"conn-held-{os.getpid()}-{time.monotonic_ns()}")
    poll_s = 0.1 if host.remote else 0.05  # a remote check is an SSH session
    args = [engine, "conn-hold", "--dst", bed.topo.plan.server(ip_version), "--port", ports_arg(w),
            "--workers", str(w), "--src", src_arg(srcs), "--count", str(count),
            "--hold-s", f"{o['hold_s']}", "--probe-every", str(o["probe_every"]),
            "--connect-timeout-s", f"{o['connect_timeout_s']}", "--probe-timeout-s", f"{o['probe_timeout_s']}",
            "--max-pending", str(o["max_pending"]), "--held-file", held, *_client_cpu(bed)]
    if o["open_rate_cps"]:
        args += ["--open-rate-cps", f"{o['open_rate_cps']:.3f}"]
    if stop_on_failure:
        args.append("--stop-on-failure")
    # opening at >= 2000/s, the hold, probing and closing, with room to spare
    budget = count / 2000 + o["hold_s"] + o["connect_timeout_s"] + o["probe_timeout_s"] + 120
    ct_held: dict = {}
    with ConnServer(bed, ip_version, w, budget + 30) as srv:
        cl = host.spawn(args, ns=bed.ns("client"))
        # read while waiting: with many workers the merged JSON outgrows the pipe's 64 KiB,
        # and a client blocked writing it never exits (found at 1,000,000 connections)
        reader = _Reader(cl)
        try:
            deadline = time.monotonic() + budget
            while cl.proc.poll() is None and time.monotonic() < deadline and not host.exists(held):
                time.sleep(poll_s)
            if host.exists(held):
                ct_held = read_conntrack(bed)
            left = max(5.0, deadline - time.monotonic())
            out, err = reader.wait(left)
        finally:
            if cl.proc.poll() is None:
                reader.end()
            host.forget(cl)
            if not host.remote:
                try:
                    os.unlink(held)
                except OSError:
                    pass
    if not out.strip():
        raise RunnerError(f"fwlab-engine conn-hold printed nothing (exit {cl.proc.returncode}): {err.strip()[:200]}",
                          fix="check the engine build ('make engine')")
    doc = parse_doc(out, "conn-hold")
    doc["argv"] = args
    flush_conntrack(bed)
    return doc, srv.doc, ct_before, ct_held


class _Reader:
    """Reads a spawned process's output while it runs, so it never blocks on a full pipe. A
    remote process's stdin is its SSH session's signal channel: it stays open (closing it stops
    the process), which is why this is not ``communicate``."""

    def __init__(self, sp) -> None:
        self.sp, self.out, self.err = sp, [], []
        self.threads = [threading.Thread(target=self._read, args=(f, buf), daemon=True)
                        for f, buf in ((sp.proc.stdout, self.out), (sp.proc.stderr, self.err)) if f is not None]
        for t in self.threads:
            t.start()

    @staticmethod
    def _read(f, buf: list) -> None:
        try:
            buf.append(f.read())
        except (OSError, ValueError):
            pass

    def wait(self, timeout_s: float, grace_s: float = 30.0, end_s: float = 5.0) -> tuple[str, str]:
        """Wait up to ``timeout_s`` for the process to exit by itself, then SIGINT it (it prints
        what it has) and wait ``grace_s``, then end it (:meth:`end`); return (stdout, stderr)."""
        try:
            self.sp.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.sp.send_signal(signal.SIGINT)
            try:
                self.sp.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.end(end_s)
        for t in self.threads:
            t.join(timeout=10.0)
        return "".join(self.out), "".join(self.err)

    def end(self, wait_s: float = 5.0) -> None:
        """Stop the process without touching its output pipes (this reader's threads read them;
        ``Spawned.stop`` would race them with its own communicate): TERM its group (a remote one
        through its watchdog), then, if it lingers, close its stdin (a remote watchdog then stops
        it) and KILL the local process group (the ssh client of a remote one)."""
        self.sp.send_signal(signal.SIGTERM)
        try:
            self.sp.proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            pass
        try:
            if self.sp.proc.stdin is not None:
                self.sp.proc.stdin.close()
        except OSError:
            pass
        try:
            os.killpg(self.sp.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.sp.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            pass


# -- measurers (the searches' seam) -----------------------------------------------------------------
@dataclass
class ConnRateMeasurer:
    """measure(duration_s, load) with load = intended connections/s; one conn-rate trial each."""

    bed: "Testbed"
    ip_version: int
    options: dict
    srcs: list[str]
    trials: list[dict] = field(default_factory=list)

    def measure(self, duration_s: float, load_pps: float) -> TrialResult:
        doc, srv, ctb, cta = run_rate(self.bed, ip_version=self.ip_version, rate_cps=load_pps,
                                      duration_s=duration_s, o=self.options, srcs=self.srcs)
        self.trials.append({"rate_cps": load_pps, "duration_s": duration_s, "client": slim(doc),
                            "server": slim(srv), "conntrack_before": ctb, "conntrack_after": cta})
        return rate_trial_result(doc, duration_s, load_pps)


@dataclass
class ConnCapacityMeasurer:
    """measure(duration_s, load) with load = connections to hold and duration = the hold [s]."""

    bed: "Testbed"
    ip_version: int
    options: dict
    srcs: list[str]
    trials: list[dict] = field(default_factory=list)

    def measure(self, duration_s: float, load_pps: float) -> TrialResult:
        count = max(1, int(round(load_pps)))
        o = {**self.options, "hold_s": duration_s}
        doc, srv, ctb, cth = run_hold(self.bed, ip_version=self.ip_version, count=count, o=o, srcs=self.srcs)
        self.trials.append({"count": count, "client": slim(doc), "server": slim(srv),
                            "conntrack_before": ctb, "conntrack_held": cth})
        # the search asked for `load_pps` (a bisection can give a fraction); the trial holds the
        # nearest whole number of connections: record the load as asked, the counts as held
        return replace(hold_trial_result(doc, count, duration_s), intended_load_pps=float(load_pps))


__all__ = ["ConnCapacityMeasurer", "ConnRateMeasurer", "flush_conntrack", "prepare_bed", "read_conntrack",
           "run_hold", "run_rate", "engine_unavailable", "engine_version", "find_engine"]
