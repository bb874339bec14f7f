"""The fwlab-engine runner: rate-controlled, sequence-numbered, timestamped test traffic.

Owns: locating the ``fwlab-engine`` binary, its ``recv`` and ``send`` command lines, running one
trial (receiver in the server namespace, sender in the client namespace), and turning the two
JSON results into a :class:`Measurement` (and, for searches, a :class:`TrialResult` through
:class:`EngineMeasurer`). Never touches the firewall or the test bed's construction.

Counting (engine/README.md): ``offered_count`` is what the kernel accepted from the sender;
``forwarded_count`` is the receiver's count of distinct test packets (duplicates excluded);
loss = offered - forwarded, so tail loss is counted too. Rates and ``throughput_bps`` are
Ethernet frame rates: ``throughput_bps`` = received frames x frame size (including the 4-byte
FCS) x 8 / the sender's elapsed time [bit/s] — RFC 2544 frame bits, without preamble and gap.

The receiver is started with ``--idle-timeout-s``: it stops by itself once nothing has arrived
for that long, so every packet still queued in its socket has been read (the engine stops at once
on SIGINT, without draining its socket). SIGINT is only the fallback when nothing arrives at all.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fwlab
from fwlab.errors import RunnerError
from fwlab.runners.base import Measurement, Runner, TrafficSpec, register
from fwlab.search.measurer import TrialResult

if TYPE_CHECKING:
    from fwlab.testbed.bed import Testbed

ENV_VAR = "FWLAB_ENGINE"
REPO_BINARY = Path(fwlab.__file__).resolve().parents[2] / "engine" / "target" / "release" / "fwlab-engine"
ENGINE_PORT = 5555  #: UDP port of the receiver (iperf3 uses 5201 in the same bed)
IDLE_TIMEOUT_S = 0.5  #: the receiver stops this long after the last packet [s]
READY_TIMEOUT_S = 5.0
BACKENDS = ("udp", "packet", "packet-mmsg")
#: backends that send raw Ethernet frames (need the interface, a source address and the next hop's MAC)
RAW_BACKENDS = ("packet", "packet-mmsg")
#: option new_flows: source ports from here on, one per packet, so each packet opens a new flow
NEW_FLOW_PORT0 = 1024
MAX_NEW_FLOWS = 65535 - NEW_FLOW_PORT0 + 1
LATENCY_KEYS = ("min", "mean", "p50", "p90", "p99", "p999", "max")


def find_engine() -> str | None:
    """Path of fwlab-engine: $FWLAB_ENGINE, else the repository's release build, else PATH."""
    env = os.environ.get(ENV_VAR)
    if env:
        return env if os.access(env, os.X_OK) else None
    if os.access(REPO_BINARY, os.X_OK):
        return str(REPO_BINARY)
    return shutil.which("fwlab-engine")


def require_engine() -> str:
    path = find_engine()
    if path is None:
        raise RunnerError(_missing_text(), fix="run 'make engine' (cargo build --release in engine/)")
    return path


def engine_unavailable() -> str | None:
    """Why fwlab-engine cannot run here (not built), or None: every engine-based runner's
    ``unavailable()``."""
    return None if find_engine() else _missing_text()


def _missing_text() -> str:
    env = os.environ.get(ENV_VAR)
    if env:
        return f"${ENV_VAR}={env} is not an executable file"
    return (f"fwlab-engine is not built ({REPO_BINARY} missing, none on PATH): "
            f"'make' builds it (cargo build --release in engine/)")


def default_frame_size(ip_version: int) -> int:
    return 64 if ip_version == 4 else 78


@dataclass(frozen=True)
class EngineTrial:
    """What one engine trial should do."""

    duration_s: float  #: sending time [s]
    rate_pps: float | None = None  #: intended rate [packets/s]; None = max
    frame_size: int = 64  #: Ethernet frame incl. FCS [bytes]
    ip_version: int = 4
    backend: str = "udp"  #: send backend: udp | packet
    threads: int = 1  #: sender threads
    send_cpus: tuple[int, ...] | None = None  #: sender pinning (one, or one per thread); None = not pinned
    recv_cpus: tuple[int, ...] | None = None  #: receiver pinning
    port: int = ENGINE_PORT
    burst: int = 1
    count: int | None = None  #: send exactly this many frames instead of for duration_s (back-to-back)
    batch: int | None = None  #: frames per send call (the engine's default when None); bounds the bursts
    max_lag: int | None = None  #: catch-up limit [packets]: beyond it packets are skipped, not burst (None: catch up)
    rt_priority: int | None = None  #: run the sender under SCHED_FIFO at this priority (None: normal scheduling)
    spin_us: int | None = None  #: longest busy-wait before a send time [us] (None: the engine's default, 60)
    dst: str | None = None  #: send to this address instead of the server's (e.g. a DNATed Service ClusterIP)
    dst_port: int | None = None  #: ... and this port (None: ``port``)
    #: source ports LO-HI walked in order (one flow each); None: one fixed source port
    src_ports: tuple[int, int] | None = None


