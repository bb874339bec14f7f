"""Many parallel TCP streams framed by single-stream recovery probes (seed 004, kind ``parallel``).

Owns: the probe plan (how often, how long, how many, what counts as recovered, and when: after or
during the load) and the sequence baseline probe -> multi-stream run -> probes every
``interval_s`` until one is back within ``tolerance`` of the baseline (at most ``max_probes``).
Each probe is a short single iperf3 TCP stream; the probes form a time series. ``during = false``:
the probes start when the multi-stream run has ended (seconds after its end). ``during = true``
(seed 004's Table 3 procedure): the multi-stream run goes on in a thread while the probes start
as soon as all its streams are established (``load_up_s`` after its processes started; a probe
before that would meet an idle path), on an iperf3 server port of their own; probing stops
when the load has ended, and only a probe that ended while the load still ran counts as
recovered (``during_load``), so a probe on the then idle path never decides the finding. The
load's link counters then include the probes' packets. The schedule is pure (``run_probes``
takes the measuring function, the clock and whether the load still runs) so it is unit-tested
without traffic. Never touches the firewall.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fwlab.errors import RunnerError
from fwlab.runners.base import Measurement, Runner, TrafficSpec, get_runner, register
from fwlab.runners.iperf3 import Iperf3, split_streams
from fwlab.testbed.netstat import NETSTAT, parse_counters, read_counters
from fwlab.validation import one_line

if TYPE_CHECKING:
    from fwlab.testbed.bed import Testbed


class ProbePlan(BaseModel):
    """Recovery probes after (or during) a multi-stream run: the ``parallel`` method's options."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    interval_s: float = Field(10.0, description="start-to-start time between probes [s] (the first starts at once)")
    probe_s: float = Field(2.0, description="length of one single-stream probe [s], whole seconds (iperf3 -t)")
    max_probes: int = Field(12, description="upper bound on probes after the run")
    tolerance: float = Field(0.10, description="recovered when a probe reaches (1 - tolerance) x baseline")
    baseline: bool = Field(True, description="measure the single-stream baseline before the multi-stream run")
    during: bool = Field(False, description="probe while the multi-stream run goes on (seed 004 Table 3), not "
                                            "after it")
    load_s: float | None = Field(None, description="with during: the multi-stream run's length [s], whole "
                                                   "seconds (default: the trial's)")

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> "ProbePlan":
        d = {k: options[k] for k in cls.model_fields if k in options}
        try:
            p = cls(**d)
        except ValidationError as exc:
            raise ValueError(f"parallel option {one_line(exc)}") from None
        if not 1 <= float(p.probe_s) <= 60 or not float(p.probe_s).is_integer():
            raise ValueError(f"probe_s {p.probe_s} must be a whole number of seconds in 1..60 (iperf3 -t)")
        if not float(p.probe_s) <= float(p.interval_s) <= 600:
            raise ValueError(f"interval_s {p.interval_s} must be at least probe_s and at most 600")
        if not isinstance(p.max_probes, int) or not 0 <= p.max_probes <= 100:
            raise ValueError(f"max_probes {p.max_probes} is outside 0..100")
        if not 0 < float(p.tolerance) < 1:
            raise ValueError(f"tolerance {p.tolerance} must be between 0 and 1")
        if not isinstance(p.baseline, bool):
            raise ValueError("baseline must be true or false")
        if p.load_s is not None:
            if not p.during:
                raise ValueError("load_s sets the length of a load probed during its run: give it with during = true")
            if not 1 <= float(p.load_s) <= 3600 or not float(p.load_s).is_integer():
                raise ValueError(f"load_s {p.load_s} must be a whole number of seconds in 1..3600 (iperf3 -t)")
        return p

    def to_dict(self) -> dict:
        return self.model_dump()

    def estimate_s(self, duration_s: float = 0.0) -> float:
        """Rough wall time of the probes [s] beyond a trial of ``duration_s``: the baseline and, at
        worst (no probe recovers), every probe (each probe_s plus 1 s of iperf3 start); probes
        during the load add only the load's length beyond the trial's (``load_s``)."""
        s = self.probe_s + 1.0 if self.baseline else 0.0
        if self.during:
            return s + max(0.0, float(self.load_s or duration_s) - duration_s)
        if self.max_probes:
            s += (self.max_probes - 1) * self.interval_s + self.probe_s + 1.0
        return s


