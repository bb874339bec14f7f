"""The traffic-runner interface and its registry.

Owns: what one measurement of one traffic item returns (:class:`Measurement`) and how a runner
is chosen by tool name. Each tool lives in its own module: command line + output parser.
Never touches the firewall or the test bed's construction.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from fwlab.errors import RunnerError
from fwlab.registry import Registry

if TYPE_CHECKING:
    from fwlab.dut.base import Backend, DutContext
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
    options: dict = field(default_factory=dict, hash=False)  #: runner-specific, checked by Runner.check_options
    #: address and port to send to instead of the server's (a Service ClusterIP the DUT DNATs to
    #: the server, layout kube-proxy); None: the server itself. Only the engine runner honours it.
    target: tuple[str, int] | None = None
    #: flows spread over a rule set (layout classbench-acl): source, destination and destination
    #: port ranges ("A-B") walked together, flow i the i-th of each; None: one destination. Only
    #: the engine runner honours it (its packet backend: any source address).
    flows: dict | None = None


@dataclass
class TrialEnv:
    """What a runner may use beyond the bed: the DUT's backend and namespace (None in direct
    mode), what :meth:`Runner.bed_started` measured on this bed (``bed_info``), a way to print
    a progress line (``note``) and to show the running trial's latest step (``step``: a search's
    current load and bounds; the next step replaces it on a terminal). Runners that only drive
    traffic ignore it."""

    backend: "Backend | None" = None
    dut: "DutContext | None" = None
    bed_info: dict = field(default_factory=dict)
    note: Callable[[str], None] = lambda text: None
    step: Callable[[str], None] = lambda text: None


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
    kind: str = "stream"  #: the trial record's kind: a fwlab.results.kinds.TrialKind value
    extra: dict = field(default_factory=dict)  #: kind-specific structured results (e.g. a search's trials)


#: the senders of one trial (client/server pairs, generator hosts, the two directions) must all
#: send together for at least this share of the shortest one's time, or the trial is flagged
#: ``generator-skew``: a rate summed over them overstates the load
MIN_OVERLAP_SHARE = 0.9


def overlap(intervals: list[tuple[float, float]]) -> dict:
    """How several senders' intervals ``[(start, end), ...]`` (one clock, seconds) lined up:
    ``start_skew_s`` (latest start - earliest start), ``common_interval_s`` (all sending at once:
    earliest end - latest start; negative when some never overlapped), ``shortest_s`` (the
    shortest interval) and ``overlap_ratio`` (common / shortest)."""
    if not intervals:
        raise ValueError("overlap of no intervals")
    starts = [a for a, _ in intervals]
    ends = [b for _, b in intervals]
    common = min(ends) - max(starts)
    shortest = min(b - a for a, b in intervals)
    return {"start_skew_s": max(starts) - min(starts), "common_interval_s": common, "shortest_s": shortest,
            "overlap_ratio": common / shortest if shortest > 0 else None}


def span_overlap(spans: list[tuple[float | None, float | None]]) -> tuple[float | None, float | None]:
    """Senders' (start [s, one clock], duration [s]) -> (start skew, common interval [s], >= 0):
    :func:`overlap` of their intervals. Both None if a start is unknown."""
    if not spans or any(st is None for st, _ in spans):
        return None, None
    ov = overlap([(float(st), float(st) + float(d or 0)) for st, d in spans])
    return ov["start_skew_s"], max(0.0, ov["common_interval_s"])


def skew_flag(common_s: float | None, shortest_s: float | None, skew_s: float | None, what: str,
              consequence: str) -> dict | None:
    """The ``generator-skew`` warning when ``what`` (e.g. "the 2 client/server pairs") sent
    together for less than :data:`MIN_OVERLAP_SHARE` of the shortest one's time ``shortest_s``
    (None otherwise, or when the overlap is not known)."""
    if common_s is None or not shortest_s or common_s >= MIN_OVERLAP_SHARE * shortest_s:
        return None
    return {"code": "generator-skew", "severity": "warning",
            "message": f"{what} sent together for only {max(0.0, common_s):.3f} s of {shortest_s:.3f} s "
                       f"(start skew {skew_s or 0.0:.3f} s, below {100 * MIN_OVERLAP_SHARE:.0f} %): {consequence}"}


def apply_link_counts(m: Measurement, traffic: str, server_if_rx: int, receiver: str = "receiving") -> None:
    """Take the stream rates from the server interface's receive counter: the packets that
    crossed the DUT, whatever the receiving process (``receiver``, e.g. "iperf3") managed to
    read. Counted over the whole client run (connect to close, a few control packets included).

    TCP: ``rx_pps``. UDP: also ``throughput_bps`` (the tool's bits per packet times the packets
    the link got) and ``loss_ratio`` (sent but not delivered to the link); the tool's own figures
    stay as ``app_rx_pps``, ``app_throughput_bps``, ``app_loss_ratio``. A UDP receiver that read
    clearly fewer packets than its link delivered is flagged: that loss is the receiver's, not
    the firewall's. Request-response kinds keep the tool's figures.
    """
    m.metrics["server_if_rx_packets"] = server_if_rx
    dur = m.metrics.get("duration_s")
    if not dur or traffic not in ("tcp", "udp"):
        return
    if traffic == "udp":
        m.metrics["app_rx_pps"] = m.metrics.get("rx_pps")
        app = m.metrics.get("rx_packets") or 0
        tx = m.metrics.get("tx_packets") or 0
        if app:
            m.metrics["app_throughput_bps"] = m.metrics.get("throughput_bps")
            m.metrics["throughput_bps"] = (m.metrics.get("throughput_bps") or 0.0) * server_if_rx / app
        if tx:
            m.metrics["loss_ratio"] = max(0.0, (tx - server_if_rx) / tx)
            m.metrics["app_loss_ratio"] = max(0.0, (tx - app) / tx)
        if server_if_rx and app < 0.97 * server_if_rx:
            m.flags.append({"code": "receiver-bound", "severity": "warning",
                            "message": f"the {receiver} process read {100 * app / server_if_rx:.0f} % of the "
                                       f"packets its link received: receiver loss, not DUT loss"})
    m.metrics["rx_pps"] = server_if_rx / dur


class Runner(ABC):
    name: str = ""
    traffics: tuple[str, ...] = ()
    summary: str = ""
    #: a traffic item's ``sizes`` are Ethernet frame sizes incl. FCS (64..9018), not payload sizes
    frame_sizes: bool = False
    #: the option through which the tool takes its run time, when it takes whole seconds only
    #: (e.g. "iperf3 -t"): a suite's fractional ``duration_s`` is refused for it, never rounded
    whole_seconds_option: str | None = None
    #: it runs its client and server ends on the role's own host (remote ones over SSH); False:
    #: only in this machine's namespaces, so a hosts file placing client or server remotely is refused
    remote_roles: bool = False
    #: it splits each trial across the generator hosts (``client2`` ...) towards the one server
    #: (the engine's sender split): a hosts file with server hosts ``server2`` ... (client k
    #: streams to server k) is refused for it, since its trial would not be the pairs'
    splits_generators: bool = False
    #: it marks its bulk data DATA_TOS on a shaped bed, beside a control connection on the same
    #: wire (iperf3): its trials get the shaper's two bands (testbed.shaping), others the one queue
    marks_bulk_data: bool = False
    #: seconds one trial takes beyond its duration (tool start, connection set-up, counter
    #: reads), by traffic kind; rough, measured on this 2-CPU machine class
    trial_overhead_s: dict[str, float] = {}
    #: the ``kind`` of the trial records this runner's measurements make (a TrialKind value; a
    #: stream trial with a flood beside it is recorded as ``attack``)
    record_kind: str = "stream"

    def unavailable(self) -> str | None:
        """Why this runner cannot run on this host (missing tool), or None."""
        return None

    def estimate_s(self, traffic: str, duration_s: float, streams: int, options: dict[str, Any]) -> float:
        """Rough wall time of one trial [s] from its (normalised) options: the duration as given
        plus this runner's overhead; many streams add their connection set-up. A method whose
        time is not its duration (a search, probes) overrides it with its options' own estimate.
        ``fwlab.run.estimate`` adds beds, rule loads, settling and floods."""
        return duration_s + self.trial_overhead_s.get(traffic, 1.5) + (0.01 * streams if streams > 16 else 0.0)

    def check_options(self, kind: str, options: dict[str, Any]) -> dict[str, Any]:
        """Validate a traffic item's ``options`` table for ``kind``; return them normalised.
        Raise ValueError with a one-line reason (the suite loader turns it into a SuiteError).
        Default: this runner takes no options."""
        if options:
            raise ValueError(f"tool '{self.name}' takes no options (got: {', '.join(sorted(options))})")
        return options

    def bed_started(self, bed: "Testbed", env: TrialEnv, trials: list) -> dict | None:
        """Called once per test bed after it is built and before any rule set is loaded (the DUT
        forwards with no rules), with the bed's trials of this runner. Return what should be
        recorded with the bed (e.g. the measured maximum load) and handed to :meth:`measure`
        as ``env.bed_info[self.name]``; default: nothing."""
        return None

    @abstractmethod
    def version(self) -> str: ...

    def start(self, bed: "Testbed", spec: TrafficSpec) -> None:
        """Start server-side processes (idempotent); default: nothing."""

    def stop(self, bed: "Testbed") -> None:
        """Stop what :meth:`start` started."""

    @abstractmethod
    def measure(self, bed: "Testbed", spec: TrafficSpec, env: TrialEnv | None = None) -> Measurement: ...


def whole_seconds(duration_s: float, option: str) -> int:
    """``duration_s`` as the whole number of seconds a tool's ``option`` takes; a fractional or
    sub-second duration is an error (the suite check refuses it first), never silently rounded."""
    if not float(duration_s).is_integer() or duration_s < 1:
        raise RunnerError(f"{option} takes whole seconds, not {duration_s} s",
                          fix="give duration_s as a whole number of seconds (1 or more)")
    return int(duration_s)


RUNNERS: Registry[Runner] = Registry("traffic tool", RunnerError)


def register(runner: Runner) -> Runner:
    return RUNNERS.add(runner.name, runner)


get_runner = RUNNERS.get
runner_names = RUNNERS.names

DEFAULT_TOOL = "iperf3"


def default_tool(kind: str) -> str:
    """The tool a traffic item of ``kind`` uses when the suite names none: iperf3 where it can,
    else the one runner that generates ``kind`` (else iperf3, which then fails validation)."""
    able = [n for n in runner_names() if kind in get_runner(n).traffics]
    return DEFAULT_TOOL if DEFAULT_TOOL in able or len(able) != 1 else able[0]
