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
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fwlab
from fwlab.errors import RunnerError
from fwlab.runners.base import Measurement, Runner, TrafficSpec, register, skew_flag, span_overlap
from fwlab.search.measurer import TrialResult
from fwlab.testbed.clock import ZERO, ClockOffset, one_way_correction_s
from fwlab.testbed.host import Host
from fwlab.testbed.provide import provide

if TYPE_CHECKING:
    from fwlab.testbed.bed import Testbed
    from fwlab.testbed.hosts import HostEntry
    from fwlab.testbed.ship import Shipped

ENV_VAR = "FWLAB_ENGINE"
SRC_ENV_VAR = "FWLAB_ENGINE_SRC"  #: the engine's sources, for building it on a remote host
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
#: the receiver's per-packet counts (``metrics_from``): a bidirectional trial sums its two directions'
RECEIVER_COUNTS = ("reordered", "duplicated", "late", "receiver_lost", "foreign")


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
    stream_id: int | None = None  #: first sender thread's stream id (None: the engine's default, 1)
    #: flows spread over ranges (TrafficSpec.flows): source addresses "A-B" (packet backend) and
    #: destination ports "LO-HI", walked together with ``dst`` (then also a range)
    src_range: str | None = None
    dst_port_range: str | None = None


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
            "--dst-port", t.dst_port_range or str(t.dst_port or t.port), "--frame-size", str(t.frame_size), "--rate-pps", rate]
    if t.src_ports:
        args += ["--src-port", f"{t.src_ports[0]}-{t.src_ports[1]}"]
    args += ["--count", str(t.count)] if t.count else ["--duration-s", _num(t.duration_s)]
    if t.threads > 1:
        args += ["--threads", str(t.threads)]
    if t.stream_id is not None:
        args += ["--stream-id", str(t.stream_id)]
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
        args += ["--iface", iface, "--src", t.src_range or src, "--dst-mac", dst_mac]
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


def metrics_from(send: dict, recv: dict, frame_size: int, intended_count: int | None = None,
                 rx_pps: float | None = None) -> Measurement:
    """Measurement from the engine's send and recv documents.

    ``intended_count``: what the caller asked for (rate x duration); the engine's own value is
    used when given, and None for ``max``. ``rx_pps``: the received rate when it is not the
    forwarded count over the sender's time (several generators: see :func:`aggregate`).
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
    if rx_pps is None:
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


def engine_on(bed: Testbed, role: str) -> str:
    """The engine's path for ``role``: the local build, or on a remote host the same binary
    shipped there (checked by SHA-256 and by its ``version`` answer; see testbed.ship)."""
    local = require_engine()
    if not bed.is_remote(role):
        return local
    host = bed.host_for(role)
    got = host.__dict__.get("_fwlab_engine")
    if got is not None:
        return got.path
    shipped = place_engine(host, bed.placement.entry(role), local)
    host.__dict__["_fwlab_engine"] = shipped
    return shipped.path


def place_engine(host: Host, entry: HostEntry, local: str) -> Shipped:
    """The engine ready on a remote ``host``: the local build ``local`` copied, or built there
    (testbed.provide); either must answer ``version`` as the local build does."""
    want = engine_version()

    def check(path: str) -> str | None:
        cp = host.run([path, "version"], check=False, timeout_s=30)
        there = _version_text(cp.stdout)
        if cp.returncode == 0 and there == want:
            return None
        return f"{there or cp.stderr.strip()[:120] or f'exit {cp.returncode}'}; here: {want}"
    return provide(host, local, "fwlab-engine", source_dir=lambda: engine_source_dir(local),
                   cache_dir=entry.cache_dir, keep=entry.keep_engine, check=check)


def engine_source_dir(binary: str) -> Path:
    """The engine's cargo tree for a build on another host: $FWLAB_ENGINE_SRC, else the tree
    ``binary`` was built in (``<tree>/target/release/fwlab-engine``), else this checkout's."""
    env = os.environ.get(SRC_ENV_VAR)
    if env:
        return Path(env)
    b = Path(binary).resolve()
    if len(b.parents) > 2 and b.parent.name == "release" and b.parents[1].name == "target" \
            and (b.parents[2] / "Cargo.toml").is_file():
        return b.parents[2]
    return REPO_BINARY.parents[2]


def shipped_engines(bed: Testbed) -> dict[str, dict]:
    """What the engine shipping did per remote role (path, hash, cached, kept)."""
    out = {}
    for r in generator_roles(bed) + ["server", "atk"]:
        if bed.is_remote(r):
            s = bed.host_for(r).__dict__.get("_fwlab_engine")
            if s is not None:
                out[r] = s.to_dict()
    return out


def generator_roles(bed: Testbed) -> list[str]:
    """``client`` and, with a hosts file naming more generator hosts, ``client2`` ..."""
    if bed.placement is None:
        return ["client"]
    return list(bed.placement.generator_roles)


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