def run_probes(measure: Callable[[], float], baseline_bps: float | None, plan: ProbePlan,
               clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep,
               load_running: Callable[[], bool] | None = None) -> list[dict]:
    """Probe k starts ``k x interval_s`` after now (the end of the multi-stream run, or its start
    when ``load_running`` is given). Stops after the first probe within tolerance of
    ``baseline_bps`` (all ``max_probes`` without a baseline). With ``load_running``: no probe
    starts once the load has ended, each row says whether the load still ran when the probe
    ended (``during_load``), and only such a probe counts as recovered.
    Returns ``[{"probe", "t_after_s" (start, seconds after now), "throughput_bps",
    "ratio_to_baseline", "recovered"[, "during_load"]}]``; a probe that failed has throughput
    None and ``error``."""
    t0 = clock()
    out: list[dict] = []
    for k in range(plan.max_probes):
        if load_running is not None and not load_running():
            break
        wait = t0 + k * plan.interval_s - clock()
        if wait > 0:
            sleep(wait)
        if load_running is not None and not load_running():
            break
        start = clock() - t0
        row: dict[str, Any] = {"probe": k, "t_after_s": round(start, 3)}
        try:
            bps = measure()
        except RunnerError as exc:
            row.update({"throughput_bps": None, "ratio_to_baseline": None, "recovered": False,
                        "error": exc.one_line()})
            if load_running is not None:
                row["during_load"] = load_running()
            out.append(row)
            continue
        during = load_running() if load_running is not None else True
        ratio = bps / baseline_bps if baseline_bps else None
        row.update({"throughput_bps": bps, "ratio_to_baseline": ratio,
                    "recovered": during and ratio is not None and ratio >= 1.0 - plan.tolerance})
        if load_running is not None:
            row["during_load"] = during
        out.append(row)
        if row["recovered"]:
            break
    return out


def probe_metrics(probes: list[dict], baseline_bps: float | None) -> dict:
    ok = [p for p in probes if p.get("throughput_bps") is not None]
    rec = next((p for p in probes if p.get("recovered")), None)
    return {
        "baseline_bps": baseline_bps,
        "probes": len(probes),
        "first_probe_bps": ok[0]["throughput_bps"] if ok else None,
        "min_probe_bps": min(p["throughput_bps"] for p in ok) if ok else None,
        "recovered": rec is not None,
        "recovery_s": rec["t_after_s"] if rec else None,
    }


def wait_streams_up(bed: "Testbed", spec: TrafficSpec, running: Callable[[], bool],
                    poll_s: float = 0.1) -> float:
    """Wait until the client holds an established connection for each of ``spec``'s streams (plus
    each process's control connection) on the load's server ports, or the load has ended, or half
    its length has passed; return the seconds waited (the load's set-up, ``extra.load_up_s``)."""
    n = len(split_streams(spec.streams))
    lo, hi = spec.port, spec.port + n - 1
    want = spec.streams + n
    t0 = time.monotonic()
    while running() and time.monotonic() - t0 < max(2.0, spec.duration_s / 2):
        cp = bed.sh("client", "ss", "-tnH", "state", "established",
                    "(", "dport", ">=", f":{lo}", "and", "dport", "<=", f":{hi}", ")", check=False)
        if len(cp.stdout.splitlines()) >= want:
            break
        time.sleep(poll_s)
    return round(time.monotonic() - t0, 3)


LOAD_THREAD = "fwlab-parallel-load"
"""Name of the thread that runs the multi-stream load while probes run beside it."""


def run_beside_load(load: Callable[[], Measurement], probe: Callable[[], float], baseline_bps: float | None,
                    plan: ProbePlan, clock: Callable[[], float] = time.monotonic,
                    sleep: Callable[[float], None] = time.sleep,
                    ready: Callable[[Callable[[], bool]], float] | None = None) -> tuple[Measurement, list[dict]]:
    """Run ``load`` in a thread and the probes in this one from its start until it ends (or the
    probes are done); wait for the load and return (its Measurement, the probe rows). A load that
    failed (RunnerError: e.g. stalled streams giving up) after probes ran beside it returns a
    Measurement without the load's figures, flagged ``load-failed`` with the error and when it
    ended (``extra.load_ended_s``): the probes that ran while it did still stand. Any other error
    of the load, or one before a probe ended beside it, is raised here."""
    done = threading.Event()
    result: dict[str, Any] = {}

    t0 = time.monotonic()

    def body() -> None:
        try:
            result["m"] = load()
        except BaseException as exc:  # re-raised in the caller's thread below
            result["error"] = exc
        finally:
            result["ended_s"] = time.monotonic() - t0
            done.set()

    th = threading.Thread(target=body, name=LOAD_THREAD, daemon=True)
    th.start()
    running = lambda: not done.is_set()  # noqa: E731
    # the probes' time 0: the load's streams all up (``ready`` waits for them), not its processes' start
    up_s = ready(running) if ready is not None else None
    probes = run_probes(probe, baseline_bps, plan, clock=clock, sleep=sleep, load_running=running)
    th.join()
    err = result.get("error")
    if err is not None:
        if not isinstance(err, RunnerError) or not any(p.get("during_load") for p in probes):
            raise err
        m = Measurement(metrics={"throughput_bps": None, "rx_pps": None, "loss_ratio": None},
                        extra={"load_error": err.one_line(), "load_ended_s": round(result["ended_s"], 3)})
        m.flags.append({"code": "load-failed", "severity": "warning",
                        "message": f"the multi-stream load failed {result['ended_s']:.1f} s after it began "
                                   f"({err.one_line()}); its figures are missing, the probes that ran while it "
                                   f"did are kept"})
        m.extra["load_up_s"] = up_s
        return m, probes
    result["m"].extra["load_up_s"] = up_s
    return result["m"], probes


