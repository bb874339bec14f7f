"""The iperf3 runner: TCP streams (optionally many, in several client processes) and UDP streams
with a payload size and a rate (unlimited by default), one way (``direction = "up"``: client to
server, the default; ``"down"``: iperf3 -R) or both at once (``"bidir"``: iperf3 --bidir), TCP
optionally with a fixed window (``window_bytes``: iperf3 -w, the socket buffers; the sizes the
kernel gave are kept in ``extra.socket_buffers``). Parses iperf3's JSON (``-J``) into metrics,
per-direction and per-stream figures and 1 s series (runners.iperf3_json).

iperf3 caps ``-P`` at 128 streams per process: more streams are split over several client
processes, each against its own server port (5201, 5202, ...), run at once and added up. Kind
``parallel`` is such a TCP run framed by single-stream recovery probes (``methods.recovery``).

iperf3 UDP is sender-bound (~200 kpps for 64 B on this class of machine): it is a stream tool,
not a packet-rate generator. For TCP it reports bytes, not packets; ``rx_pps`` is then taken
from the receiving interface's counter over the same interval.
"""

from __future__ import annotations

import math
import shutil
import signal
import threading
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from fwlab.errors import RunnerError
from fwlab.runners.base import (
    Measurement,
    Runner,
    TrafficSpec,
    apply_link_counts,
    overlap,
    register,
    skew_flag,
    whole_seconds,
)
from fwlab.runners.iperf3_json import account_overrun, add_rtt_probe, combine, parse_json
from fwlab.testbed.host import CommandTimeout, Spawned, require_tool
from fwlab.testbed.pairs import StreamPair, stream_pairs
from fwlab.testbed.shaping import DATA_TOS

if TYPE_CHECKING:
    from fwlab.testbed.bed import Testbed

MAX_STREAMS_PER_PROCESS = 128  #: iperf3's own limit on -P
DIRECTIONS = ("up", "down", "bidir")
#: iperf3 -C: TCP congestion controls fwlab offers (reno/cubic: loss-based, as the seeds' stacks were)
CONGESTION_CONTROLS = ("reno", "cubic", "bbr")
#: iperf3 -w (socket buffers, i.e. the TCP window): Linux raises anything below ~2 KiB to its minimum
MIN_WINDOW_BYTES, MAX_WINDOW_BYTES = 2048, 64 * 1024 * 1024


def split_streams(streams: int, per_process: int = MAX_STREAMS_PER_PROCESS) -> list[int]:
    """Streams per client process: as few processes as iperf3's -P limit allows, evenly filled
    (900 -> 8 processes of 113 or 112)."""
    if streams < 1:
        raise RunnerError(f"{streams} streams", fix="use 1 or more streams")
    n = math.ceil(streams / per_process)
    base, extra = divmod(streams, n)
    return [base + (1 if k < extra else 0) for k in range(n)]


def build_client_args(spec: TrafficSpec, server_addr: str, cpu: int | None, *,
                      streams: int | None = None, port: int | None = None, tos: int | None = None) -> list[str]:
    """The iperf3 client command line for ``spec`` (or one process's share of its streams).
    ``tos``: IP TOS / IPv6 traffic class of the data streams (iperf3 -S; the server's data sockets
    get it too, the control connection does not): :func:`data_tos`."""
    streams = spec.streams if streams is None else streams
    port = spec.port if port is None else port
    # iperf3 reads -t as an integer (atoi): 0.5 would become 0, i.e. run forever
    args = ["iperf3", "-c", server_addr, "-p", str(port), "-J", "-t", str(whole_seconds(spec.duration_s, "iperf3 -t")),
            f"-{spec.ip_version}", "--connect-timeout", "3000"]
    if streams > 1:
        args += ["-P", str(streams)]
    if cpu is not None:
        args += ["-A", str(cpu)]
    if tos is not None:
        args += ["-S", f"0x{tos:02x}"]
    if spec.options.get("window_bytes"):
        args += ["-w", str(int(spec.options["window_bytes"]))]
    if spec.options.get("congestion") and spec.traffic in ("tcp", "parallel"):
        args += ["-C", str(spec.options["congestion"])]
    direction = spec.options.get("direction", "up")
    if direction == "down":
        args.append("-R")
    elif direction == "bidir":
        args.append("--bidir")
    if spec.traffic == "udp":
        args += ["-u", "-b", str(spec.rate_bps or 0)]
        if spec.size_bytes:
            args += ["-l", str(spec.size_bytes)]
    elif spec.traffic in ("tcp", "parallel"):
        if spec.size_bytes:
            args += ["-l", str(spec.size_bytes)]
        if spec.rate_bps:
            args += ["-b", str(spec.rate_bps)]
    else:
        raise RunnerError(f"iperf3 cannot generate traffic '{spec.traffic}'", fix="use tcp, udp or parallel")
    return args