def split_trial(t: EngineTrial, n: int, i: int) -> EngineTrial:
    """Generator ``i``'s share of ``t`` among ``n``: rate / n; a fixed count and source-port range
    split into consecutive parts (the first ones one larger when it does not divide)."""
    if n == 1:
        return t
    rate = t.rate_pps / n if t.rate_pps is not None else None
    count, ports = t.count, t.src_ports
    if t.count:
        if t.count < n:
            raise RunnerError(f"{t.count} frames cannot be split across {n} generator hosts",
                              fix="send at least one frame per generator host")
        q, r = divmod(t.count, n)
        count = q + (1 if i < r else 0)
        if t.src_ports:
            lo = t.src_ports[0] + i * q + min(i, r)
            ports = (lo, lo + count - 1)
    return replace(t, rate_pps=rate, count=count, src_ports=ports)


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


def aggregate(sends: list[dict], recv: dict, gens: list[tuple[str, int, float]]) -> dict:
    """Several generators' send documents as one, and their common interval.

    ``gens``: (role, first stream id, that host's clock offset to this machine [s]) in the order
    of ``sends``. Each generator's received rate is its own distinct packets over its own sending
    time; the aggregate rate is their sum: the rate while all of them send, i.e. over their common
    interval [latest start, earliest end] (start times put on this machine's clock).
    """
    streams = recv.get("streams") or []
    per = []
    for (role, sid0, off), sd in zip(gens, sends):
        n_thr = len(sd.get("threads") or []) or 1
        fwd = sum(int(s.get("unique") or 0) for s in streams
                  if sid0 <= int(s.get("stream_id", -1)) < sid0 + n_thr)
        el = float(sd.get("elapsed_s") or 0)
        start = (sd["started_unix_ns"] / 1e9 - off) if sd.get("started_unix_ns") else None
        per.append({"role": role, "stream_ids": [sid0, sid0 + n_thr - 1],
                    "offered_count": int(sd.get("offered_count") or 0), "forwarded_count": fwd,
                    "elapsed_s": el or None, "rx_pps": fwd / el if el else None,
                    "tx_pps": sd.get("achieved_pps"), "start_local_s": start})
    skew, common = span_overlap([(p["start_local_s"], p["elapsed_s"]) for p in per])
    merged = dict(sends[0])

    def total(key):
        vals = [sd.get(key) for sd in sends]
        return None if any(v is None for v in vals) else sum(vals)
    merged.update({
        "offered_count": sum(int(sd.get("offered_count") or 0) for sd in sends),
        "intended_count": total("intended_count"), "intended_pps": total("intended_pps"),
        "achieved_pps": total("achieved_pps"), "errors": sum(int(sd.get("errors") or 0) for sd in sends),
        "lag_skipped_count": total("lag_skipped_count"),
        "generator_short": any(sd.get("generator_short") for sd in sends),
        "first_error": next((sd.get("first_error") for sd in sends if sd.get("first_error")), None),
        "elapsed_s": max(float(sd.get("elapsed_s") or 0) for sd in sends),
        "threads": [th for sd in sends for th in (sd.get("threads") or [])],
        "cpu_pinning": [sd.get("cpu_pinning") for sd in sends] if len(sends) > 1 else sends[0].get("cpu_pinning"),
    })
    rx = [p["rx_pps"] for p in per]
    return {"send": merged, "generators": per, "start_skew_s": skew, "common_interval_s": common,
            "rx_pps": sum(rx) if all(v is not None for v in rx) else None}


def clock_of(bed: Testbed, role: str) -> ClockOffset:
    if bed.placement is not None and role in bed.placement.clocks:
        return bed.placement.clocks[role]
    return ZERO


def latency_clocks(bed: Testbed, sender: str, receiver: str = "server") -> dict:
    """Whose clocks a one-way latency compares: one host's (exact) or two (needs synced clocks;
    the offset measured at run start says by how much they may differ)."""
    same = bed.host_for(sender) is bed.host_for(receiver)
    if same:
        return {"same_clock": True, "correction_s": 0.0, "uncertainty_s": 0.0}
    s, r = clock_of(bed, sender), clock_of(bed, receiver)
    return {"same_clock": False, "correction_s": one_way_correction_s(s, r),
            "uncertainty_s": s.uncertainty_s + r.uncertainty_s, "sender": sender, "receiver": receiver}


def clock_flag(clocks: dict, latency_ns: dict | None) -> dict | None:
    """A warning when a one-way latency spans two hosts' clocks whose offset uncertainty is
    larger than the figure itself (the median); None when one clock measured it or it is tighter."""
    if clocks["same_clock"] or not latency_ns or latency_ns.get("p50") is None:
        return None
    u_ns = clocks["uncertainty_s"] * 1e9
    if u_ns <= latency_ns["p50"]:
        return None
    return {"code": "clocks-unsynced", "severity": "warning",
            "message": f"one-way latency compares the clocks of two hosts ({clocks['sender']} -> "
                       f"{clocks['receiver']}); their offset is known only to +-{u_ns / 1e3:.0f} us, "
                       f"more than the median {latency_ns['p50'] / 1e3:.1f} us: synchronise the clocks "
                       f"(PTP) or read the round-trip figures"}


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


