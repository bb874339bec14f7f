"""The fwlab-engine runner: rate-controlled, sequence-numbered, timestamped test traffic.

Owns: running one trial on a built bed (receiver on the server's host, a sender on every
generator host; :func:`run_trial`, :func:`run_bidir_trial`), the registered ``engine`` runner,
and, for searches, :class:`EngineMeasurer` (a :class:`TrialResult` per trial). What a trial does
and its command lines are in runners.engine_args, the binary in runners.engine_binary, the
reading of its JSON results in runners.engine_counts, its clocks in runners.engine_clocks.
Never touches the firewall or the test bed's construction.

The receiver is started with ``--idle-timeout-s``: it stops by itself once nothing has arrived
for that long, so every packet still queued in its socket has been read (the engine stops at once
on SIGINT, without draining its socket). SIGINT is only the fallback when nothing arrives at all.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from fwlab.errors import RunnerError
from fwlab.runners.base import Measurement, Runner, TrafficSpec, register, skew_flag
from fwlab.runners.engine_args import (IDLE_TIMEOUT_S, MAX_NEW_FLOWS, NEW_FLOW_PORT0, RAW_BACKENDS, EngineTrial,
                                       build_recv_args, build_send_args, default_frame_size, split_trial)
from fwlab.runners.engine_binary import (engine_on, engine_unavailable, engine_version, generator_roles,
                                         require_engine, shipped_engines)
from fwlab.runners.engine_clocks import clock_flag, clock_of, latency_clocks
from fwlab.runners.engine_counts import aggregate, combine_directions, metrics_from, parse_result
from fwlab.search.measurer import TrialResult
from fwlab.testbed.host import Host

if TYPE_CHECKING:
    from fwlab.testbed.bed import Testbed

READY_TIMEOUT_S = 5.0


# -- running -----------------------------------------------------------------------------------
def next_hop_mac(bed: Testbed) -> str:
    """MAC the client's frames go to: the DUT's client-side interface (routed), else the server's."""
    if bed.topo.mode == "routed":
        role, dev = "dut", bed.topo.dut_client_if
    else:
        role, dev = "server", bed.topo.server_if
    cp = bed.sh(role, "ip", "-j", "link", "show", bed.dev(role, dev))
    return json.loads(cp.stdout)[0]["address"]


def default_cpus(bed: Testbed, threads: int) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """Sender and receiver pinning from the test bed: one sender thread on the client CPU; with
    several threads, consecutive CPUs from the client CPU on (wrapping around). The receiver runs
    on the server CPU, except in device model "napi" when that is the DUT's CPU: the DUT's NAPI
    thread (SCHED_FIFO) would starve it near the DUT's capacity and its socket drops would look
    like DUT loss, so it joins the sender on the tester's CPU."""
    p = bed.topo.pinning
    is_remote = getattr(bed, "is_remote", lambda role: False)
    if is_remote("client") or is_remote("server"):
        return None, None  # the bed's CPU numbers are this machine's
    ncpu = os.cpu_count() or 1
    send = None
    if p.client_cpu is not None:
        send = tuple((p.client_cpu + k) % ncpu for k in range(max(1, threads)))
    recv_cpu = p.server_cpu
    if bed.topo.device_model == "napi" and recv_cpu is not None and recv_cpu == p.dut_cpu \
            and p.client_cpu is not None:
        recv_cpu = p.client_cpu
    recv = (recv_cpu,) if recv_cpu is not None else None
    return send, recv


@dataclass(frozen=True)
class Generator:
    """One sending host of a trial: its role (``client``, ``client2`` ...), where it runs and
    the first stream id of its sender threads (so the receiver tells the generators apart)."""

    role: str
    host: Host
    ns: str | None
    engine: str  #: the engine's path on that host
    iface: str  #: its data interface (raw backends)
    src: str | None  #: its own address (raw backends, extra generators)
    stream_id: int


#: stream ids of generator i start at 1 + i x STREAM_STRIDE (threads per generator < stride)
STREAM_STRIDE = 100


def generators(bed: Testbed, t: EngineTrial) -> list[Generator]:
    plan = bed.topo.plan
    out = []
    for i, role in enumerate(generator_roles(bed)):
        if role == "client":
            iface, src = bed.dev("client", bed.topo.client_if), plan.client(t.ip_version)
        else:
            e = bed.placement.entry(role)
            src = e.addresses.get(f"client{t.ip_version}")
            if src is None:
                raise RunnerError(f"generator host {role} has no client{t.ip_version} address for an "
                                  f"IPv{t.ip_version} trial", fix=f"add addresses.client{t.ip_version} "
                                  f"to [hosts.{role}]")
            iface = e.ifaces[0]
        out.append(Generator(role, bed.host_for(role), bed.ns(role), engine_on(bed, role), iface, src,
                             1 + i * STREAM_STRIDE))
    return out


