"""The iperf3 runner: TCP streams (optionally parallel) and UDP streams with a payload size and a
rate (unlimited by default). Parses iperf3's JSON (``-J``) into metrics and 1 s series.

iperf3 UDP is sender-bound (~200 kpps for 64 B on this class of machine): it is a stream tool,
not a packet-rate generator. For TCP it reports bytes, not packets; ``rx_pps`` is then taken
from the server interface's receive counter over the same interval.
"""

from __future__ import annotations

import json
import shutil
import time
from typing import TYPE_CHECKING

from fwlab.errors import RunnerError
from fwlab.runners.base import (
    Measurement,
    Runner,
    TrafficSpec,
    apply_link_counts,
    register,
)
from fwlab.testbed.host import CommandTimeout, Spawned, require_tool

if TYPE_CHECKING:
    from fwlab.testbed.bed import Testbed


def build_client_args(spec: TrafficSpec, server_addr: str, cpu: int | None) -> list[str]:
    """The iperf3 client command line for ``spec``."""
    args = ["iperf3", "-c", server_addr, "-p", str(spec.port), "-J", "-t", f"{spec.duration_s:g}",
            f"-{spec.ip_version}", "--connect-timeout", "3000"]
    if spec.streams > 1:
        args += ["-P", str(spec.streams)]
    if cpu is not None:
        args += ["-A", str(cpu)]
    if spec.traffic == "udp":
        args += ["-u", "-b", str(spec.rate_bps or 0)]
        if spec.size_bytes:
            args += ["-l", str(spec.size_bytes)]
    elif spec.traffic == "tcp":
        if spec.size_bytes:
            args += ["-l", str(spec.size_bytes)]
        if spec.rate_bps:
            args += ["-b", str(spec.rate_bps)]
    else:
        raise RunnerError(f"iperf3 cannot generate traffic '{spec.traffic}'", fix="use tcp or udp")
    return args


def parse_json(text: str, traffic: str) -> Measurement:
    """Parse one iperf3 client JSON document (``-J``) into a Measurement.

    TCP: throughput from ``end.sum_received``; retransmits from ``sum_sent``.
    UDP: ``end.sum`` carries the receiver's packet and loss counts (iperf3 fetches them).
    ``rx_pps`` for TCP is left None here; the runner fills it from interface counters.
    """
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunnerError(f"iperf3 printed no JSON ({exc.msg})", fix="check that iperf3 >= 3.7 is installed") from exc
    if doc.get("error"):
        raise RunnerError(f"iperf3 failed: {doc['error']}", fix="check the test bed and the firewall's permit rule")
    end = doc.get("end") or {}
    cpu = end.get("cpu_utilization_percent") or {}
    metrics: dict = {
        "cpu_sender_pct": cpu.get("host_total"),
        "cpu_receiver_pct": cpu.get("remote_total"),
    }
    series = []
    if traffic == "udp":
        s = end.get("sum") or {}
        seconds = float(s.get("seconds") or 0) or None
        packets = int(s.get("packets") or 0)
        lost = int(s.get("lost_packets") or 0)
        received = max(0, packets - lost)
        metrics.update({
            "throughput_bps": float(s.get("bits_per_second") or 0) * (received / packets if packets else 0),
            "offered_bps": float(s.get("bits_per_second") or 0),
            "tx_packets": packets,
            "rx_packets": received,
            "tx_pps": packets / seconds if seconds else None,
            "rx_pps": received / seconds if seconds else None,
            "loss_ratio": lost / packets if packets else None,
            "jitter_ms": s.get("jitter_ms"),
            "duration_s": seconds,
        })
    else:
        sent = end.get("sum_sent") or {}
        recv = end.get("sum_received") or {}
        metrics.update({
            "throughput_bps": float(recv.get("bits_per_second") or 0),
            "bytes": int(recv.get("bytes") or 0),
            "retransmits": sent.get("retransmits"),
            "rx_pps": None,
            "loss_ratio": None,
            "duration_s": float(recv.get("seconds") or 0) or None,
        })
    for iv in doc.get("intervals") or []:
        s = iv.get("sum") or {}
        sample = {"t_s": round(float(s.get("end", 0)), 3),
                  "throughput_bps": float(s.get("bits_per_second") or 0)}
        if traffic == "udp" and s.get("packets") is not None:
            sample["tx_pps"] = float(s["packets"]) / float(s.get("seconds") or 1)
        if s.get("retransmits") is not None:
            sample["retransmits"] = s["retransmits"]
        series.append(sample)
    return Measurement(metrics=metrics, series=series, raw={"iperf3_client_json": doc})


