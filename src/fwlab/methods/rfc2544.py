"""RFC 2544 tests through the firewall with fwlab-engine: throughput (zero-loss rate search),
latency at fractions of that throughput, frame loss rate, and back-to-back frames.

Owns: the ``rfc2544`` runner (tool name ``rfc2544``; kinds ``throughput``, ``frame_loss``,
``back_to_back``), its options, the maximum load of each bed, and turning searches into records.
The searches themselves are pure code in :mod:`fwlab.search`; this module only hands them an
:class:`~fwlab.runners.engine.EngineMeasurer` on the live bed.

Maximum load. A veth test bed has no line rate, so the maximum is measured once per test bed,
before any rule set is loaded: the forwarding rate at the generator's maximum offered load with
the DUT forwarding and no rules (RFC 2544's "maximum frame rate" replaced by MRR / RFC 2889's
FRMOL). Searches run between ``min_load_pps`` and ``max_load_factor`` x that maximum; results are
reported in frames/s, bit/s (frame bits incl. FCS) and % of the maximum.

Use device model "napi" (suite ``device_model``): on plain veth, DUT overload slows the sender
instead of losing frames and a loss-based search has nothing to find (docs/device-model.md).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fwlab.errors import FwlabError, RunnerError, SearchError
from fwlab.runners.base import MIN_OVERLAP_SHARE, Measurement, Runner, TrafficSpec, TrialEnv, register
from fwlab.validation import one_line
from fwlab.runners.engine import EngineMeasurer, default_cpus, run_trial
from fwlab.runners.engine_args import EngineTrial, default_frame_size
from fwlab.runners.engine_binary import engine_unavailable, engine_version
from fwlab.search import BinaryGoal, run_search
from fwlab.search.csit import reference_goal
from fwlab.search.mlr import SearchGoal, bounds_after_each_trial, goals_of
from fwlab.search.result import SearchResult
from fwlab.search.measurer import TrialResult
from fwlab.search.watch import SearchWatch

if TYPE_CHECKING:
    from fwlab.testbed.bed import Testbed

KINDS = ("throughput", "frame_loss", "back_to_back")
BIDIR_MIN_OVERLAP = MIN_OVERLAP_SHARE  #: direction bidir: the two senders must overlap for this share of every search trial
LOSS_BELOW_CAPACITY = 0.8
"""A loss-based result below this share of the highest rate the DUT forwarded in a lossy trial of
the same search (`SearchResult.forwarded_at_loss_pps`) is flagged `loss-below-capacity`: a DUT
whose loss comes from its per-packet cost passes up to about that rate (within the search's
width); far below it, transients set the result."""
DEFAULT_SEARCH = "csit"
"""The throughput search of an item that names none (and whose suite sets no `search`)."""
SEARCH_TRIALS = 12  #: trials of one throughput search, including the maximum-load trials (for estimates)


class Rfc2544Options(BaseModel):
    """``options`` of an ``rfc2544`` traffic item (all optional)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    algorithm: Literal["binary", "mlr", "csit"] = Field(
        DEFAULT_SEARCH, description="throughput search: mlr (fwlab's MLRsearch), csit (CSIT's own MLRsearch, the "
                                    "PyPI reference, on the same goals) or binary (RFC 2544 binary search); "
                                    "unset: the suite's `search`, else " + DEFAULT_SEARCH)
    goal: str | dict | list | None = Field(
        None, description="mlr, csit: preset name (rfc2544, tst009, csit, csit-pdr), goal table or list; "
                          "binary: a table of BinaryGoal fields. Unset: mlr/csit csit+csit-pdr; binary "
                          "with the suite's duration_s as trial length")
    engine_backend: Literal["udp", "packet"] = Field(
        "udp", description="udp: the kernel accepts every frame and ring drops count as DUT loss; "
                           "packet: frames the DUT's ring refuses are not counted as offered")
    direction: Literal["up", "bidir"] = Field(
        "up", description="up: one sender, client to server; bidir: RFC 2544 bidirectional, a second sender "
                          "from the server to the client at the same load at once (the load and the throughput "
                          "are per direction; a trial passes only when neither direction loses)")
    max_load_factor: float = Field(1.0, gt=0, le=10, description="search maximum = this x the bed's maximum load")
    min_load_pps: float = Field(1000.0, gt=0, description="search minimum [frames/s]")
    mrr_duration_s: float = Field(2.0, gt=0, le=60, description="length of each maximum-load trial [s]")
    latency_at: list[float] = Field(default_factory=list,
                                    description="RFC 2544 §26.2: latency trials at these fractions of the "
                                                "throughput found (e.g. [0.5, 0.9, 1.0])")
    latency_duration_s: float = Field(5.0, gt=0, le=600, description="length of each latency trial [s]")
    steps_pct: list[float] = Field(default_factory=lambda: [100.0, 90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 20.0, 10.0],
                                   description="frame_loss: offered loads in % of the maximum, high to low; "
                                               "stops after two consecutive loads without loss (RFC 2544 §26.3)")
    burst_trials: int = Field(5, ge=1, le=100, description="back_to_back: bursts per length (RFC 2544: 50)")
    max_burst: int = Field(200_000, ge=2, description="back_to_back: longest burst tried [frames]")
    burst_resolution: float = Field(0.05, gt=0, lt=1, description="back_to_back: stop when (fail-pass)/fail <= this")
    batch: int | None = Field(None, ge=1, le=1024, description="frames per send call; null = the frames due in "
                                                               "batch_window_us (4..64), so the sender's bursts "
                                                               "stay far below the DUT's 256-frame receive ring")
    batch_window_us: float = Field(100.0, gt=0, le=10_000, description="see batch [us]")
    generator_rt_priority: int | None = Field(
        40, ge=1, le=99, description="the sender runs under SCHED_FIFO at this priority (below the DUT's 50), so "
                                     "other processes on its CPU cannot delay it into skipping frames; null = normal")
    max_lag: int | None = Field(64, ge=1, description="sender catch-up limit [frames]: a descheduled sender skips "
                                                       "frames (the trial is then generator-short) instead of "
                                                       "bursting them into the DUT's 256-frame ring; null = catch up")

    def estimate_s(self, traffic: str, duration_s: float) -> float:
        """Rough wall time of one trial [s] with these options: a throughput search counts its
        expected trials (``SEARCH_TRIALS``, each ``duration_s`` or the goal's trial length plus
        0.5 s), its latency trials and the two maximum-load trials; frame loss and back-to-back
        their duration plus their steps' or bursts' overhead."""
        if traffic == "frame_loss":
            return duration_s + 2.0
        if traffic == "back_to_back":
            return duration_s + 5.0
        mrr = 2 * self.mrr_duration_s
        goal = self.goal if isinstance(self.goal, dict) else {}
        if self.algorithm == "binary":
            trial = float(goal.get("trial_duration_s", duration_s))
            final = float(goal.get("final_trial_duration_s", trial))
            return (SEARCH_TRIALS - 1) * (trial + 0.5) + final + mrr
        trial = float(goal.get("final_trial_duration_s", duration_s))
        return SEARCH_TRIALS * (trial + 0.5) + len(self.latency_at) * self.latency_duration_s + mrr

    @field_validator("latency_at")
    @classmethod
    def _fractions(cls, v: list[float]) -> list[float]:
        for f in v:
            if not 0 < f <= 1:
                raise ValueError(f"latency_at fraction {f} is outside (0, 1]")
        return v


