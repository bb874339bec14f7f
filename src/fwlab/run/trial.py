"""One trial on a built bed with its rule set loaded: the pause before it, its traffic, and what
it measured, as one typed outcome that becomes the trial's record line.

Owns: the pause between trials (from the previous trial's last counter reading, ending early on
an idle bed when the suite says so), the readings around the traffic (interface counters, the
firewall's counters via :meth:`fwlab.run.load.LoadedRuleset.read`, shapers, delay lines), the
samplers beside it, the runner's measurement with its background flood, the flags a trial earns
(one pair, one generator, rule set changed, link- or delay-line-limited, CPU-saturated) and the
trial's ``extra``. Never chooses what runs next (the executor does) and never writes the record.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from fwlab.errors import RunnerError
from fwlab.suites.background import FloodSpec
from fwlab.floods.flood import run_with_background
from fwlab.results import TrialRecord, build_trial, utc_now
from fwlab.results.overhead import Phases
from fwlab.run.load import LoadedRuleset
from fwlab.run.plan import TrialSpec
from fwlab.runners import TrafficSpec, TrialEnv, get_runner
from fwlab.stats.derive import derive_figures
from fwlab.stats.quality import flag_cpu_saturated, flag_delayline_limited, flag_link_limited
from fwlab.suites import Suite
from fwlab.testbed import Testbed
from fwlab.testbed.cpuseries import CpuSampler
from fwlab.testbed.delayline import trial_deltas
from fwlab.testbed.linkseries import LinkSampler, as_stream_series
from fwlab.testbed.nic import PathLine, trial_line_rate
from fwlab.testbed.pairs import stream_pairs
from fwlab.testbed.quiet import Pause, moved_packets, until_quiet
from fwlab.testbed.shaping import ETHERNET_OVERHEAD_BYTES


@dataclass
class Pacing:
    """The pause before a bed's next trial: the previous trial's last counter reading and its time
    (None: no trial on this bed yet), when the full pause ends (monotonic [s]) and whether a
    rule-set load ran since the previous trial."""

    after_links: tuple[dict, float] | None = None
    quiet_until: float = 0.0
    loaded: bool = False

    def new_bed(self) -> None:
        """A pause is measured on one bed only."""
        self.after_links = None

    def rule_set_loaded(self, loaded: LoadedRuleset, settle_s: float) -> None:
        """The next trial is the first on this rule set; a load's pause runs from the end of its
        load command, while the rule set is read back and the next trial prepares."""
        self.loaded = True
        if loaded.load_s is not None:
            self.quiet_until = (loaded.applied_monotonic or time.monotonic()) + settle_s


@dataclass
class TrialOutcome:
    """Everything one trial recorded, in the shape of its record line."""

    spec: TrialSpec
    kind: str
    metrics: dict | None
    series: list
    started_utc: str
    ruleset: dict
    counters_before: dict | None
    counters_after: dict | None
    links_before: dict
    links_after: dict
    conditions: dict
    raw: dict
    flags: list
    error: str | None
    extra: dict = field(default_factory=dict)

    def record(self) -> TrialRecord:
        return build_trial(
            self.spec.to_dict(), kind=self.kind, metrics=self.metrics, series=self.series,
            started_utc=self.started_utc, ruleset=self.ruleset, dut_counters_before=self.counters_before,
            dut_counters_after=self.counters_after, links_before=self.links_before, links_after=self.links_after,
            conditions=self.conditions, raw=self.raw, flags=self.flags, error=self.error, extra=self.extra)


def shaper_deltas(before: dict, after: dict) -> dict[str, dict | None]:
    """Per shaped interface: what its shaper sent, dropped and held back during one trial."""
    out: dict[str, dict | None] = {}
    for dev, a in (after.get("shapers") or {}).items():
        b = (before.get("shapers") or {}).get(dev)
        out[dev] = {k: a[k] - b.get(k, 0) for k in a} if a and b else None
    return out


def run_trial(bed: Testbed, env: TrialEnv, spec: TrialSpec, loaded: LoadedRuleset, cond: dict,
              line: PathLine | None, suite: Suite, pacing: Pacing) -> TrialOutcome:
    """Pause, measure ``spec`` on ``bed`` (its rule set ``loaded``), and gather what it recorded;
    ``cond`` is the bed's part of the trial's conditions (:func:`fwlab.run.beds.bed_conditions`)."""
    runner = get_runner(spec.tool)
    backend, ctx = env.backend, env.dut
    ph = Phases()
    # the previous trial's last counter reading on this bed (None for the bed's first trial):
    # the pause, a load included, is measured from it
    prev = pacing.after_links
    after_load, pacing.loaded = pacing.loaded, False
    pacing.after_links = None
    lb = None
    with ph.timed("wait"):
        if prev is not None and suite.settle_until_quiet:
            # the pause ends once the bed is idle (at the latest settle_s after the traffic or
            # the load); the reading that shows it idle is this trial's counters before (what
            # runs until the traffic, conntrack -F and the rule-set read, sends nothing)
            lb, pause = until_quiet(bed.all_link_counters, prev[0], prev[1], pacing.quiet_until,
                                    after_load=after_load)
        else:  # the rest of the pause after the previous trial or load
            time.sleep(max(0.0, pacing.quiet_until - time.monotonic()))
    tspec = TrafficSpec(traffic=spec.traffic, tool=spec.tool, size_bytes=spec.size_bytes,
                        streams=spec.streams, rate_bps=spec.rate_bps, ip_version=spec.ip_version,
                        duration_s=spec.duration_s, options=dict(spec.options),
                        target=loaded.target, flows=loaded.flows)
    if loaded.fresh_flows and ctx is not None:
        # NAT rules see only a flow's first packet: every trial starts without flows, so its
        # packets (distinct source ports, option new_flows) all walk the Service rules
        with ph.timed("dut_prep"):
            ctx.host.run(["conntrack", "-F"], ns=ctx.ns)
    started = utc_now()
    cb = digest_before = None
    if ctx:
        with ph.timed("dut_read_before"):
            cb, digest_before, before_from = loaded.read(ctx, backend, "before")
    with ph.timed("links_before"):
        # the wire's queue for this trial's tool: two bands when it marks its bulk data
        bed.set_link_bands(runner.marks_bulk_data)
        if lb is None:
            lb = bed.all_link_counters()
            pause = Pause(False, None if prev is None else time.monotonic() - prev[1], None,
                          None if prev is None else moved_packets(prev[0], lb), after_load=after_load)
        shaped_before, t_shaped = bed.link_state(), time.monotonic()
        delay_before = bed.delay_counters()
    metrics, series, raw, flags, error = None, [], {}, [], None
    # a trial that fails keeps the kind its runner's measurements have (its curve or section)
    kind, extra = runner.record_kind, {}
    flood = FloodSpec.from_dict(spec.background) if spec.background else None
    with ph.timed("samplers_start"):
        sampler = LinkSampler(bed).start()
        cpu_sampler = CpuSampler(bed, interval_s=sampler.interval_s).start()
    t_measure = time.monotonic()
    try:
        m, flood_rec = run_with_background(bed, env, flood, spec.ip_version, spec.duration_s,
                                           lambda: runner.measure(bed, tspec, env))
        metrics, series, raw, flags = m.metrics, m.series, m.raw, list(m.flags)
        kind, extra = m.kind, dict(m.extra)
        npairs = len(stream_pairs(bed))
        if npairs > 1 and "pair_count" not in metrics:
            # a tool that drives one client and one server (all but iperf3's streams)
            metrics["pair_count"] = 1
            flags.append({"code": "one-pair", "severity": "info",
                          "message": f"{spec.tool} drove pair 1 only of the bed's {npairs} "
                                     f"client/server pairs"})
        gens = bed.placement.generator_roles if bed.placement is not None else ("client",)
        if len(gens) > 1 and npairs == 1 and not runner.splits_generators:
            flags.append({"code": "one-generator", "severity": "info",
                          "message": f"{spec.tool} drove the first generator host only of {len(gens)} "
                                     f"({', '.join(gens)}): with one server host only the engine splits a "
                                     f"trial across generator hosts (server2 ... entries make iperf3 "
                                     f"stream in pairs)"})
        series = derive_figures(metrics, series, extra)  # the runner left raw figures
    except RunnerError as exc:
        error = exc.one_line()
        flood_rec = getattr(exc, "flood_record", None)
    ph.add("measure", time.monotonic() - t_measure)
    pacing.quiet_until = time.monotonic() + suite.settle_s  # the pause starts with the end of the traffic
    with ph.timed("samplers_stop"):
        link_series = sampler.stop()
        cpu_series = cpu_sampler.stop()
    extra["link_series"] = link_series
    extra["cpu_series"] = cpu_series
    if metrics and not series:
        series = as_stream_series(link_series)
    if flood is not None:
        kind = "attack" if kind == "stream" else kind
        extra["background"] = flood_rec
    with ph.timed("links_after"):
        t_la = time.monotonic()
        la = bed.all_link_counters()
    pacing.after_links = (la, t_la)  # where the next trial's pause is measured from
    ca = digest_after = None
    if ctx:
        with ph.timed("dut_read_after"):
            ca, digest_after, read_how = loaded.read(ctx, backend, "after")
    ruleset = loaded.identity()
    if digest_after is not None:
        # the digest of the listing this trial's counters came with (the load's, unless the
        # rule set changed under the trial: then say so)
        ruleset = loaded.identity(digest_after)
        extra["dut_counters_before_from"] = before_from
        extra["dut_read"] = read_how  # listing, or netlink (rule set unchanged since the listing)
        for d in {digest_before, digest_after} - {loaded.digest}:
            flags.append({"code": "ruleset-changed", "severity": "warning",
                          "message": f"the rule set read back during this trial (digest {d[:12]}) is "
                                     f"not the one loaded ({str(loaded.digest)[:12]})"})
    if shaped_before is not None:
        extra["link_shapers"] = shaper_deltas(shaped_before, bed.link_state())
        for f in flag_link_limited(extra["link_shapers"], bed.topo.link_rate_bps,
                                   window_s=time.monotonic() - t_shaped,
                                   overhead_bytes=ETHERNET_OVERHEAD_BYTES):
            flags.append(f.to_dict())
    if delay_before:
        extra["delay_lines"] = trial_deltas(delay_before, bed.delay_counters())
        for f in flag_delayline_limited(extra["delay_lines"]):
            flags.append(f.to_dict())
    if metrics and line is not None:
        metrics.update(trial_line_rate(metrics, line))
    if metrics:
        for f in flag_cpu_saturated(metrics.get("cpu_sender_pct") or 0, who="sender CPU"):
            d = f.to_dict()
            d["message"] += (" — on veth the DUT's forwarding runs in the sender's softirq, "
                             "so this rate is the generator and the firewall path together")
            flags.append(d)
    extra["overhead_s"] = {"traffic_s": spec.duration_s, **ph.to_dict()}
    extra["settle"] = pause.to_dict()
    return TrialOutcome(
        spec, kind=kind, metrics=metrics, series=series, started_utc=started, ruleset=ruleset,
        counters_before=cb, counters_after=ca, links_before=lb, links_after=la,
        conditions={**cond, "bridge_nf_call": loaded.bridge_nf_call,
                    "tool_version": cond["tool_versions"][spec.tool]},
        raw=raw, flags=flags, error=error,
        extra={**loaded.extra_before(), **extra, **loaded.extra_after()})