class Iperf3(Runner):
    name = "iperf3"
    traffics = ("tcp", "udp")
    summary = "iperf3: TCP streams (parallel with -P) and UDP streams with payload size and rate"

    def __init__(self) -> None:
        self._servers: dict[tuple[str, int], Spawned] = {}

    def unavailable(self) -> str | None:
        return None if shutil.which("iperf3") else "iperf3 is not installed (apt-get install iperf3)"

    def version(self) -> str:
        require_tool("iperf3")
        import subprocess
        return subprocess.run(["iperf3", "--version"], capture_output=True, text=True).stdout.splitlines()[0]

    def start(self, bed: "Testbed", spec: TrafficSpec) -> None:
        key = (bed.ns("server"), spec.port)
        sp = self._servers.get(key)
        if sp is not None and sp.proc.poll() is None:
            return
        require_tool("iperf3")
        # --logfile: the server's per-interval text would otherwise fill the unread stdout pipe
        # (64 KiB: one 128-stream test) and block the server mid-test
        args = ["iperf3", "-s", "-p", str(spec.port), "--logfile", "/dev/null"]
        cpu = bed.topo.pinning.server_cpu
        if cpu is not None:
            args += ["-A", str(cpu)]
        self._servers[key] = bed.host.spawn(args, ns=bed.ns("server"))
        self._wait_listening(bed, spec.port)

    def _wait_listening(self, bed: "Testbed", port: int, timeout_s: float = 5.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            cp = bed.sh("server", "ss", "-ltnH", f"sport = :{port}", check=False)
            if cp.stdout.strip():
                return
            time.sleep(0.05)
        raise RunnerError(f"iperf3 server did not listen on port {port} within {timeout_s} s",
                          fix="run 'fwlab clean'; another process may hold the port")

    def stop(self, bed: "Testbed") -> None:
        for key, sp in list(self._servers.items()):
            if key[0] == bed.ns("server"):
                sp.stop()
                bed.host.forget(sp)
                del self._servers[key]

    def measure(self, bed: "Testbed", spec: TrafficSpec, env=None) -> Measurement:
        self.start(bed, spec)
        server = bed.topo.plan.server(spec.ip_version)
        args = build_client_args(spec, server, bed.topo.pinning.client_cpu)
        before = bed.link_counters("server", bed.topo.server_if)
        try:
            cp = bed.host.run(args, ns=bed.ns("client"), check=False, timeout_s=spec.duration_s + 30)
        except CommandTimeout as exc:
            self.stop(bed)  # a wedged server would hang the next trial too: start a fresh one
            raise RunnerError(f"iperf3 client hung: {exc.message}; this trial's figure is missing",
                              fix="none needed: the next trial uses a fresh iperf3 server") from exc
        after = bed.link_counters("server", bed.topo.server_if)
        if cp.returncode != 0 and not cp.stdout.strip().startswith("{"):
            self.stop(bed)
            raise RunnerError(f"iperf3 client failed (exit {cp.returncode}): {cp.stderr.strip()[:200]}",
                              fix="check the test bed and the firewall's permit rule")
        try:
            m = parse_json(cp.stdout, spec.traffic)
        except RunnerError:
            self.stop(bed)  # a failed test can wedge the server: start a fresh one next time
            raise
        apply_link_counts(m, spec.traffic, after["rx_packets"] - before["rx_packets"], "iperf3")
        m.raw["argv"] = args
        return m


register(Iperf3())