def data_tos(bed: "Testbed") -> int | None:
    """The TOS iperf3's data carries on ``bed``: DATA_TOS when its emulated wires' queues have
    bands now (testbed.shaping: the orchestrator gives them to iperf3's trials; the data then
    queues apart from iperf3's control connection), else none. The same in every trial and
    direction: the client's data is marked by ``-S``, the server's by the same setting, which
    iperf3 passes to its server (one per IP version: :meth:`Iperf3._start_port`). A ping beside
    the data is marked alike, so it waits in the data's queue."""
    if not (bed.topo.link_rate_bps and bed.link_bands):
        return None
    return DATA_TOS


def server_roles(bed: "Testbed") -> list[str]:
    """The bed's server roles: ``server``, then ``server2`` ... of its further pairs (namespaces
    or server hosts: testbed.pairs)."""
    return [p.server for p in stream_pairs(bed)]


def pair_figures(pair: StreamPair, m: Measurement, interval: tuple[float, float], links: list[tuple[str, str]],
                 rx_packets: list[int], rx_bytes: list[int]) -> dict:
    """One pair's own figures in a trial of several pairs: iperf3's rate and bytes, its receiving
    interface(s)' counters over the trial, and its test interval (this machine's clock)."""
    mt = m.metrics
    return {"pair": pair.k, "client": pair.client, "server": pair.server, "throughput_bps": mt.get("throughput_bps"), "bytes": mt.get("bytes"),
            "retransmits": mt.get("retransmits"), "duration_s": mt.get("duration_s"),
            "rx_links": [f"{r}:{d}" for r, d in links], "rx_if_packets": sum(rx_packets),
            "rx_if_bytes": sum(rx_bytes), "start_unix_s": interval[0], "end_unix_s": interval[1]}


def check_direction(options: dict) -> str:
    d = options.get("direction", "up")
    if d not in DIRECTIONS:
        raise ValueError(f"iperf3 direction '{d}' is not one of {', '.join(DIRECTIONS)}")
    return d