#: TcpExt counters (/proc/net/netstat) read in the sending namespace around a probed load
TCP_ABORT_COUNTERS = ("TCPAbortOnTimeout", "TCPAbortOnMemory", "TCPAbortOnData")


def parse_tcpext(text: str) -> dict[str, int]:
    """``/proc/net/netstat`` -> the TcpExt counters by name (`fwlab.testbed.netstat`)."""
    return parse_counters(text, "TcpExt")


def tcp_aborts(bed: "Testbed | None", role: str) -> dict[str, int] | None:
    """The sending namespace's TCP abort counters now (None without a bed or when unreadable)."""
    if bed is None:
        return None
    got = read_counters(bed, role, NETSTAT, "TcpExt") or {}
    return {k: got[k] for k in TCP_ABORT_COUNTERS if k in got} or None


RETRIES_GIVE_UP_S = 900.0
"""About how long Linux retransmits before it gives up on a connection (tcp_retries2 = 15, ~924 s
with the 200 ms minimum RTO): a connection timed out sooner was not given up for losses."""


def load_failure_cause(error: str, aborts: dict[str, int] | None, link_rate_bps: int | None,
                       ended_s: float | None = None) -> str | None:
    """What made a multi-stream load fail, when something measured names it: the sender's TCP
    abort counters over the load (deltas), iperf3's error, when the load ended and the emulated
    wire. A connection that times out within seconds cannot be retransmission giving up
    (`RETRIES_GIVE_UP_S`); Linux does abort within seconds on *local* congestion (packets its own
    interface's queue refuses: a probe every 0.5 s, ETIMEDOUT after tcp_retries2 of them) -- what
    the link_rate shaper's tail drop did until its queue dropped at its head (testbed.shaping).
    That reading is given only when TCPAbortOnTimeout rose over the load; None when nothing
    measured names a cause (`load_failure_facts` then says what was seen)."""
    n = (aborts or {}).get("TCPAbortOnTimeout", 0)
    mem = (aborts or {}).get("TCPAbortOnMemory", 0)
    if mem > 0:
        return f"the sender's TCP aborted {mem} connection(s) for lack of socket memory (TCPAbortOnMemory +{mem})"
    if "timed out" not in error.lower() or n <= 0:
        return None
    if ended_s is not None and ended_s >= RETRIES_GIVE_UP_S:
        return None
    wire = f" behind an emulated {link_rate_bps / 1e6:g} Mbit/s wire" if link_rate_bps else ""
    when = (f"the load ended {ended_s:.1f} s after it began" if ended_s is not None
            else "when the load ended was not recorded")
    return (f"the sender's TCP timed out {n} connection(s){wire} (ETIMEDOUT; TCPAbortOnTimeout +{n}; {when}): "
            f"sooner than retransmissions give up (~{RETRIES_GIVE_UP_S / 60:.0f} min), that is Linux giving up on "
            "packets its own interface's queue refused (local congestion), not on losses")


def load_failure_facts(error: str, aborts: dict[str, int] | None, ended_s: float | None = None) -> str:
    """What was seen of a failed load when no cause was measured (`load_failure_cause` None): the
    error, when the load ended and the sender's TCP abort counters over it (or that they could
    not be read)."""
    what = "iperf3 timed out" if "timed out" in error.lower() else f"iperf3 failed ({error})"
    when = f" {ended_s:.1f} s after the load began" if ended_s is not None else ""
    if aborts is None:
        counters = "the sender's TCP abort counters could not be read"
    else:
        counters = "the sender's TCP abort counters " + ", ".join(f"{k} +{v}" for k, v in sorted(aborts.items()))
    return f"{what}{when}; {counters}; no cause measured"