def wait_ready(host: Host, sp: Any, path: str, what: str, timeout_s: float = READY_TIMEOUT_S,
               fix: str = "run 'fwlab clean'; check the engine build") -> None:
    """Wait until a spawned engine process ``sp`` on ``host`` writes its ready file ``path``. If
    it exits first, or ``timeout_s`` passes: stop it and raise RunnerError naming ``what`` (e.g.
    "recv") with the start of its stderr (the caller still forgets it and removes its files)."""
    deadline = time.monotonic() + timeout_s
    while not host.exists(path):
        if sp.proc.poll() is not None or time.monotonic() > deadline:
            _, err = sp.stop()
            raise RunnerError(f"fwlab-engine {what} did not become ready: {err.strip()[:200] or 'no output'}",
                              fix=fix)
        time.sleep(0.01)


def _finish(sp, timeout_s: float) -> tuple[int, str, str]:
    """Wait for a spawned sender to exit by itself; (exit status, stdout, stderr)."""
    try:
        sp.proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        out, err = sp.stop()
        return 124, out, err or "timed out"
    out, err = sp.proc.communicate()
    return sp.proc.returncode, out or "", err or ""


def run_trial(bed: Testbed, t: EngineTrial, intended_count: int | None = None) -> Measurement:
    """Receiver on the server's host, wait for READY, a sender on every generator host (the
    client, plus client2 ... from a hosts file, each sending 1/N of the trial), wait for the
    receiver's idle stop, parse the JSONs. Local and remote roles go through the same code: a
    remote host gets the engine shipped to it (testbed.ship)."""
    plan = bed.topo.plan
    dst = plan.server(t.ip_version)
    gens = generators(bed, t)
    rx_host = bed.host_for("server")
    dst_mac = next_hop_mac(bed) if t.backend in RAW_BACKENDS else None
    ready = rx_host.scratch_path(f"engine-ready-{os.getpid()}-{time.monotonic_ns()}")
    recv_args = build_recv_args(engine_on(bed, "server"), t, ready_file=ready)
    send_argvs = []
    for i, g in enumerate(gens):
        ti = split_trial(t, len(gens), i)
        if len(gens) > 1:
            ti = replace(ti, stream_id=g.stream_id)
        raw = t.backend in RAW_BACKENDS
        a = build_send_args(g.engine, ti, dst=dst, src=g.src if raw else None,
                            iface=g.iface if raw else None, dst_mac=dst_mac)
        if t.rt_priority:
            a = ["chrt", "-f", str(t.rt_priority), *a]
        send_argvs.append(a)
    rx = rx_host.spawn(recv_args, ns=bed.ns("server"))
    senders = []
    try:
        wait_ready(rx_host, rx, ready, "recv")
        before = bed.link_counters("server", bed.topo.server_if)
        for g, a in zip(gens, send_argvs):  # each kept as soon as it runs: the finally stops it
            senders.append(g.host.spawn(a, ns=g.ns))
        done = [_finish(sp, t.duration_s * 1.5 + 30) for sp in senders]
        # The receiver stops IDLE_TIMEOUT_S after the last packet (its socket drained);
        # SIGINT only if nothing ever arrived.
        try:
            rx.proc.wait(timeout=IDLE_TIMEOUT_S + 3.0)
        except subprocess.TimeoutExpired:
            pass
        rout, rerr = rx.stop(sig=2, wait_s=5.0)
        after = bed.link_counters("server", bed.topo.server_if)
    finally:
        if rx.proc.poll() is None:
            rx.stop()
        rx_host.forget(rx)
        for g, sp in zip(gens, senders):
            if sp.proc.poll() is None:
                sp.stop()
            g.host.forget(sp)
    for g, (rc, _, err) in zip(gens, done):
        if rc != 0:
            raise RunnerError(f"fwlab-engine send on {g.role} failed (exit {rc}): {err.strip()[:200]}",
                              fix="check the test bed and the firewall's permit rule")
    sends = [parse_result(out, "send") for _, out, _ in done]
    if not rout.strip():
        raise RunnerError(f"fwlab-engine recv printed nothing (exit {rx.proc.returncode}): {rerr.strip()[:200]}",
                          fix="check the engine build ('make engine')")
    recv = parse_result(rout, "recv")
    agg = aggregate(sends, recv, [(g.role, g.stream_id, clock_of(bed, g.role).offset_s) for g in gens])
    m = metrics_from(agg["send"], recv, t.frame_size, intended_count,
                     rx_pps=agg["rx_pps"] if len(gens) > 1 else None)
    m.metrics["server_if_rx_packets"] = after["rx_packets"] - before["rx_packets"]
    m.metrics["rx_stop_reason"] = recv.get("stop_reason")
    m.metrics["latency_clocks"] = clocks = latency_clocks(bed, gens[0].role)
    flag = clock_flag(clocks, m.metrics.get("latency_ns"))
    if flag:
        m.flags.append(flag)
    if len(gens) > 1:
        m.metrics["generators"] = agg["generators"]
        m.metrics["start_skew_s"] = agg["start_skew_s"]
        m.metrics["common_interval_s"] = agg["common_interval_s"]
        m.metrics["throughput_basis"] += (f"; {len(gens)} generator hosts: the sum of each one's "
                                          f"received rate, i.e. the rate over their common interval")
        shortest = min((p["elapsed_s"] or 0) for p in agg["generators"])
        flag = skew_flag(agg["common_interval_s"], shortest, agg["start_skew_s"],
                         f"the {len(gens)} generator hosts", "the aggregate rate overstates the load")
        if flag:
            m.flags.append(flag)
    shipped = shipped_engines(bed)
    if shipped:
        m.metrics["engine_shipped"] = shipped
    m.raw["argv"] = {"send": send_argvs[0] if len(send_argvs) == 1 else send_argvs, "recv": recv_args}
    if len(sends) > 1:
        m.raw["engine_send_jsons"] = sends  # each generator's own; engine_send_json is their sum
    return m


