"""The ping runner: round-trip delay and its jitter through the DUT (kind ``rtt``), and the same
probe run beside another tool's stream (delay under load, ``rtt_probe = true``).

Owns: the ``ping`` command line (ICMP echo every ``interval_ms``, timestamps with ``-D``), its
parser (one sample per reply, in order) and the per-second series of the samples. Figures: RTT
percentiles, mean absolute difference of consecutive RTTs (IPDV) and RFC 3550's smoothed jitter,
and loss. ping is in iputils-ping (a system dependency of fwlab). Never touches the firewall.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fwlab.errors import RunnerError
from fwlab.runners.base import Measurement, Runner, TrafficSpec, register, whole_seconds
from fwlab.testbed.host import CommandTimeout, Spawned, require_tool
from fwlab.validation import one_line

if TYPE_CHECKING:
    from fwlab.testbed.bed import Testbed

DEFAULT_INTERVAL_MS = 10.0  #: 100 echo requests/s: a light probe (root may go below 200 ms)
_REPLY = re.compile(r"^\[(\d+\.\d+)\].*icmp_seq=(\d+).*time=([\d.]+) ms")
_SUMMARY = re.compile(r"(\d+) packets transmitted, (\d+) (?:packets )?received")


def ping_args(dst: str, ip_version: int, duration_s: float, interval_ms: float,
              size_bytes: int | None = None, tos: int | None = None) -> list[str]:
    """ping with a deadline (it stops by itself after ``duration_s``), timestamps, quiet DNS;
    ``tos``: IP TOS / IPv6 traffic class of its echo requests (-Q; the replies carry it back)."""
    args = ["ping", f"-{ip_version}", "-n", "-D", "-i", f"{interval_ms / 1000:.3f}",
            "-w", str(whole_seconds(duration_s, "ping -w")), "-W", "1"]
    if size_bytes:
        args += ["-s", str(size_bytes)]
    if tos is not None:
        args += ["-Q", f"0x{tos:02x}"]
    return args + [dst]


class PingOptions(BaseModel):
    """``options`` of a ping traffic item (kind ``rtt``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    interval_ms: float = Field(DEFAULT_INTERVAL_MS, ge=2.0, le=1000.0,
                               description="time between echo requests [ms] (2..1000)")


@dataclass(frozen=True)
class PingSamples:
    """Parsed ping output: ``samples`` (unix time [s], icmp_seq, RTT [ms]) in arrival order."""

    samples: list[tuple[float, int, float]]
    transmitted: int | None
    received: int | None

    @property
    def loss_ratio(self) -> float | None:
        if not self.transmitted:
            return None
        return max(0.0, (self.transmitted - (self.received or 0)) / self.transmitted)

    def raw(self) -> dict[str, Any]:
        """The raw figures as a measurement leaves them in ``extra["rtt_samples"][prefix]``
        (``fwlab.stats.derive`` computes the RTT figures and series from them)."""
        return {"samples": [list(s) for s in self.samples], "transmitted": self.transmitted,
                "received": self.received}


def parse_ping(text: str) -> PingSamples:
    samples = []
    for line in text.splitlines():
        m = _REPLY.match(line.strip())
        if m:
            samples.append((float(m.group(1)), int(m.group(2)), float(m.group(3))))
    sm = _SUMMARY.search(text)
    tx, rx = (int(sm.group(1)), int(sm.group(2))) if sm else (None, None)
    if tx is None and not samples:
        raise RunnerError(f"ping printed neither replies nor a summary ({text.strip()[:120] or 'no output'})",
                          fix="check that iputils-ping is installed and the test bed is up")
    return PingSamples(samples, tx, rx)


class PingProbe:
    """ping running in the background beside another measurement (delay under load)."""

    def __init__(self, bed: "Testbed", ip_version: int, duration_s: float,
                 interval_ms: float = DEFAULT_INTERVAL_MS, role: str = "client", tos: int | None = None) -> None:
        require_tool("ping")
        self.bed = bed
        self.args = ping_args(bed.topo.plan.server(ip_version) if role == "client"
                              else bed.topo.plan.client(ip_version), ip_version, duration_s, interval_ms, tos=tos)
        self.role = role
        self.sp: Spawned | None = None

    def start(self) -> None:
        self.sp = self.bed.host.spawn(self.args, ns=self.bed.ns(self.role))

    def finish(self) -> PingSamples | None:
        """Wait for ping's own deadline (SIGINT after a grace), parse; None if it printed nothing."""
        if self.sp is None:
            return None
        try:
            out, _ = self.sp.proc.communicate(timeout=float(self.args[self.args.index("-w") + 1]) + 3)
        except Exception:
            out, _ = self.sp.stop(sig=2)
        self.bed.host.forget(self.sp)
        try:
            return parse_ping(out or "")
        except RunnerError:
            return None


class Ping(Runner):
    name = "ping"
    traffics = ("rtt",)
    record_kind = "rtt"
    whole_seconds_option = "ping -w"
    summary = "ping: round-trip delay percentiles, IPDV/RFC 3550 jitter and loss, per-second series"

    def unavailable(self) -> str | None:
        return None if shutil.which("ping") else "ping is not installed (apt-get install iputils-ping)"

    def version(self) -> str:
        import subprocess
        cp = subprocess.run(["ping", "-V"], capture_output=True, text=True)
        return (cp.stdout or cp.stderr).strip().splitlines()[0] if (cp.stdout or cp.stderr) else "ping"

    def check_options(self, kind: str, options: dict[str, Any]) -> dict[str, Any]:
        extra = set(options) - set(PingOptions.model_fields)
        if extra:
            raise ValueError(f"tool 'ping' takes only interval_ms (got: {', '.join(sorted(extra))})")
        try:
            return PingOptions(**options).model_dump()
        except ValidationError as exc:
            raise ValueError(f"ping option {one_line(exc)}") from None

    def measure(self, bed: "Testbed", spec: TrafficSpec, env=None) -> Measurement:
        if spec.traffic != "rtt":
            raise RunnerError(f"ping cannot generate '{spec.traffic}'", fix="use kind = \"rtt\"")
        iv = float(spec.options.get("interval_ms", DEFAULT_INTERVAL_MS))
        args = ping_args(bed.topo.plan.server(spec.ip_version), spec.ip_version, spec.duration_s, iv,
                         spec.size_bytes)
        try:
            cp = bed.host.run(args, ns=bed.ns("client"), check=False, timeout_s=spec.duration_s + 15)
        except CommandTimeout as exc:
            raise RunnerError(f"ping hung: {exc.message}", fix="check the test bed") from exc
        ps = parse_ping(cp.stdout)
        if not ps.samples:
            raise RunnerError(f"ping got no reply from the server ({ps.transmitted} sent)",
                              fix="check the firewall's permit rule (ICMP echo must pass)")
        span = ps.samples[-1][0] - ps.samples[0][0] if len(ps.samples) > 1 else None
        metrics = {"throughput_bps": None, "rx_pps": None, "loss_ratio": ps.loss_ratio,
                   "duration_s": span, "interval_ms": iv}
        # raw samples only: fwlab.stats.derive adds the rtt_* figures and the per-second series
        return Measurement(metrics=metrics, kind="rtt", extra={"rtt_samples": {"rtt": ps.raw()}},
                           raw={"ping_output": cp.stdout[-200_000:], "argv": args})


register(Ping())
