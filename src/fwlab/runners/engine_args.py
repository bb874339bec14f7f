"""What one fwlab-engine trial should do (:class:`EngineTrial`) and the ``recv`` and ``send``
command lines that do it; a trial's share for each of several generator hosts.

Owns: the engine's command-line interface as fwlab uses it. Never runs a process.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from fwlab.errors import RunnerError

ENGINE_PORT = 5555  #: UDP port of the receiver (iperf3 uses 5201 in the same bed)
IDLE_TIMEOUT_S = 0.5  #: the receiver stops this long after the last packet [s]
BACKENDS = ("udp", "packet", "packet-mmsg")
#: backends that send raw Ethernet frames (need the interface, a source address and the next hop's MAC)
RAW_BACKENDS = ("packet", "packet-mmsg")
#: option new_flows: source ports from here on, one per packet, so each packet opens a new flow
NEW_FLOW_PORT0 = 1024
MAX_NEW_FLOWS = 65535 - NEW_FLOW_PORT0 + 1


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