class Iperf3(Runner):
    name = "iperf3"
    marks_bulk_data = True
    remote_roles = True
    traffics = ("tcp", "udp")
    trial_overhead_s = {"tcp": 1.0, "udp": 1.0}
    whole_seconds_option = "iperf3 -t"
    summary = ("iperf3: TCP streams (any number: >128 split over processes), UDP streams with payload "
               "size and rate; up, down or both directions (kind parallel: tool parallel)")

    def __init__(self) -> None:
        #: (role, ns, port, IP version): one server a port, for one IP version (see _start_port)
        self._servers: dict[tuple[str, str | None, int, int], Spawned] = {}
        # probes during a load run a second client beside it (methods.recovery): both threads
        # start and stop servers of this runner
        self._servers_lock = threading.Lock()

    def unavailable(self) -> str | None:
        return None if shutil.which("iperf3") else "iperf3 is not installed (apt-get install iperf3)"

    def version(self) -> str:
        require_tool("iperf3")
        import subprocess
        return subprocess.run(["iperf3", "--version"], capture_output=True, text=True).stdout.splitlines()[0]

    def check_options(self, kind: str, options: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        known = {"congestion", "direction", "rtt_probe", "window_bytes"}
        extra = set(options) - known
        if extra:
            raise ValueError(f"iperf3 {kind} takes options {', '.join(sorted(known))} "
                             f"(unknown: {', '.join(sorted(extra))})")
        if "direction" in options:
            out["direction"] = check_direction(options)
        if "rtt_probe" in options:
            if not isinstance(options["rtt_probe"], bool):
                raise ValueError("iperf3 rtt_probe must be true or false")
            out["rtt_probe"] = options["rtt_probe"]
        if "window_bytes" in options:
            w = options["window_bytes"]
            if kind != "tcp":
                raise ValueError(f"iperf3 window_bytes (-w, the TCP window) is for kind tcp, not {kind}")
            if isinstance(w, bool) or not isinstance(w, int) or not MIN_WINDOW_BYTES <= w <= MAX_WINDOW_BYTES:
                raise ValueError(f"iperf3 window_bytes {w!r} must be a whole number of bytes in "
                                 f"{MIN_WINDOW_BYTES}..{MAX_WINDOW_BYTES} (iperf3 -w)")
            out["window_bytes"] = w
        if "congestion" in options:
            c = options["congestion"]
            if kind not in ("tcp", "parallel") or not isinstance(c, str) or c not in CONGESTION_CONTROLS:
                raise ValueError(f"iperf3 congestion {c!r} must be one of {', '.join(CONGESTION_CONTROLS)} "
                                 f"(iperf3 -C, TCP kinds only)")
            out["congestion"] = c
        return out

    def start(self, bed: "Testbed", spec: TrafficSpec) -> None:
        for role in server_roles(bed):
            self._start_port(bed, spec.port, role, spec.ip_version)

    def _start_port(self, bed: "Testbed", port: int, role: str = "server", ip_version: int = 4) -> None:
        """An iperf3 server on ``port`` for ``ip_version`` alone (``-4``: an IPv4 socket; ``-6``).
        Not one dual-stack server: iperf3 3.12's does not mark the IPv4 data it sends (``-S``,
        esnet/iperf#638; fixed in 3.13), and a banded wire (testbed.shaping) needs every
        direction's data marked. One server a port at a time: a trial of the other IP version
        replaces it (a ``-6`` server beside a ``-4`` one on the port failed IPv6 trials with a
        window, ``-w``: "unable to start stream listener: Address already in use")."""
        # the role too: remote server hosts without ``ns`` all have namespace None
        key = (role, bed.ns(role), port, ip_version)
        with self._servers_lock:
            sp = self._servers.get(key)
            other = [(k, s) for k, s in self._servers.items() if k[:3] == key[:3] and k[3] != ip_version]
            for k, _ in other:
                del self._servers[k]
        for _, s in other:
            s.stop()
            bed.host_for(role).forget(s)
        if sp is not None and sp.proc.poll() is None:
            return
        require_tool("iperf3")
        # --logfile: the server's per-stream and per-interval lines must not go to a pipe nobody
        # reads: once it is full (about 64 KB, reached with ~100 streams) the server blocks in
        # write() and its clients never finish.
        args = ["iperf3", "-s", f"-{ip_version}", "-p", str(port), "--logfile", "/dev/null"]
        cpu = bed.topo.pinning.server_cpu
        if cpu is not None:
            args += ["-A", str(cpu)]
        sp = bed.host_for(role).spawn(args, ns=bed.ns(role))
        with self._servers_lock:
            self._servers[key] = sp
        self._wait_listening(bed, port, role, ip_version)

    def _wait_listening(self, bed: "Testbed", port: int, role: str = "server", ip_version: int = 4,
                        timeout_s: float = 5.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            cp = bed.sh(role, "ss", "-ltnH", f"-{ip_version}", f"sport = :{port}", check=False)
            if cp.stdout.strip():
                return
            time.sleep(0.05)
        raise RunnerError(f"iperf3 server did not listen on port {port} within {timeout_s} s",
                          fix="run 'fwlab clean'; another process may hold the port")

    def stop(self, bed: "Testbed", ports: Iterable[int] | None = None) -> None:
        """Stop the bed's iperf3 servers: all of them, or only those on ``ports`` (a failed
        client restarts its own servers, never those of a load or a probe running beside it)."""
        wanted = None if ports is None else set(ports)
        for role in server_roles(bed):
            with self._servers_lock:
                mine = [(key, sp) for key, sp in self._servers.items()
                        if key[:2] == (role, bed.ns(role)) and (wanted is None or key[2] in wanted)]
                for key, _ in mine:
                    del self._servers[key]
            for _, sp in mine:
                sp.stop()
                bed.host_for(role).forget(sp)

    def _rx_links(self, bed: "Testbed", direction: str, pair: StreamPair | None = None) -> list[tuple[str, str]]:
        """The interfaces whose receive counters see the stream: the server's (up), the
        client's (down), both (bidir); of ``pair`` (None: the bed's client and server)."""
        t = bed.topo
        c, s_ = ((pair.client, pair.client_if), (pair.server, pair.server_if)) if pair else \
            (("client", t.client_if), ("server", t.server_if))
        return {"up": [s_], "down": [c], "bidir": [s_, c]}[direction]

    def _run_concurrently(self, bed: "Testbed", argvs: list[list[str]], timeout_s: float,
                          roles: list[str] | None = None, times: list | None = None,
                          ports: Iterable[int] | None = None) -> list[tuple[int, str, str]]:
        """Start every client at once and read all their pipes at once (a client whose JSON
        does not fit its pipe would otherwise block the others' end of test). ``roles``: each
        argv's client role (default all "client"); ``times`` (if given) gets each process's
        (spawn, exit) wall-clock times [s]."""
        roles = roles or ["client"] * len(argvs)
        spawned_at, exited_at = [], {}
        procs = []
        for a, r in zip(argvs, roles):
            spawned_at.append(time.time())
            procs.append(bed.host_for(r).spawn(a, ns=bed.ns(r)))
        results: dict[int, tuple[int, str, str]] = {}

        def read(k: int, sp: Spawned) -> None:
            out, err = sp.output()  # not communicate(): a remote client's stdin must stay open
            exited_at[k] = time.time()
            results[k] = (sp.proc.returncode, out, err)

        threads = [threading.Thread(target=read, args=(k, sp), daemon=True) for k, sp in enumerate(procs)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + timeout_s
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        hung = [k for k in range(len(procs)) if k not in results]
        for k in hung:  # kill the group; the reader thread then sees end-of-file and returns
            procs[k]._signal_group(signal.SIGKILL)
            threads[k].join(5.0)
        for sp, r in zip(procs, roles):
            bed.host_for(r).forget(sp)
        if times is not None:
            times.extend((spawned_at[k], exited_at.get(k)) for k in range(len(procs)))
        if hung:
            self.stop(bed, ports)
            raise RunnerError(f"{len(hung)} of {len(procs)} iperf3 clients hung; this trial's figure is missing",
                              fix="none needed: the next trial uses fresh iperf3 servers")
        return [results[k] for k in range(len(procs))]

    def run_clients(self, bed: "Testbed", spec: TrafficSpec) -> Measurement:
        """Run the client process(es) of ``spec`` at once and return the combined Measurement
        with link counts, per-stream rates (their spread: ``fwlab.stats.derive``) and
        ``completion_s`` (first start to last exit). A bed with several client/server pairs:
        :meth:`run_pairs`."""
        pairs = stream_pairs(bed)
        if len(pairs) > 1:
            return self.run_pairs(bed, spec, pairs)
        shares = split_streams(spec.streams)
        ports = [spec.port + k for k in range(len(shares))]
        for p in ports:
            self.start(bed, replace(spec, port=p))
        server = bed.topo.plan.server(spec.ip_version)
        cpu = bed.topo.pinning.client_cpu
        argvs = [build_client_args(spec, server, cpu, streams=n, port=p, tos=data_tos(bed))
                 for n, p in zip(shares, ports)]
        direction = spec.options.get("direction", "up")
        links = self._rx_links(bed, direction)
        before = sum(bed.link_counters(r, d)["rx_packets"] for r, d in links)
        t0 = time.monotonic()
        outs: list[tuple[int, str, str]] = []
        if len(argvs) == 1:
            try:
                cp = bed.host_for("client").run(argvs[0], ns=bed.ns("client"), check=False,
                                               timeout_s=spec.duration_s + 30)
            except CommandTimeout as exc:
                self.stop(bed, ports)  # a wedged server would hang the next trial too: start a fresh one
                raise RunnerError(f"iperf3 client hung: {exc.message}; this trial's figure is missing",
                                  fix="none needed: the next trial uses a fresh iperf3 server") from exc
            outs.append((cp.returncode, cp.stdout, cp.stderr))
        else:
            outs = self._run_concurrently(bed, argvs, timeout_s=spec.duration_s + 30 + 2 * len(argvs), ports=ports)
        completion_s = time.monotonic() - t0
        after = sum(bed.link_counters(r, d)["rx_packets"] for r, d in links)
        parts = []
        for rc, out, err in outs:
            if rc != 0 and not out.strip().startswith("{"):
                self.stop(bed, ports)
                raise RunnerError(f"iperf3 client failed (exit {rc}): {err.strip()[:200]}",
                                  fix="check the test bed and the firewall's permit rule")
            try:
                parts.append(parse_json(out, spec.traffic))
            except RunnerError:
                self.stop(bed, ports)  # a failed test can wedge the server: start a fresh one next time
                raise
        m = combine(parts)
        traffic = "tcp" if spec.traffic == "parallel" else spec.traffic
        apply_link_counts(m, traffic, after - before, "iperf3")
        if traffic == "udp" and direction != "bidir":
            # one direction: its figure is the link-counted one too (the app's stays app_*);
            # bidir UDP keeps per-direction figures as the two iperf3 receivers read them
            m.metrics[f"throughput_{direction}_bps"] = m.metrics.get("throughput_bps")
        m.metrics["completion_s"] = completion_s
        account_overrun(m, traffic, direction, spec.duration_s, completion_s)
        m.metrics["client_processes"] = len(argvs)
        m.metrics["streams"] = spec.streams
        m.raw["argv"] = argvs[0] if len(argvs) == 1 else argvs
        return m

    def run_pairs(self, bed: "Testbed", spec: TrafficSpec, pairs: list[StreamPair]) -> Measurement:
        """Every client/server pair of the bed at once (namespaces, or hosts of a hosts file:
        testbed.pairs), each client (all its processes) against its own server: the trial's
        figures are their sum (:func:`combine`, rates over the longest pair's time), each pair's
        own in ``metrics["pairs"]``, with how far apart they started (``start_skew_s``) and how
        long all sent at once (``common_interval_s``); a trial where that is under 90 % of the
        shortest pair's time is flagged ``generator-skew``."""
        t = bed.topo
        npairs = len(pairs)
        shares = split_streams(spec.streams)
        ports = [spec.port + k for k in range(len(shares))]
        for p in pairs:
            if p.server_addr(spec.ip_version) is None:
                raise RunnerError(f"server host {p.server} has no server{spec.ip_version} address for an "
                                  f"IPv{spec.ip_version} trial",
                                  fix=f"add addresses.server{spec.ip_version} to [hosts.{p.server}]")
        for p in pairs:
            for port in ports:
                self._start_port(bed, port, p.server, spec.ip_version)
        cpu = t.pinning.client_cpu
        jobs = [(p, build_client_args(spec, p.server_addr(spec.ip_version), cpu, streams=n, port=port,
                                      tos=data_tos(bed)))
                for p in pairs for n, port in zip(shares, ports)]
        direction = spec.options.get("direction", "up")
        links = {p.k: self._rx_links(bed, direction, p) for p in pairs}
        before = {k: [bed.link_counters(r, d) for r, d in ls] for k, ls in links.items()}
        t0 = time.monotonic()
        times: list = []
        outs = self._run_concurrently(bed, [a for _, a in jobs], timeout_s=spec.duration_s + 30 + 2 * len(jobs),
                                      roles=[p.client for p, _ in jobs], times=times, ports=ports)
        completion_s = time.monotonic() - t0
        after = {k: [bed.link_counters(r, d) for r, d in ls] for k, ls in links.items()}
        parts: dict[int, list[Measurement]] = {p.k: [] for p in pairs}
        spans: dict[int, list[tuple[float, float]]] = {p.k: [] for p in pairs}
        launched: dict[int, float] = {}
        for (p, _), (rc, out, err), (spawned, exited) in zip(jobs, outs, times):
            k = p.k
            launched[k] = min(launched.get(k, spawned), spawned)
            if rc != 0 and not out.strip().startswith("{"):
                self.stop(bed, ports)
                raise RunnerError(f"iperf3 client of pair {k} ({p.client} -> {p.server}) failed (exit {rc}): "
                                  f"{err.strip()[:200]}", fix="check the test bed and the firewall's permit rule")
            try:
                m_k = parse_json(out, spec.traffic)
            except RunnerError:
                self.stop(bed, ports)
                raise
            parts[k].append(m_k)
            dur = m_k.metrics.get("duration_s") or float(spec.duration_s)
            spans[k].append((exited - dur, exited))
        per_pair = [combine(parts[p.k]) for p in pairs]
        m = combine([part for p in pairs for part in parts[p.k]])
        traffic = "tcp" if spec.traffic == "parallel" else spec.traffic
        rx = {k: [a["rx_packets"] - b["rx_packets"] for a, b in zip(after[k], before[k])] for k in links}
        rx_bytes = {k: [a["rx_bytes"] - b["rx_bytes"] for a, b in zip(after[k], before[k])] for k in links}
        apply_link_counts(m, traffic, sum(sum(v) for v in rx.values()), "iperf3")
        if traffic == "udp" and direction != "bidir":
            m.metrics[f"throughput_{direction}_bps"] = m.metrics.get("throughput_bps")
        m.metrics["completion_s"] = completion_s
        account_overrun(m, traffic, direction, spec.duration_s, completion_s)
        intervals = [(min(a for a, _ in spans[p.k]), max(b for _, b in spans[p.k])) for p in pairs]
        named = {k: [(r, bed.dev(r, d)) for r, d in ls] for k, ls in links.items()}  # a remote host's own names
        m.metrics["pairs"] = [pair_figures(p, pm, iv, named[p.k], rx[p.k], rx_bytes[p.k])
                              for p, pm, iv in zip(pairs, per_pair, intervals)]
        ov = overlap(intervals)
        m.metrics.update({"pair_count": npairs, "start_skew_s": ov["start_skew_s"],
                          "common_interval_s": ov["common_interval_s"], "overlap_ratio": ov["overlap_ratio"],
                          "launch_skew_s": max(launched.values()) - min(launched.values()),
                          "start_basis": "each pair's iperf3 test interval placed to end at its client's exit "
                                        "(this machine's clock: the exit of the local process, or of the ssh "
                                        "session of a remote client); the results exchange after the test "
                                        "counts into the skew"})
        flag = skew_flag(ov["common_interval_s"], ov["shortest_s"], ov["start_skew_s"],
                         f"the {npairs} client/server pairs", "the summed rate overstates the load")
        if flag:
            m.flags.append(flag)
        m.metrics["client_processes"] = len(jobs)
        m.metrics["streams"] = spec.streams * npairs
        m.raw["argv"] = [a for _, a in jobs]
        return m

    def measure(self, bed: "Testbed", spec: TrafficSpec, env=None) -> Measurement:
        probe = None
        if spec.options.get("rtt_probe"):
            from fwlab.runners.ping import PingProbe
            # marked as the stream's data: its echoes wait in the data's queue on a banded wire
            probe = PingProbe(bed, spec.ip_version, spec.duration_s + 1, tos=data_tos(bed))
            probe.start()
        try:
            m = self.run_clients(bed, spec)
        finally:
            samples = probe.finish() if probe else None
        if probe is not None:
            add_rtt_probe(m, samples, probe.args)
        return m


register(Iperf3())
