"""Many parallel TCP streams framed by single-stream recovery probes (seed 004, kind ``parallel``).

Owns: the probe plan (how often, how long, how many, what counts as recovered) and the sequence
baseline probe -> multi-stream run -> probes every ``interval_s`` until one is back within
``tolerance`` of the baseline (at most ``max_probes``). Each probe is a short single iperf3 TCP
stream; the probes form a time series (seconds after the multi-stream run ended). The schedule is
pure (``run_probes`` takes the measuring function and the clock) so it is unit-tested without
traffic. Never touches the firewall.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fwlab.errors import RunnerError
from fwlab.runners.base import Measurement, Runner, TrafficSpec, get_runner, register
from fwlab.runners.iperf3 import Iperf3
from fwlab.validation import one_line

if TYPE_CHECKING:
    from fwlab.testbed.bed import Testbed


class ProbePlan(BaseModel):
    """Recovery probes after a multi-stream run: the ``parallel`` method's options."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    interval_s: float = Field(10.0, description="start-to-start time between probes [s] (the first starts at once)")
    probe_s: float = Field(2.0, description="length of one single-stream probe [s], whole seconds (iperf3 -t)")
    max_probes: int = Field(12, description="upper bound on probes after the run")
    tolerance: float = Field(0.10, description="recovered when a probe reaches (1 - tolerance) x baseline")
    baseline: bool = Field(True, description="measure the single-stream baseline before the multi-stream run")

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
        return p

    def to_dict(self) -> dict:
        return self.model_dump()

    def estimate_s(self) -> float:
        """Rough wall time of the probes [s]: the baseline and, at worst (no probe recovers),
        every probe (each probe_s plus 1 s of iperf3 start)."""
        s = self.probe_s + 1.0 if self.baseline else 0.0
        if self.max_probes:
            s += (self.max_probes - 1) * self.interval_s + self.probe_s + 1.0
        return s


def run_probes(measure: Callable[[], float], baseline_bps: float | None, plan: ProbePlan,
               clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> list[dict]:
    """Probe k starts ``k x interval_s`` after now (the end of the multi-stream run). Stops after
    the first probe within tolerance of ``baseline_bps`` (all ``max_probes`` without a baseline).
    Returns ``[{"probe", "t_after_s" (start, seconds after the run), "throughput_bps",
    "ratio_to_baseline", "recovered"}]``; a probe that failed has throughput None and ``error``."""
    t0 = clock()
    out: list[dict] = []
    for k in range(plan.max_probes):
        wait = t0 + k * plan.interval_s - clock()
        if wait > 0:
            sleep(wait)
        start = clock() - t0
        row: dict[str, Any] = {"probe": k, "t_after_s": round(start, 3)}
        try:
            bps = measure()
        except RunnerError as exc:
            row.update({"throughput_bps": None, "ratio_to_baseline": None, "recovered": False,
                        "error": exc.one_line()})
            out.append(row)
            continue
        ratio = bps / baseline_bps if baseline_bps else None
        row.update({"throughput_bps": bps, "ratio_to_baseline": ratio,
                    "recovered": ratio is not None and ratio >= 1.0 - plan.tolerance})
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


def measure_with_probes(runner: "Iperf3", bed: "Testbed", spec: TrafficSpec) -> Measurement:
    """Baseline single stream, the multi-stream run, then recovery probes; kind ``parallel``."""
    plan = ProbePlan.from_options(spec.options)
    direction = spec.options.get("direction", "up")
    single = replace(spec, traffic="tcp", streams=1, duration_s=plan.probe_s,
                     options={"direction": direction if direction != "bidir" else "up"})

    def one() -> float:
        return float(runner.run_clients(bed, single).metrics.get("throughput_bps") or 0.0)

    baseline = one() if plan.baseline else None
    main_spec = replace(spec, traffic="tcp", options={"direction": direction})
    m = runner.run_clients(bed, main_spec)
    probes = run_probes(one, baseline, plan)
    m.metrics.update(probe_metrics(probes, baseline))
    m.kind = "parallel"
    m.extra["probes"] = probes
    m.extra["probe_plan"] = plan.to_dict()
    if baseline is not None and not m.metrics["recovered"] and plan.max_probes:
        m.flags.append({"code": "not-recovered", "severity": "info",
                        "message": f"a single stream stayed below {100 * (1 - plan.tolerance):.0f} % of its "
                                   f"baseline for {len(probes)} probes after the multi-stream run"})
    return m


class ParallelStreams(Runner):
    """Kind ``parallel`` (seed 004): many iperf3 TCP streams framed by single-stream recovery
    probes. A method on the iperf3 tool: its servers, version and availability are iperf3's."""

    name = "parallel"
    traffics = ("parallel",)
    record_kind = "parallel"
    summary = ("parallel TCP streams (iperf3) with a single-stream baseline before and recovery "
               "probes after (seed 004)")
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
        extra = set(options) - probe_keys - {"direction"}
        if extra:
            raise ValueError(f"parallel takes options {', '.join(sorted(probe_keys | {'direction'}))} "
                             f"(unknown: {', '.join(sorted(extra))})")
        out = ProbePlan.from_options(options).to_dict()
        out.update(self.tool.check_options("tcp", {k: v for k, v in options.items() if k == "direction"}))
        return out

    def estimate_s(self, traffic: str, duration_s: float, streams: int, options: dict[str, Any]) -> float:
        return super().estimate_s(traffic, duration_s, streams, options) + ProbePlan.from_options(options).estimate_s()

    def start(self, bed: "Testbed", spec: TrafficSpec) -> None:
        self.tool.start(bed, spec)

    def stop(self, bed: "Testbed") -> None:
        self.tool.stop(bed)

    def measure(self, bed: "Testbed", spec: TrafficSpec, env=None) -> Measurement:
        return measure_with_probes(self.tool, bed, spec)


register(ParallelStreams())