# -- command lines -----------------------------------------------------------------------------
def _cpu_list(cpus: tuple[int, ...] | None) -> list[str]:
    return ["--cpu", ",".join(str(c) for c in cpus)] if cpus else []


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.6g}"


def build_recv_args(engine: str, t: EngineTrial, *, ready_file: str, bind: str | None = None,
                    backstop_s: float | None = None) -> list[str]:
    """``fwlab-engine recv``: UDP socket on the server, idle stop, a duration backstop."""
    bind = bind or ("0.0.0.0" if t.ip_version == 4 else "::")
    backstop_s = backstop_s if backstop_s is not None else t.duration_s * 2 + 10
    return [engine, "recv", "--backend", "udp", "--bind", bind, "--port", str(t.port),
            "--idle-timeout-s", _num(IDLE_TIMEOUT_S), "--duration-s", _num(round(backstop_s, 3)),
            "--ready-file", ready_file, *_cpu_list(t.recv_cpus)]


def build_send_args(engine: str, t: EngineTrial, *, dst: str, src: str | None = None,
                    iface: str | None = None, dst_mac: str | None = None) -> list[str]:
    """``fwlab-engine send`` for ``t``: one destination, fixed ports (one flow per thread)."""
    if t.backend not in BACKENDS:
        raise RunnerError(f"unknown engine backend '{t.backend}'", fix=f"use one of {', '.join(BACKENDS)}")
    rate = "max" if t.rate_pps is None else _num(round(t.rate_pps, 3))
    args = [engine, "send", "--backend", t.backend, "--dst", t.dst or dst,
            "--dst-port", str(t.dst_port or t.port), "--frame-size", str(t.frame_size), "--rate-pps", rate]
    if t.src_ports:
        args += ["--src-port", f"{t.src_ports[0]}-{t.src_ports[1]}"]
    args += ["--count", str(t.count)] if t.count else ["--duration-s", _num(t.duration_s)]
    if t.threads > 1:
        args += ["--threads", str(t.threads)]
    if t.burst > 1:
        args += ["--burst", str(t.burst)]
    if t.batch:
        args += ["--batch", str(t.batch)]
    if t.max_lag:
        args += ["--max-lag", str(t.max_lag)]
    if t.spin_us is not None:
        args += ["--spin-us", str(t.spin_us)]
    args += _cpu_list(t.send_cpus)
    if t.backend in RAW_BACKENDS:
        if not (iface and dst_mac and src):
            raise RunnerError("the engine's packet backend needs an interface, a source address and "
                              "the next hop's MAC", fix="pass iface, src and dst_mac")
        args += ["--iface", iface, "--src", src, "--dst-mac", dst_mac]
    elif src:
        args += ["--src", src]
    return args