def parse_options(options: dict) -> Rfc2544Options:
    try:
        return Rfc2544Options(**options)
    except ValidationError as exc:
        raise ValueError(f"rfc2544 option {one_line(exc)}") from None


def search_goals(opts: Rfc2544Options, duration_s: float | None = None) -> Any:
    """The goals the item's search is given: binary's options with the trial length defaulting to
    `duration_s` (the suite's; None: its final trial length, for checking alone), or the MLRsearch
    goals (unset: CSIT's NDR and PDR)."""
    if opts.algorithm == "binary":
        g = dict(opts.goal) if isinstance(opts.goal, dict) else {}
        g.setdefault("trial_duration_s", duration_s if duration_s is not None
                     else g.get("final_trial_duration_s", BinaryGoal().trial_duration_s))
        g.setdefault("final_trial_duration_s", max(g["trial_duration_s"], duration_s or 0.0))
        return g
    return opts.goal if opts.goal is not None else ["csit", "csit-pdr"]


def check_goals(opts: Rfc2544Options) -> None:
    """ValueError (one line, with its fix) when the item's search goals are invalid: checked when
    the suite is, before any packet is sent."""
    if opts.algorithm == "binary" and opts.goal is not None and not isinstance(opts.goal, dict):
        raise ValueError(f"rfc2544 goal of search 'binary': the binary search takes a goal table, not "
                         f"{opts.goal!r:.60} (e.g. goal = {{ trial_duration_s = 1 }})")
    goals = search_goals(opts)
    try:
        if opts.algorithm == "binary":
            BinaryGoal.from_any(goals)
        else:
            parsed = goals_of(goals)
            if opts.algorithm == "csit":
                for g in parsed:
                    reference_goal(g)
    except SearchError as exc:
        raise ValueError(f"rfc2544 goal of search '{opts.algorithm}': {exc.message} ({exc.fix})") from None