def combine_directions(up: Measurement, down: Measurement, up_start_s: float | None,
                       down_start_s: float | None) -> Measurement:
    """One bidirectional trial's Measurement from its two directions' (each from
    :func:`metrics_from`): offered, forwarded and intended counts summed (so the loss ratio is over
    both directions and a trial passes only when neither loses), rates summed (the aggregate),
    each direction's own figures under ``directions`` ("up": client to server, "down": server to
    client), and how far apart the two senders started (``start_skew_s``) and how long they both
    sent (``common_interval_s``). The receivers' counts (reordered, duplicated, late, lost, foreign)
    are summed too; latency and jitter are each path's own, so they are per direction only and
    the aggregate's are None with the reason under ``aggregate_missing``. Flags of either
    direction are kept, named by direction."""
    u, d = up.metrics, down.metrics

    def add(key):
        a, b = u.get(key), d.get(key)
        return None if a is None or b is None else a + b
    offered = int(u["offered_count"]) + int(d["offered_count"])
    forwarded = int(u["forwarded_count"]) + int(d["forwarded_count"])
    keep = ("intended_count", "offered_count", "forwarded_count", "loss_ratio", "tx_pps", "rx_pps",
            "throughput_bps", "generator_short", "socket_drops", "duration_s", "latency_ns", "latency_samples",
            "jitter_ns", *RECEIVER_COUNTS, "pinning")
    metrics = dict(u)
    metrics.update({
        "direction": "bidir",
        "intended_count": add("intended_count"), "intended_pps": add("intended_pps"),
        "offered_count": offered, "forwarded_count": forwarded, "tx_packets": offered, "rx_packets": forwarded,
        "lost": offered - forwarded, "loss_ratio": (offered - forwarded) / offered if offered else None,
        "tx_pps": add("tx_pps"), "rx_pps": add("rx_pps"), "throughput_bps": add("throughput_bps"),
        "throughput_basis": u.get("throughput_basis", "") + "; bidirectional: both directions summed",
        "generator_short": bool(u.get("generator_short") or d.get("generator_short")),
        "socket_drops": add("socket_drops"), "send_errors": add("send_errors"),
        "lag_skipped_count": add("lag_skipped_count"),
        **{k: add(k) for k in RECEIVER_COUNTS},
        # one latency or jitter would mix two paths: each direction keeps its own
        "latency_ns": None, "latency_samples": None, "latency_hdr_b64": None, "latency_hdr_unit": None,
        "jitter_ns": None,
        "aggregate_missing": {k: "bidirectional: two paths, one figure would mix them; see directions.up/down"
                              for k in ("latency_ns", "jitter_ns")},
        "directions": {"up": {k: u.get(k) for k in keep}, "down": {k: d.get(k) for k in keep}},
    })
    skew, common = span_overlap([(up_start_s, u.get("duration_s")), (down_start_s, d.get("duration_s"))])
    metrics["start_skew_s"], metrics["common_interval_s"] = skew, common
    flags = [{**f, "message": f"client to server: {f['message']}"} for f in up.flags]
    flags += [{**f, "message": f"server to client: {f['message']}"} for f in down.flags]
    shortest = min(float(u.get("duration_s") or 0), float(d.get("duration_s") or 0))
    flag = skew_flag(common, shortest, skew, "the two directions", "the trial is partly unidirectional")
    if flag:
        flags.append(flag)
    return Measurement(metrics=metrics, flags=flags,
                       raw={"engine_send_jsons": [up.raw.get("engine_send_json"), down.raw.get("engine_send_json")],
                            "engine_recv_jsons": [up.raw.get("engine_recv_json"), down.raw.get("engine_recv_json")]})


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


def _version_text(stdout: str) -> str | None:
    try:
        doc = json.loads(stdout)
        return f"fwlab-engine {doc['version']} (schema {doc['schema_version']})"
    except (json.JSONDecodeError, KeyError, TypeError):
        return None


def engine_version() -> str:
    engine = find_engine()
    if engine is None:
        return "fwlab-engine (not built)"
    cp = subprocess.run([engine, "version"], capture_output=True, text=True, timeout=10, check=False)
    return _version_text(cp.stdout) or "fwlab-engine (unknown version)"


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


__all__ = ["EngineMeasurer", "EngineRunner", "EngineTrial", "build_recv_args", "build_send_args",
           "combine_directions", "find_engine", "metrics_from", "next_hop_mac", "parse_result", "run_bidir_trial",
           "run_trial"]