# -- parsing -----------------------------------------------------------------------------------
def parse_result(text: str, kind: str) -> dict:
    """One engine JSON document of ``kind`` ("send" or "recv")."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunnerError(f"fwlab-engine {kind} printed no JSON ({exc.msg})",
                          fix="run 'make engine' to rebuild it; see its stderr") from exc
    if not isinstance(doc, dict) or doc.get("kind") != kind:
        raise RunnerError(f"fwlab-engine {kind} printed a '{doc.get('kind') if isinstance(doc, dict) else '?'}' "
                          f"document", fix="check the engine version (schema_version 1)")
    if doc.get("schema_version") != 1:
        raise RunnerError(f"fwlab-engine {kind} JSON has schema_version {doc.get('schema_version')}, "
                          f"fwlab reads 1", fix="use the engine built from this checkout ('make engine')")
    return doc


def metrics_from(send: dict, recv: dict, frame_size: int, intended_count: int | None = None
                 ) -> Measurement:
    """Measurement from the engine's send and recv documents.

    ``intended_count``: what the caller asked for (rate x duration); the engine's own value is
    used when given, and None for ``max``.
    """
    total = recv.get("total") or {}
    offered = int(send.get("offered_count") or 0)
    forwarded = int(total.get("unique") or 0)
    intended = send.get("intended_count")
    if intended is None:
        intended = intended_count
    elapsed = float(send.get("elapsed_s") or 0) or None
    lat = total.get("latency_ns") or {}
    latency = {k: lat.get(k) for k in LATENCY_KEYS} if lat.get("samples") else None
    rx_pps = forwarded / elapsed if elapsed else None
    metrics: dict[str, Any] = {
        "intended_count": intended,
        "intended_pps": send.get("intended_pps"),
        "offered_count": offered,
        "forwarded_count": forwarded,
        "tx_packets": offered,
        "rx_packets": forwarded,
        "lost": offered - forwarded,
        "loss_ratio": (offered - forwarded) / offered if offered else None,
        "tx_pps": send.get("achieved_pps"),
        "rx_pps": rx_pps,
        "throughput_bps": rx_pps * frame_size * 8 if rx_pps is not None else None,
        "throughput_basis": "Ethernet frame bits incl. 4-byte FCS (no preamble/gap)",
        "frame_size": frame_size,
        "latency_ns": latency,
        "latency_samples": lat.get("samples"),
        # every packet's latency: HdrHistogram V2 compressed, base64 (fwlab.stats.latency reads it)
        "latency_hdr_b64": total.get("latency_hdr_b64") if latency else None,
        "latency_hdr_unit": total.get("latency_hdr_unit") if latency and total.get("latency_hdr_b64") else None,
        "jitter_ns": total.get("jitter_ns"),
        "reordered": total.get("reordered"),
        "duplicated": total.get("duplicated"),
        "late": total.get("late"),
        "receiver_lost": total.get("lost"),
        "foreign": recv.get("foreign"),
        "socket_drops": recv.get("socket_drops"),
        "generator_short": bool(send.get("generator_short")),
        "send_errors": send.get("errors"),
        "lag_skipped_count": send.get("lag_skipped_count"),
        "duration_s": elapsed,
        "pinning": {"send": send.get("cpu_pinning"), "recv": recv.get("cpu_pinning"),
                    "send_observed": [t.get("cpu_observed") for t in send.get("threads") or []]},
        "backend": send.get("backend"),
        "threads": len(send.get("threads") or []) or None,
    }
    flags = []
    if send.get("generator_short"):
        flags.append({"code": "generator-short", "severity": "warning",
                      "message": f"fwlab-engine sent {offered} of {intended} intended packets "
                                 f"({send.get('achieved_pps') or 0:.0f} pps achieved): this trial says "
                                 f"nothing about the DUT at the intended rate"})
    if recv.get("socket_drops"):
        flags.append({"code": "receiver-bound", "severity": "warning",
                      "message": f"the engine's receiver socket dropped {recv['socket_drops']} packets: "
                                 f"receiver loss, not DUT loss"})
    if send.get("errors"):
        flags.append({"code": "send-errors", "severity": "warning",
                      "message": f"{send['errors']} failed send calls ({send.get('first_error')})"})
    return Measurement(metrics=metrics, flags=flags, raw={"engine_send_json": send, "engine_recv_json": recv})


# -- running -----------------------------------------------------------------------------------
def next_hop_mac(bed: Testbed) -> str:
    """MAC the client's frames go to: the DUT's client-side interface (routed), else the server's."""
    if bed.topo.mode == "routed":
        role, dev = "dut", bed.topo.dut_client_if
    else:
        role, dev = "server", bed.topo.server_if
    cp = bed.sh(role, "ip", "-j", "link", "show", dev)
    return json.loads(cp.stdout)[0]["address"]


def default_cpus(bed: Testbed, threads: int) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """Sender and receiver pinning from the test bed: one sender thread on the client CPU; with
    several threads, consecutive CPUs from the client CPU on (wrapping around). The receiver runs
    on the server CPU, except in device model "napi" when that is the DUT's CPU: the DUT's NAPI
    thread (SCHED_FIFO) would starve it near the DUT's capacity and its socket drops would look
    like DUT loss, so it joins the sender on the tester's CPU."""
    p = bed.topo.pinning
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