def _bed_key(ip_version: int, frame: int, backend: str) -> str:
    return f"ip{ip_version}-{frame}B-{backend}"


def _frame(spec) -> int:
    return spec.size_bytes or default_frame_size(spec.ip_version)


# -- pure parts (unit-tested with simulated DUTs) ----------------------------------------------
def frame_loss_steps(trial, max_load_pps: float, steps_pct: list[float]) -> list[dict]:
    """RFC 2544 §26.3: trials from the highest step down until two consecutive steps lose
    nothing. ``trial(load_pps) -> TrialResult``."""
    out, clean = [], 0
    for pct in sorted(steps_pct, reverse=True):
        load = max_load_pps * pct / 100.0
        r = trial(load)
        out.append({"load_pct": pct, "load_pps": load, "offered_count": r.offered_count,
                    "forwarded_count": r.forwarded_count, "loss_ratio": r.loss_ratio,
                    "generator_short": r.generator_short})
        clean = clean + 1 if (r.loss_count == 0 and not r.generator_short) else 0
        if clean >= 2:
            break
    return out


def longest_burst(burst_ok, max_burst: int, resolution: float, min_burst: int = 2) -> dict:
    """RFC 2544 §26.4: the longest burst of back-to-back frames with no loss, by bisection on
    the burst length. ``burst_ok(n) -> bool`` (all repetitions of a burst of n frames lost nothing).
    Returns the longest passing length (None if even ``min_burst`` failed) and the lengths tried."""
    tried: list[tuple[int, bool]] = []

    def ok(n: int) -> bool:
        r = burst_ok(n)
        tried.append((n, r))
        return r

    if ok(max_burst):
        return {"frames": max_burst, "max_passed": True, "tried": tried}
    lo, hi = None, max_burst
    n = max(min_burst, max_burst // 2)
    while True:
        if ok(n):
            lo = n
        else:
            hi = n
        if lo is None:
            if n <= min_burst:
                return {"frames": None, "max_passed": False, "tried": tried}
            n = max(min_burst, n // 2)
            continue
        if (hi - lo) / hi <= resolution or hi - lo <= 1:
            return {"frames": lo, "max_passed": False, "tried": tried}
        n = (lo + hi) // 2


def trace_goal(result: SearchResult) -> SearchGoal:
    """The goal a search's trace is judged by: an MLRsearch result's own goal, or for a binary
    search exceed ratio 0 at its final trial length (one bad trial makes an upper bound)."""
    return goal_for_bounds(result.algorithm, dict(result.goal))


def watch_goal(opts: Rfc2544Options, duration_s: float) -> SearchGoal | None:
    """The goal the progress display's bounds follow, before the search: the same as its trace's
    (`trace_goal`) for the first (main) goal; None when the goals cannot be read so."""
    goals = search_goals(opts, duration_s)
    try:
        if opts.algorithm == "binary":
            return goal_for_bounds("binary", asdict(BinaryGoal.from_any(goals)))
        return goals_of(goals)[0]
    except (SearchError, ValueError, TypeError):
        return None


def goal_for_bounds(algorithm: str, g: dict) -> SearchGoal:
    """An MLRsearch goal as it is, a binary search's goal as exceed ratio 0 at its final length."""
    if algorithm == "binary":
        final = float(g.get("final_trial_duration_s") or g.get("trial_duration_s") or 1.0)
        return SearchGoal(final_trial_duration_s=final, duration_sum_s=final, initial_trial_duration_s=final,
                          preceding_targets=0, loss_ratio=float(g.get("loss_ratio", 0.0)), exceed_ratio=0.0,
                          relative_width=float(g.get("relative_width", 0.005)), name="binary")
    return SearchGoal.from_any(g)


def search_trace(result: SearchResult) -> list[dict]:
    """A search's trace, one entry per trial on a time axis of trial seconds: load, duration,
    loss ratio, pass/fail, and the goal's relevant bounds as they stood after it
    (`fwlab.search.mlr.bounds_after_each_trial`), so a report can draw the bounds narrowing."""
    try:
        bounds = bounds_after_each_trial([t.result for t in result.trials], trace_goal(result))
    except SearchError:  # a goal this fwlab no longer accepts: the trace without bounds
        bounds = [(None, None)] * len(result.trials)
    series, t_s = [], 0.0
    for t, (lo, hi) in zip(result.trials, bounds):
        t_s += t.result.duration_s
        series.append({"t_s": t_s, "index": t.index, "phase": t.phase, "load_pps": t.result.intended_load_pps,
                       "loss_ratio": t.result.loss_ratio, "passed": t.passed, "duration_s": t.result.duration_s,
                       "lower_bound_pps": lo, "upper_bound_pps": hi,
                       "dut_ingress_drops": t.result.extra.get("dut_ingress_drops")})
    return series


# -- the runner ---------------------------------------------------------------------------------
class Rfc2544Runner(Runner):
    name = "rfc2544"
    remote_roles = True
    splits_generators = True  #: senders on client, client2 ...; one receiver on the server
    traffics = KINDS
    record_kind = "rfc2544"
    frame_sizes = True
    summary = ("RFC 2544 with fwlab-engine: zero-loss throughput search (binary or MLRsearch) with "
               "latency at fractions of it, frame loss rate, back-to-back bursts; % of the bed's maximum load")

    def unavailable(self) -> str | None:
        return engine_unavailable()

    def version(self) -> str:
        return engine_version()

    def check_options(self, kind: str, options: dict[str, Any]) -> dict[str, Any]:
        opts = parse_options(options)
        if kind == "throughput":
            check_goals(opts)
        if opts.direction == "bidir" and kind != "throughput":  # at suite load, not at measure time
            raise ValueError(f"rfc2544 option direction = \"bidir\" is for the throughput search, not {kind}: "
                             "drop it from this item")
        return opts.model_dump()

    def estimate_s(self, traffic: str, duration_s: float, streams: int, options: dict[str, Any]) -> float:
        return parse_options(options).estimate_s(traffic, duration_s)

    # maximum load, once per bed, before any rule set is loaded
    def bed_started(self, bed: Testbed, env: TrialEnv, trials: list) -> dict | None:
        out: dict[str, dict] = {}
        for spec in trials:
            opts = parse_options(spec.options)
            key = _bed_key(spec.ip_version, _frame(spec), opts.engine_backend)
            if key in out:
                continue
            env.note(f"maximum load {key}: {opts.mrr_duration_s:g} s trials at the generator's maximum, no rules")
            out[key] = self.max_load(bed, spec.ip_version, _frame(spec), opts)
        return out

    def max_load(self, bed: Testbed, ip_version: int, frame: int, opts: Rfc2544Options) -> dict:
        send, recv = default_cpus(bed, 1)
        runs = []
        for _ in range(2):
            t = EngineTrial(duration_s=opts.mrr_duration_s, rate_pps=None, frame_size=frame,
                            ip_version=ip_version, backend=opts.engine_backend, send_cpus=send, recv_cpus=recv)
            try:
                m = run_trial(bed, t).metrics
            except FwlabError as exc:
                return {"mrr_pps": None, "error": exc.one_line()}
            runs.append({"offered_pps": m.get("tx_pps"), "forwarded_pps": m.get("rx_pps"),
                         "loss_ratio": m.get("loss_ratio")})
        best = max(runs, key=lambda r: r["forwarded_pps"] or 0)
        return {"mrr_pps": best["forwarded_pps"], "offered_pps": best["offered_pps"],
                "mrr_bps": (best["forwarded_pps"] or 0) * frame * 8, "frame_size": frame,
                "trial_s": opts.mrr_duration_s, "runs": runs,
                "definition": "forwarding rate at the generator's maximum offered load, no rules loaded"}

    def measure(self, bed: Testbed, spec: TrafficSpec, env: TrialEnv | None = None) -> Measurement:
        env = env or TrialEnv()
        opts = parse_options(spec.options)
        frame = _frame(spec)
        info = (env.bed_info.get(self.name) or {}).get(_bed_key(spec.ip_version, frame, opts.engine_backend))
        if not info or not info.get("mrr_pps"):
            why = (info or {}).get("error") or "the maximum load of this bed was not measured"
            raise RunnerError(f"no maximum load for {spec.traffic}: {why}", fix="check the engine and the test bed")
        max_load = info["mrr_pps"] * opts.max_load_factor
        measurer = EngineMeasurer(bed=bed, frame_size=frame, ip_version=spec.ip_version,
                                  backend=opts.engine_backend, batch=opts.batch, max_lag=opts.max_lag,
                                  batch_window_us=None if opts.batch else opts.batch_window_us,
                                  rt_priority=opts.generator_rt_priority, bidir=opts.direction == "bidir")
        base = {"frame_size": frame, "max_load_pps": info["mrr_pps"], "search_max_load_pps": max_load,
                "device_model": bed.topo.device_model, "direction": opts.direction}
        flags: list[dict] = []
        if bed.topo.device_model != "napi":
            flags.append({"code": "no-device-model", "severity": "warning",
                          "message": "device model 'veth': DUT overload slows the sender instead of losing "
                                     "frames; a loss-based result describes the sender (use device_model = \"napi\")"})
        if spec.traffic == "throughput":
            return self._throughput(spec, opts, measurer, max_load, base, flags, env)
        if spec.traffic == "frame_loss":
            steps = frame_loss_steps(lambda load: measurer.measure(spec.duration_s, load), info["mrr_pps"],
                                     opts.steps_pct)
            top = steps[0]
            metrics = {**base, "loss_ratio": top["loss_ratio"], "load_pct": top["load_pct"], "steps": len(steps),
                       "trial_s": spec.duration_s}
            series = [{"t_s": spec.duration_s * (k + 1), **s} for k, s in enumerate(steps)]
            return Measurement(metrics=metrics, series=series, flags=flags, kind="rfc2544",
                               extra={"rfc2544": {"test": "frame_loss", "steps": steps, "max_load": info}})
        if spec.traffic == "back_to_back":
            return self._back_to_back(bed, spec, opts, frame, base, flags, info)
        raise RunnerError(f"rfc2544 cannot run '{spec.traffic}'", fix=f"use one of {', '.join(KINDS)}")

    def _throughput(self, spec, opts, measurer, max_load, base, flags, env) -> Measurement:
        min_load = min(opts.min_load_pps, max_load / 2)
        watch = SearchWatch(env.step if env else (lambda text: None), label=opts.algorithm,
                            goal=watch_goal(opts, spec.duration_s))
        results = run_search(opts.algorithm, measurer, max_load, min_load, search_goals(opts, spec.duration_s),
                             on_trial=watch)
        main = results[0]
        tput = main.throughput_pps
        frame = base["frame_size"]
        metrics = {
            **base,
            "throughput_pps": tput,
            "throughput_bps": tput * frame * 8 if tput is not None else None,
            "throughput_pct_of_max": 100.0 * tput / base["max_load_pps"] if tput is not None else None,
            "lower_bound_pps": main.lower_bound_pps, "upper_bound_pps": main.upper_bound_pps,
            "search_trials": main.trial_count, "search_trial_s": main.trial_seconds,
            "algorithm": opts.algorithm, "goal": main.goal.get("name") or opts.algorithm,
            "rx_pps": tput,
            # the maximum load itself passed: the DUT's throughput is at least this ("≥ x")
            "throughput_at_least": "max_load_passed" in main.irregular,
        }
        onset = main.forwarded_at_loss_pps()
        metrics["forwarded_at_loss_pps"] = onset
        metrics["throughput_pct_of_forwarded_at_loss"] = 100.0 * tput / onset if tput is not None and onset else None
        if metrics["throughput_pct_of_forwarded_at_loss"] is not None \
                and metrics["throughput_pct_of_forwarded_at_loss"] < 100.0 * LOSS_BELOW_CAPACITY:
            flags.append({"code": "loss-below-capacity", "severity": "warning",
                          "message": f"the result ({tput / 1e3:.1f} kpps) is "
                                     f"{metrics['throughput_pct_of_forwarded_at_loss']:.0f} % of the {onset / 1e3:.1f} "
                                     "kpps the DUT forwarded in a trial of the search that lost frames: loss set in "
                                     "well below what it forwards, so transients (CPU stalls, bursts into its "
                                     "receive ring) set the result, not its per-packet cost; its forwarding rate "
                                     "(MRR) or a loss-tolerant goal (PDR) says more"})
        if opts.direction == "bidir":
            # RFC 2544 bidirectional: throughput_pps is per direction; both directions together
            metrics["throughput_aggregate_pps"] = 2 * tput if tput is not None else None
            metrics["throughput_basis"] = "per direction (the same load each way at once); aggregate = 2 x"
            skews = [t.result.extra.get("start_skew_s") for t in main.trials]
            skews = [x for x in skews if x is not None]
            # how far apart the two senders started, at worst over the search's trials
            metrics["start_skew_max_s"] = max(skews) if skews else None
            overlap = [t.result.extra["common_interval_s"] / t.result.duration_s for t in main.trials
                       if t.result.extra.get("common_interval_s") is not None and t.result.duration_s]
            metrics["overlap_min_ratio"] = min(overlap) if overlap else None
            if overlap and min(overlap) < BIDIR_MIN_OVERLAP:
                flags.append({"code": "generator-skew", "severity": "warning",
                              "message": f"the two directions' senders sent together for only {100 * min(overlap):.0f} % "
                                         f"of a search trial (start skew up to {1e3 * max(skews or [0]):.0f} ms): part "
                                         f"of it was one-way, so the per-direction figure overstates what the DUT "
                                         f"forwards both ways; use longer trials"})
        for r in results[1:]:
            name = (r.goal.get("name") or "goal").replace("-", "_")
            metrics[f"{name}_throughput_pps"] = r.throughput_pps
        for r in results:
            for code in r.irregular:
                # the maximum load passed: the one code every search writes (connections too)
                flag = "max-load-passed" if code == "max_load_passed" else f"search-{code.replace('_', '-')}"
                flags.append({"code": flag, "severity": "warning",
                              "message": f"{r.algorithm} search ({r.goal.get('name') or 'goal'}): {code.replace('_', ' ')}"})
        latency = []
        if tput and opts.latency_at:
            for f in opts.latency_at:
                r = measurer.measure(opts.latency_duration_s, tput * f)
                # the trial's whole latency histogram (the search trials keep percentiles only)
                last = measurer.last.metrics if measurer.last is not None else {}
                hdr = {"latency_hdr_b64": last.get("latency_hdr_b64"),
                       "latency_hdr_unit": last.get("latency_hdr_unit")} if last.get("latency_hdr_b64") else {}
                latency.append({"fraction": f, "load_pps": tput * f, "loss_ratio": r.loss_ratio,
                                "generator_short": r.generator_short, "latency": r.latency,
                                "latency_samples": last.get("latency_samples"), **hdr})
                if f == 1.0 and r.latency:
                    metrics["latency_ns"] = {k.removesuffix("_ns"): v for k, v in r.latency.items()}
                    metrics.update(hdr)
        series = search_trace(main)
        if env:
            env.note(f"  {opts.algorithm}: {tput or 0:.0f} pps ({metrics['throughput_pct_of_max'] or 0:.0f} % of max) "
                     f"after {main.trial_count} trials, {main.trial_seconds:.0f} trial s")
        return Measurement(metrics=metrics, series=series, flags=flags, kind="rfc2544",
                           extra={"rfc2544": {"test": "throughput", "results": [r.to_dict() for r in results],
                                              "latency": latency}})

    def _back_to_back(self, bed, spec, opts, frame, base, flags, info) -> Measurement:
        send, recv = default_cpus(bed, 1)
        bursts: list[dict] = []

        def burst_ok(n: int) -> bool:
            for _ in range(opts.burst_trials):
                t = EngineTrial(duration_s=1.0, rate_pps=None, frame_size=frame, ip_version=spec.ip_version,
                                backend=opts.engine_backend, send_cpus=send, recv_cpus=recv, count=n)
                m = run_trial(bed, t, n).metrics
                lost = (m.get("offered_count") or 0) - (m.get("forwarded_count") or 0)
                bursts.append({"frames": n, "offered": m.get("offered_count"), "forwarded": m.get("forwarded_count"),
                               "tx_pps": m.get("tx_pps")})
                if lost > 0 or (m.get("offered_count") or 0) < n:
                    return False
            return True

        res = longest_burst(burst_ok, opts.max_burst, opts.burst_resolution)
        rates = [b["tx_pps"] for b in bursts if b.get("tx_pps")]
        metrics = {**base, "back_to_back_frames": res["frames"], "burst_max_passed": res["max_passed"],
                   "burst_rate_pps": max(rates) if rates else None, "bursts": len(bursts)}
        if res["max_passed"]:
            flags.append({"code": "burst-max-passed", "severity": "info",
                          "message": f"the longest burst tried ({opts.max_burst} frames) passed"})
        return Measurement(metrics=metrics, flags=flags, kind="rfc2544",
                           extra={"rfc2544": {"test": "back_to_back", "tried": res["tried"], "bursts": bursts}})


register(Rfc2544Runner())

__all__ = ["search_trace", "trace_goal", "KINDS", "Rfc2544Options", "Rfc2544Runner", "frame_loss_steps", "longest_burst", "parse_options",
           "TrialResult"]
