"""The netperf runner (the seeds' own tool): TCP_STREAM and UDP_STREAM with send sizes,
TCP_RR and TCP_CRR (transactions and connections per second).

netperf is only in Debian's non-free component; fwlab never enables it silently (``make
netperf`` does, explicitly) and reports this runner as unavailable without it. Output is the
omni keyval format (``-- -k SELECTORS``), kept raw in the record.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from typing import TYPE_CHECKING

from fwlab.errors import RunnerError
from fwlab.runners.base import (
    Measurement,
    Runner,
    TrafficSpec,
    apply_link_counts,
    register,
    whole_seconds,
)
from fwlab.testbed.host import CommandTimeout, Spawned, require_tool

if TYPE_CHECKING:
    from fwlab.testbed.bed import Testbed

CONTROL_PORT = 12865
SELECTORS = ("THROUGHPUT,THROUGHPUT_UNITS,ELAPSED_TIME,LOCAL_SEND_CALLS,LOCAL_BYTES_SENT,REMOTE_RECV_CALLS,"
             "REMOTE_BYTES_RECVD,TRANSACTION_RATE,MEAN_LATENCY,P50_LATENCY,P99_LATENCY,LOCAL_CPU_UTIL,"
             "REMOTE_CPU_UTIL,LOCAL_SEND_SIZE,PROTOCOL,DIRECTION")
TESTS = {"tcp": "TCP_STREAM", "udp": "UDP_STREAM", "tcp_rr": "TCP_RR", "tcp_crr": "TCP_CRR"}


def parse_keyval(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip().strip('"')
    return out


def _f(d: dict, k: str) -> float | None:
    try:
        return float(d[k])
    except (KeyError, ValueError):
        return None


def parse_output(text: str, traffic: str) -> Measurement:
    """Turn netperf's omni keyval output into a Measurement (rates in bit/s, packets/s, 1/s)."""
    kv = parse_keyval(text)
    if "THROUGHPUT" not in kv:
        raise RunnerError(f"netperf printed no result ({text.strip()[:120] or 'no output'})",
                          fix="check that netserver runs in the server namespace")
    el = _f(kv, "ELAPSED_TIME") or None
    m: dict = {"duration_s": el, "cpu_sender_pct": _f(kv, "LOCAL_CPU_UTIL"),
               "cpu_receiver_pct": _f(kv, "REMOTE_CPU_UTIL"),
               "latency_mean_us": _f(kv, "MEAN_LATENCY"), "latency_p50_us": _f(kv, "P50_LATENCY"),
               "latency_p99_us": _f(kv, "P99_LATENCY"), "loss_ratio": None, "rx_pps": None}
    if traffic in ("tcp", "udp"):
        recvd = _f(kv, "REMOTE_BYTES_RECVD") or 0.0
        m["throughput_bps"] = recvd * 8 / el if el else None
        m["send_size_bytes"] = _f(kv, "LOCAL_SEND_SIZE")
        if traffic == "udp":
            sent, got = _f(kv, "LOCAL_SEND_CALLS") or 0, _f(kv, "REMOTE_RECV_CALLS") or 0
            m.update({"tx_packets": int(sent), "rx_packets": int(got),
                      "tx_pps": sent / el if el else None, "rx_pps": got / el if el else None,
                      "loss_ratio": max(0.0, (sent - got) / sent) if sent else None})
    else:
        m["transactions_per_s"] = _f(kv, "TRANSACTION_RATE")
        m["throughput_bps"] = None
    return Measurement(metrics=m, raw={"netperf_keyval": text})


class Netperf(Runner):
    name = "netperf"
    remote_roles = True
    traffics = tuple(TESTS)
    trial_overhead_s = {"tcp": 1.0, "udp": 1.0, "tcp_rr": 1.0, "tcp_crr": 1.0}
    whole_seconds_option = "netperf -l"
    summary = "netperf: TCP_STREAM/UDP_STREAM with send sizes, TCP_RR and TCP_CRR (needs 'make netperf')"

    def __init__(self) -> None:
        self._servers: dict[str, Spawned] = {}

    def unavailable(self) -> str | None:
        if shutil.which("netperf") and shutil.which("netserver"):
            return None
        return "netperf is not installed: it is in Debian's non-free component; run 'make netperf'"

    def version(self) -> str:
        require_tool("netperf")
        return subprocess.run(["netperf", "-V"], capture_output=True, text=True).stdout.strip()

    def start(self, bed: "Testbed", spec: TrafficSpec) -> None:
        ns = bed.ns("server")
        sp = self._servers.get(ns)
        if sp is not None and sp.proc.poll() is None:
            return
        require_tool("netserver")
        # -D: stay in the foreground so teardown can stop it; -p: control port.
        self._servers[ns] = bed.host_for("server").spawn(["netserver", "-D", "-p", str(CONTROL_PORT)], ns=ns)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if bed.sh("server", "ss", "-ltnH", f"sport = :{CONTROL_PORT}", check=False).stdout.strip():
                return
            time.sleep(0.05)
        raise RunnerError("netserver did not start in the server namespace", fix="run 'fwlab clean' and retry")

    def stop(self, bed: "Testbed") -> None:
        sp = self._servers.pop(bed.ns("server"), None)
        if sp is not None:
            sp.stop()
            bed.host_for("server").forget(sp)

    def client_args(self, spec: TrafficSpec, server: str, pin: tuple[int | None, int | None]) -> list[str]:
        args = ["netperf", "-H", server, "-p", str(CONTROL_PORT), "-t", TESTS[spec.traffic],
                "-l", str(whole_seconds(spec.duration_s, "netperf -l")), "-P", "0", "-c", "-C", f"-{spec.ip_version}"]
        if pin[0] is not None and pin[1] is not None:
            args += ["-T", f"{pin[0]},{pin[1]}"]
        args.append("--")
        if spec.traffic == "udp":
            args += ["-R", "1"]  # netperf sets SO_DONTROUTE on UDP_STREAM unless told otherwise
        if spec.size_bytes and spec.traffic in ("tcp", "udp"):
            args += ["-m", str(spec.size_bytes)]
        args += ["-k", SELECTORS]
        return args

    def measure(self, bed: "Testbed", spec: TrafficSpec, env=None) -> Measurement:
        if spec.traffic not in TESTS:
            raise RunnerError(f"netperf cannot generate '{spec.traffic}'", fix=f"use one of {', '.join(TESTS)}")
        self.start(bed, spec)
        pin = (bed.topo.pinning.client_cpu, bed.topo.pinning.server_cpu)
        args = self.client_args(spec, bed.topo.plan.server(spec.ip_version), pin)
        before = bed.link_counters("server", bed.topo.server_if)
        try:
            cp = bed.host_for("client").run(args, ns=bed.ns("client"), check=False, timeout_s=spec.duration_s + 30)
        except CommandTimeout as exc:
            self.stop(bed)
            raise RunnerError(f"netperf hung: {exc.message}; this trial's figure is missing",
                              fix="none needed: the next trial uses a fresh netserver") from exc
        after = bed.link_counters("server", bed.topo.server_if)
        if cp.returncode != 0:
            self.stop(bed)
            raise RunnerError(f"netperf {TESTS[spec.traffic]} failed (exit {cp.returncode}): "
                              f"{(cp.stderr or cp.stdout).strip()[:160]}", fix="check the firewall's permit rule")
        m = parse_output(cp.stdout, spec.traffic)
        apply_link_counts(m, spec.traffic, after["rx_packets"] - before["rx_packets"], "netserver")
        m.raw["argv"] = args
        return m


register(Netperf())