def run_trial(bed: Testbed, t: EngineTrial, intended_count: int | None = None) -> Measurement:
    """Receiver in the server namespace, wait for READY, sender in the client namespace, wait
    for the receiver's idle stop, parse both JSONs."""
    engine = require_engine()
    remote = [r for r in ("client", "server") if bed.is_remote(r)]
    if remote:  # local binary and ready file; its latency would also need the clock offsets
        raise RunnerError(f"fwlab-engine runs only on local roles so far ({', '.join(remote)} is remote)",
                          fix="use iperf3 or netperf for remote client/server roles")
    plan = bed.topo.plan
    dst = plan.server(t.ip_version)
    src = plan.client(t.ip_version)
    iface = dst_mac = None
    if t.backend in RAW_BACKENDS:
        iface = bed.topo.client_if
        dst_mac = next_hop_mac(bed)
    with tempfile.TemporaryDirectory(prefix="fwlab-engine-") as tmp:
        ready = os.path.join(tmp, "ready")
        recv_args = build_recv_args(engine, t, ready_file=ready)
        send_args = build_send_args(engine, t, dst=dst, src=src if t.backend in RAW_BACKENDS else None,
                                    iface=iface, dst_mac=dst_mac)
        if t.rt_priority:
            send_args = ["chrt", "-f", str(t.rt_priority), *send_args]
        rx = bed.host.spawn(recv_args, ns=bed.ns("server"))
        try:
            deadline = time.monotonic() + READY_TIMEOUT_S
            while not os.path.exists(ready):
                if rx.proc.poll() is not None or time.monotonic() > deadline:
                    _, err = rx.stop()
                    raise RunnerError(f"fwlab-engine recv did not become ready: {err.strip()[:200] or 'no output'}",
                                      fix="run 'fwlab clean'; check the engine build")
                time.sleep(0.01)
            before = bed.link_counters("server", bed.topo.server_if)
            try:
                cp = bed.host.run(send_args, ns=bed.ns("client"), check=False,
                                  timeout_s=t.duration_s * 1.5 + 30)
            except Exception:
                rx.stop(sig=2)
                raise
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
            bed.host.forget(rx)
    if cp.returncode != 0:
        raise RunnerError(f"fwlab-engine send failed (exit {cp.returncode}): {cp.stderr.strip()[:200]}",
                          fix="check the test bed and the firewall's permit rule")
    send = parse_result(cp.stdout, "send")
    if not rout.strip():
        raise RunnerError(f"fwlab-engine recv printed nothing (exit {rx.proc.returncode}): {rerr.strip()[:200]}",
                          fix="check the engine build ('make engine')")
    recv = parse_result(rout, "recv")
    m = metrics_from(send, recv, t.frame_size, intended_count)
    m.metrics["server_if_rx_packets"] = after["rx_packets"] - before["rx_packets"]
    m.metrics["rx_stop_reason"] = recv.get("stop_reason")
    m.raw["argv"] = {"send": send_args, "recv": recv_args}
    return m


def engine_version() -> str:
    engine = find_engine()
    if engine is None:
        return "fwlab-engine (not built)"
    cp = subprocess.run([engine, "version"], capture_output=True, text=True, timeout=10, check=False)
    try:
        doc = json.loads(cp.stdout)
        return f"fwlab-engine {doc['version']} (schema {doc['schema_version']})"
    except (json.JSONDecodeError, KeyError):
        return "fwlab-engine (unknown version)"


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
    return EngineTrial(duration_s=spec.duration_s, rate_pps=rate_pps, frame_size=frame,
                       ip_version=spec.ip_version, backend=backend, threads=spec.streams,
                       send_cpus=send_cpus, recv_cpus=recv_cpus, dst=dst, dst_port=dst_port,
                       count=new_flows or None,
                       src_ports=(NEW_FLOW_PORT0, NEW_FLOW_PORT0 + new_flows - 1) if new_flows else None)


class EngineRunner(Runner):
    name = "engine"
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
        role, dev = "client", self.bed.topo.client_if
        before = self.bed.link_counters(role, dev)
        m = run_trial(self.bed, t, intended)
        after = self.bed.link_counters(role, dev)
        self.last = m
        mt = m.metrics
        lat = mt.get("latency_ns")
        return TrialResult(
            duration_s=duration_s, intended_load_pps=load_pps, intended_count=intended,
            offered_count=mt["offered_count"], forwarded_count=mt["forwarded_count"],
            latency={f"{k}_ns": v for k, v in lat.items()} if lat else None,
            extra={"tool": "fwlab-engine", "engine_generator_short": mt["generator_short"],
                   "tx_pps": mt["tx_pps"], "jitter_ns": mt["jitter_ns"], "reordered": mt["reordered"],
                   "duplicated": mt["duplicated"], "pinning": mt["pinning"], "flags": m.flags,
                   "socket_drops": mt.get("socket_drops"),
                   # frames the sender's veth could not put into the DUT's receive ring: the DUT's
                   # ingress drops in device model "napi" (veth counts them as its tx_dropped)
                   "dut_ingress_drops": after["tx_dropped"] - before["tx_dropped"],
                   "argv": m.raw.get("argv")})


__all__ = ["EngineMeasurer", "EngineRunner", "EngineTrial", "build_recv_args", "build_send_args",
           "find_engine", "metrics_from", "next_hop_mac", "parse_result", "run_trial"]
