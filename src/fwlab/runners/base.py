"""The traffic-runner interface and its registry.

Owns: what one measurement of one traffic item returns (:class:`Measurement`) and how a runner
is chosen by tool name. Each tool lives in its own module: command line + output parser.
Never touches the firewall or the test bed's construction.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fwlab.errors import RunnerError
from fwlab.registry import Registry

if TYPE_CHECKING:
    from fwlab.testbed.bed import Testbed


@dataclass(frozen=True)
class TrafficSpec:
    """One traffic item of one trial, fully expanded."""

    traffic: str  #: "tcp" or "udp" (runner-specific kinds such as "tcp_rr" allowed)
    tool: str  #: runner name, e.g. "iperf3"
    size_bytes: int | None = None  #: UDP payload / TCP write size [bytes]; None = tool default
    streams: int = 1  #: parallel streams
    rate_bps: int | None = None  #: target rate [bit/s]; None = unlimited
    ip_version: int = 4
    duration_s: float = 3.0
    port: int = 5201


@dataclass
class Measurement:
    """What one run of a traffic tool measured.

    ``metrics`` always holds ``throughput_bps`` [bit/s], ``rx_pps`` [packets/s received by the
    server side], ``loss_ratio`` [0..1, None if the tool cannot tell] and may hold more
    (``tx_pps``, ``jitter_ms``, ``retransmits``, ``cpu_sender_pct``, ``cpu_receiver_pct``...).
    ``series`` are per-interval samples ``{"t_s": end of interval, ...}``; ``raw`` the tool's
    own output, kept so a parser bug can be fixed without re-running.
    """

    metrics: dict
    series: list[dict] = field(default_factory=list)
    raw: dict = field(default_factory=dict)
    flags: list[dict] = field(default_factory=list)


class Runner(ABC):
    name: str = ""
    traffics: tuple[str, ...] = ()
    summary: str = ""

    def unavailable(self) -> str | None:
        """Why this runner cannot run on this host (missing tool), or None."""
        return None

    @abstractmethod
    def version(self) -> str: ...

    def start(self, bed: "Testbed", spec: TrafficSpec) -> None:
        """Start server-side processes (idempotent); default: nothing."""

    def stop(self, bed: "Testbed") -> None:
        """Stop what :meth:`start` started."""

    @abstractmethod
    def measure(self, bed: "Testbed", spec: TrafficSpec) -> Measurement: ...


RUNNERS: Registry[Runner] = Registry("traffic tool", RunnerError)


def register(runner: Runner) -> Runner:
    return RUNNERS.add(runner.name, runner)


get_runner = RUNNERS.get
runner_names = RUNNERS.names