def run_bidir_trial(bed: Testbed, t: EngineTrial, intended_count: int | None = None) -> Measurement:
    """RFC 2544 bidirectional: two engine senders at once, client to server and server to
    client, each at ``t``'s rate (the load is per direction, as RFC 2544 offers it), each with its
    own receiver on the far side; the result is :func:`combine_directions`. Both senders run on
    the tester's CPUs (the client's; the server's CPU is the DUT's in device model napi), both
    receivers too. A local bed with one client and the udp backend only."""
    if t.backend != "udp":
        raise RunnerError(f"a bidirectional engine trial sends UDP (backend udp), not '{t.backend}'",
                          fix="use engine_backend = \"udp\" with direction = \"bidir\"")
    if any(bed.is_remote(r) for r in ("client", "server")) or len(generator_roles(bed)) > 1:
        raise RunnerError("a bidirectional engine trial needs a local bed with one client",
                          fix="run direction = \"bidir\" without a hosts file, or use direction = \"up\"")
    plan = bed.topo.plan
    engine = require_engine()
    host = bed.host_for("client")
    legs = {"up": ("client", "server", plan.server(t.ip_version)),
            "down": ("server", "client", plan.client(t.ip_version))}
    readies, recv_args, send_args = {}, {}, {}
    for d, (_tx, rx, dst) in legs.items():
        readies[d] = host.scratch_path(f"engine-ready-{d}-{os.getpid()}-{time.monotonic_ns()}")
        recv_args[d] = build_recv_args(engine, t, ready_file=readies[d])
        a = build_send_args(engine, replace(t, stream_id=1 if d == "up" else 1 + STREAM_STRIDE), dst=dst)
        send_args[d] = ["chrt", "-f", str(t.rt_priority), *a] if t.rt_priority else a
    rxs = {d: host.spawn(recv_args[d], ns=bed.ns(legs[d][1])) for d in legs}
    senders: dict = {}
    done: dict = {}
    outs: dict = {}
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S  # both receivers within one timeout
        for d, rx in rxs.items():
            wait_ready(host, rx, readies[d], f"recv ({d})", timeout_s=max(0.0, deadline - time.monotonic()))
        for d in legs:  # each kept as soon as it runs: the finally stops it
            senders[d] = host.spawn(send_args[d], ns=bed.ns(legs[d][0]))
        done = {d: _finish(sp, t.duration_s * 1.5 + 30) for d, sp in senders.items()}
        for d, rx in rxs.items():
            try:
                rx.proc.wait(timeout=IDLE_TIMEOUT_S + 3.0)
            except subprocess.TimeoutExpired:
                pass
            outs[d] = rx.stop(sig=2, wait_s=5.0)
    finally:
        for rx in rxs.values():
            if rx.proc.poll() is None:
                rx.stop()
            host.forget(rx)
        for sp in senders.values():
            if sp.proc.poll() is None:
                sp.stop()
            host.forget(sp)
    ms, starts = {}, {}
    for d in legs:
        rc, out, err = done[d]
        if rc != 0:
            raise RunnerError(f"fwlab-engine send ({d}, from the {legs[d][0]}) failed (exit {rc}): {err.strip()[:200]}",
                              fix="check the test bed and the firewall's permit rules in both directions")
        rout, rerr = outs[d]
        if not rout.strip():
            raise RunnerError(f"fwlab-engine recv ({d}) printed nothing: {rerr.strip()[:200]}",
                              fix="check the engine build ('make engine')")
        send = parse_result(out, "send")
        ms[d] = metrics_from(send, parse_result(rout, "recv"), t.frame_size, intended_count)
        starts[d] = send["started_unix_ns"] / 1e9 if send.get("started_unix_ns") else None
    m = combine_directions(ms["up"], ms["down"], starts["up"], starts["down"])
    m.raw["argv"] = {"send": [send_args["up"], send_args["down"]], "recv": [recv_args["up"], recv_args["down"]]}
    return m