def measure_with_probes(runner: "Iperf3", bed: "Testbed", spec: TrafficSpec) -> Measurement:
    """Baseline single stream, the multi-stream run, then recovery probes (or probes during the
    run: ``during``); kind ``parallel``."""
    plan = ProbePlan.from_options(spec.options)
    direction = spec.options.get("direction", "up")
    cc = {"congestion": spec.options["congestion"]} if spec.options.get("congestion") else {}
    single = replace(spec, traffic="tcp", streams=1, duration_s=plan.probe_s,
                     options={"direction": direction if direction != "bidir" else "up", **cc})
    main_spec = replace(spec, traffic="tcp", options={"direction": direction, **cc})
    if plan.during and plan.load_s:
        main_spec = replace(main_spec, duration_s=plan.load_s)
    if plan.during:
        # the load's processes take ports spec.port .. +n-1: the probes get the next one, started now
        single = replace(single, port=spec.port + len(split_streams(spec.streams)))
        runner.start(bed, single)

    def one() -> float:
        return float(runner.run_clients(bed, single).metrics.get("throughput_bps") or 0.0)

    baseline = one() if plan.baseline else None
    if plan.during and plan.max_probes:
        ready = (lambda running: wait_streams_up(bed, main_spec, running)) if bed is not None else None
        sender = "server" if direction == "down" else "client"
        before = tcp_aborts(bed, sender)
        m, probes = run_beside_load(lambda: runner.run_clients(bed, main_spec), one, baseline, plan, ready=ready)
        after = tcp_aborts(bed, sender)
        if m.extra.get("load_error"):
            delta = {k: after[k] - before.get(k, 0) for k in after} if before and after else None
            m.extra["load_tcp_aborts"] = delta
            ended = m.extra.get("load_ended_s")
            cause = load_failure_cause(m.extra["load_error"], delta, getattr(bed.topo, "link_rate_bps", None)
                                       if bed is not None else None, ended)
            if cause:
                m.extra["load_failure_cause"] = cause
                said = f"; measured cause: {cause}"
            else:
                m.extra["load_failure_facts"] = load_failure_facts(m.extra["load_error"], delta, ended)
                said = f"; {m.extra['load_failure_facts']}"
            for f in m.flags:
                if f.get("code") == "load-failed":
                    f["message"] += said
    else:
        m = runner.run_clients(bed, main_spec)
        probes = run_probes(one, baseline, plan)
    m.metrics.update(probe_metrics(probes, baseline))
    m.kind = "parallel"
    m.extra["probes"] = probes
    m.extra["probe_plan"] = plan.to_dict()
    if baseline is not None and not m.metrics["recovered"] and plan.max_probes:
        m.flags.append({"code": "not-recovered", "severity": "info",
                        "message": f"a single stream stayed below {100 * (1 - plan.tolerance):.0f} % of its "
                                   f"baseline for {len(probes)} probes "
                                   f"{'during' if plan.during else 'after'} the multi-stream run"})
    return m


class ParallelStreams(Runner):
    """Kind ``parallel`` (seed 004): many iperf3 TCP streams framed by single-stream recovery
    probes. A method on the iperf3 tool: its servers, version and availability are iperf3's."""

    name = "parallel"
    marks_bulk_data = True  # its streams are iperf3's
    remote_roles = True
    traffics = ("parallel",)
    record_kind = "parallel"
    summary = ("parallel TCP streams (iperf3) with a single-stream baseline before and recovery "
               "probes after or during them (seed 004)")
    whole_seconds_option = "iperf3 -t"

    @property
    def tool(self) -> Iperf3:
        return get_runner("iperf3")  # type: ignore[return-value]

    def unavailable(self) -> str | None:
        return self.tool.unavailable()

    def version(self) -> str:
        return self.tool.version()

    def check_options(self, kind: str, options: dict[str, Any]) -> dict[str, Any]:
        probe_keys = set(ProbePlan.model_fields)
        tcp_keys = {"direction", "congestion"}
        extra = set(options) - probe_keys - tcp_keys
        if extra:
            raise ValueError(f"parallel takes options {', '.join(sorted(probe_keys | tcp_keys))} "
                             f"(unknown: {', '.join(sorted(extra))})")
        out = ProbePlan.from_options(options).to_dict()
        out.update(self.tool.check_options("tcp", {k: v for k, v in options.items() if k in tcp_keys}))
        return out

    def estimate_s(self, traffic: str, duration_s: float, streams: int, options: dict[str, Any]) -> float:
        return (super().estimate_s(traffic, duration_s, streams, options)
                + ProbePlan.from_options(options).estimate_s(duration_s))

    def start(self, bed: "Testbed", spec: TrafficSpec) -> None:
        self.tool.start(bed, spec)

    def stop(self, bed: "Testbed") -> None:
        self.tool.stop(bed)

    def measure(self, bed: "Testbed", spec: TrafficSpec, env=None) -> Measurement:
        return measure_with_probes(self.tool, bed, spec)


register(ParallelStreams())