# -- the runner --------------------------------------------------------------------------------
def trial_from_spec(bed: Testbed, spec: TrafficSpec, backend: str = "udp") -> EngineTrial:
    """TrafficSpec -> EngineTrial: ``size_bytes`` is the Ethernet frame size (incl. FCS),
    ``streams`` the sender threads, ``rate_bps`` frame bits/s (None = max)."""
    frame = spec.size_bytes or default_frame_size(spec.ip_version)
    rate_pps = spec.rate_bps / (8 * frame) if spec.rate_bps else None
    send_cpus, recv_cpus = default_cpus(bed, spec.streams)
    new_flows = spec.options.get("new_flows")
    if new_flows:  # the udp backend opens a socket per source port (at most 4096)
        backend = "packet"
    dst, dst_port = spec.target if spec.target else (None, None)
    flows = spec.flows or {}
    if flows:  # any source address: raw frames
        backend = "packet"
        dst = flows["dst"]
    return EngineTrial(duration_s=spec.duration_s, rate_pps=rate_pps, frame_size=frame,
                       ip_version=spec.ip_version, backend=backend, threads=spec.streams,
                       send_cpus=send_cpus, recv_cpus=recv_cpus, dst=dst, dst_port=dst_port,
                       count=new_flows or None,
                       src_ports=(NEW_FLOW_PORT0, NEW_FLOW_PORT0 + new_flows - 1) if new_flows else None,
                       src_range=flows.get("src"), dst_port_range=flows.get("dst_port"))


class EngineRunner(Runner):
    name = "engine"
    remote_roles = True
    splits_generators = True  #: senders on client, client2 ...; one receiver on the server
    traffics = ("engine",)
    trial_overhead_s = {"engine": 1.2}
    frame_sizes = True
    summary = ("fwlab-engine: UDP test packets at a given rate or max; exact offered/forwarded "
               "counts, loss, reordering, latency percentiles")

    def unavailable(self) -> str | None:
        return engine_unavailable()

    def version(self) -> str:
        return engine_version()

    def check_options(self, kind: str, options: dict[str, Any]) -> dict[str, Any]:
        """``new_flows = N``: send exactly N frames (packet backend), each from its own source port (1024 on), so
        every frame is a connection-tracking flow's first packet (what NAT rules see); the
        trial then lasts as long as the N frames take, ``duration_s`` is not used."""
        extra = sorted(set(options) - {"new_flows"})
        if extra:
            raise ValueError(f"tool 'engine' takes only the option new_flows (got: {', '.join(extra)})")
        n = options.get("new_flows")
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_NEW_FLOWS):
            raise ValueError(f"engine option new_flows must be an integer 1..{MAX_NEW_FLOWS} (got {n!r})")
        return options

    def measure(self, bed: Testbed, spec: TrafficSpec, env=None) -> Measurement:
        if spec.traffic != "engine":
            raise RunnerError(f"the engine runner cannot generate '{spec.traffic}'", fix="use kind = \"engine\"")
        t = trial_from_spec(bed, spec)
        intended = round(t.rate_pps * t.duration_s) if t.rate_pps else None
        return run_trial(bed, t, intended)


register(EngineRunner())


# -- the measurer (searches) -------------------------------------------------------------------
@dataclass
class EngineMeasurer:
    """:class:`fwlab.search.Measurer` on a built test bed: one engine trial per ``measure``."""

    bed: Testbed
    frame_size: int = 64
    ip_version: int = 4
    backend: str = "udp"
    threads: int = 1
    batch: int | None = None  #: frames per send call; keep it well below the DUT ring (256) in device model napi
    max_lag: int | None = None  #: the engine's catch-up limit [packets] (see EngineTrial)
    rt_priority: int | None = None  #: the sender's SCHED_FIFO priority (see EngineTrial)
    #: if set, the batch follows the load: the frames due in this window [us], within 4..64 (so the
    #: bursts stay short at low loads and the sender keeps up at high ones); overrides ``batch``
    batch_window_us: float | None = None
    #: RFC 2544 bidirectional: a second sender from the server to the client at the same load
    #: (``load_pps`` is per direction; counts and loss are over both directions)
    bidir: bool = False

    #: with a real-time sender: busy-wait at most this long before a batch is due [us] and sleep
    #: the rest, so the sender stays well below the kernel's RT limit (a SCHED_FIFO thread busy
    #: over 95 % of a second is stopped for the rest of it: sched_rt_runtime_us)
    RT_SPIN_US = 10

    def batch_for(self, load_pps: float) -> int | None:
        if self.batch_window_us is None:
            return self.batch
        return max(4, min(64, math.ceil(load_pps * self.batch_window_us / 1e6)))
    last: Measurement | None = field(default=None, repr=False)

    def measure(self, duration_s: float, load_pps: float) -> TrialResult:
        self.last = None  # never a previous trial's measurement
        intended = round(load_pps * duration_s)
        if intended <= 0:
            return TrialResult(duration_s=duration_s, intended_load_pps=max(0.0, load_pps),
                               intended_count=0, offered_count=0, forwarded_count=0)
        send_cpus, recv_cpus = default_cpus(self.bed, self.threads)
        batch = self.batch_for(load_pps)
        # batch_window_us: the frames due in one window leave together (burst = batch), so the
        # sender sleeps between windows instead of spinning for every frame.
        burst = batch if (self.batch_window_us is not None and batch) else 1
        t = EngineTrial(duration_s=duration_s, rate_pps=load_pps, frame_size=self.frame_size,
                        ip_version=self.ip_version, backend=self.backend, threads=self.threads,
                        send_cpus=send_cpus, recv_cpus=recv_cpus, batch=batch, burst=burst,
                        max_lag=self.max_lag, rt_priority=self.rt_priority,
                        spin_us=self.RT_SPIN_US if self.rt_priority else None)
        legs = [("client", self.bed.topo.client_if)] + ([("server", self.bed.topo.server_if)] if self.bidir else [])
        before = [self.bed.link_counters(role, dev) for role, dev in legs]
        m = run_bidir_trial(self.bed, t, intended) if self.bidir else run_trial(self.bed, t, intended)
        after = [self.bed.link_counters(role, dev) for role, dev in legs]
        self.last = m
        mt = m.metrics
        lat = mt.get("latency_ns")
        return TrialResult(
            duration_s=duration_s, intended_load_pps=load_pps, intended_count=intended * len(legs),
            offered_count=mt["offered_count"], forwarded_count=mt["forwarded_count"],
            latency={f"{k}_ns": v for k, v in lat.items()} if lat else None,
            extra={"tool": "fwlab-engine", "engine_generator_short": mt["generator_short"],
                   "tx_pps": mt["tx_pps"], "jitter_ns": mt["jitter_ns"], "reordered": mt["reordered"],
                   "duplicated": mt["duplicated"], "pinning": mt["pinning"], "flags": m.flags,
                   "socket_drops": mt.get("socket_drops"), "start_skew_s": mt.get("start_skew_s"),
                   "common_interval_s": mt.get("common_interval_s"),
                   # frames the sender's veth could not put into the DUT's receive ring: the DUT's
                   # ingress drops in device model "napi" (veth counts them as its tx_dropped)
                   "dut_ingress_drops": sum(a["tx_dropped"] - b["tx_dropped"] for a, b in zip(after, before)),
                   "argv": m.raw.get("argv")})


__all__ = ["EngineMeasurer", "EngineRunner", "next_hop_mac", "run_bidir_trial", "run_trial", "wait_ready"]
