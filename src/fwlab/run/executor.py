"""Running a suite: plan -> test beds -> rule sets -> traffic -> record, one trial at a time.

Owns: the order of work, the life cycle of each test bed (one bed per mode and firewall backend;
the next backend of the same mode reuses it only after a reset proven clean, fwlab.dut.reset),
loading each rule set once for all trials that share it, writing each trial the moment it ends,
resuming, progress output, and where the time goes (fwlab.results.overhead: per trial, per bed,
per run). Lean trials (the default): one interface-counter read per namespace per trial side,
one read of the firewall's rule set per trial (its counters and its digest from that one read;
the read that ends a trial also begins the next on the same loaded rule set), and the pause
between trials overlapping the bookkeeping. ``lean=False`` keeps the previous path (for
``fwlab bench overhead --compare-old``). Work for after the run (``prepare``, e.g. the
report's imports) runs beside the first bed's set-up and ends before the first traffic.
Never parses tool output (runners do), renders rules (backends do) or computes statistics.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from itertools import chain, groupby
from pathlib import Path
from typing import Callable, Iterable, TextIO

from fwlab.dut import DutContext, get_backend
from fwlab.dut.memory import check_headroom, meminfo, need as memory_need
from fwlab.dut.reset import Fingerprint, fingerprint, reset
from fwlab.errors import BackendError, FwlabError, HostError, RecordError, RunnerError, SuiteError, ToolMissing
from fwlab.floods import FloodSpec
from fwlab.floods.flood import run_with_background
from fwlab.results import RunRecord, build_trial, host_metadata, utc_now
from fwlab.results.metadata import remote_host_metadata
from fwlab.results.overhead import Phases
from fwlab.rules import REALWORLD_LAYOUTS, generate, generate_kube_proxy, generate_realworld
import fwlab.methods  # noqa: F401  (registers the test methods beside the tools)
from fwlab.runners import TrafficSpec, TrialEnv, get_runner
from fwlab.runners.engine import ENGINE_PORT, require_engine
from fwlab.testbed.cpuseries import CpuSampler
from fwlab.testbed.delayline import trial_deltas
from fwlab.testbed.linkseries import LinkSampler, as_stream_series
from fwlab.stats.derive import derive_figures
from fwlab.stats.precision import PrecisionRule, adaptive_order, figure_id, outcome
from fwlab.stats.quality import flag_cpu_saturated, flag_delayline_limited, flag_link_limited
from fwlab.suites import Suite, parse_suite
from fwlab.run.plan import TrialSpec, check_suite, expand, expand_max
from fwlab.testbed import LocalHost, Offloads, Pinning, Testbed, Topology, new_run_id, require_root, require_tool
from fwlab.testbed.hosts import HostEntry, Placement, changed_fields, identity_difference, parse_hosts
from fwlab.testbed.nic import NicInfo, PathLine, trial_line_rate, trial_nic
from fwlab.testbed.quiet import Pause, moved_packets, until_quiet
from fwlab.testbed.pairs import stream_pairs
from fwlab.testbed.shaping import ETHERNET_OVERHEAD_BYTES


#: rule sets up to this size are kept for the next repetition's load instead of generated again
GENERATED_KEPT_MAX = 20_000


class Interrupted(FwlabError):
    """The run was stopped by SIGINT or SIGTERM; finished trials are on disk."""


# -- progress ------------------------------------------------------------------------------------
@dataclass
class Progress:
    """Trial k of n with the time left, on one line (a TTY) or one line per trial (a log)."""

    total: int
    already: int = 0
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    quiet: bool = False
    started: float = field(default_factory=time.monotonic)
    done_here: int = 0

    def _eta(self) -> str:
        if not self.done_here:
            return "?"
        per = (time.monotonic() - self.started) / self.done_here
        left = per * (self.total - self.already - self.done_here)
        m, s = divmod(int(left), 60)
        return f"{m}m{s:02d}s"

    def trial_done(self, spec: TrialSpec, text: str) -> None:
        self.done_here += 1
        if self.quiet:
            return
        k = self.already + self.done_here
        width = 24
        fill = int(width * k / max(1, self.total))
        bar = "#" * fill + "." * (width - fill)
        line = f"[{bar}] {k}/{self.total} left {self._eta()}  {spec.trial_id}: {text}"
        if self.stream.isatty():
            self.stream.write("\r\x1b[2K" + line[:160])
            if k == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def note(self, text: str) -> None:
        if not self.quiet:
            if self.stream.isatty():
                self.stream.write("\r\x1b[2K")
            self.stream.write(text + "\n")
            self.stream.flush()


def _fmt_result(m: dict | None, error: str | None) -> str:
    if error:
        return f"ERROR {error[:60]}"
    parts = []
    if m.get("throughput_bps") is not None:
        bps = m["throughput_bps"]
        parts.append(f"{bps / 1e9:.2f} Gbit/s" if bps >= 1e9 else f"{bps / 1e6:.1f} Mbit/s")
    if m.get("rx_pps"):
        parts.append(f"{m['rx_pps'] / 1e3:.1f} kpps")
    if m.get("rtt_p50_ms") is not None and m.get("throughput_bps") is None:
        parts.append(f"RTT p50 {m['rtt_p50_ms'] * 1e3:.0f} µs")
    if m.get("transactions_per_s") is not None:
        parts.append(f"{m['transactions_per_s']:.0f} transactions/s")
    if "conn_rate_cps" in m:
        parts.append(f"{m['conn_rate_cps'] or 0:.0f} connections/s")
    if "capacity_connections" in m:
        parts.append(f"{m['capacity_connections'] or 0} connections held")
    s = ", ".join(parts) or "no figure"
    if m.get("loss_ratio"):
        s += f", loss {100 * m['loss_ratio']:.2f} %"
    return s


# -- preflight -----------------------------------------------------------------------------------
def preflight(suite: Suite, placement: Placement | None = None) -> None:
    """Fail before anything is built: not root, a missing program, an unavailable runner.
    A remote DUT's firewall tools are checked on its host (once connected)."""
    check_suite(suite)  # the items' default tools are filled in here (expand does it again)
    require_root()
    for prog in ("ip", "ethtool", "ping", "ss", "sysctl"):
        require_tool(prog)
    dut_host = placement.hosts.get("dut") if placement else None
    system = dut_host.system() if dut_host is not None else None
    for b in suite.backends:
        be = get_backend(b)
        if be.unsupported_here(system):
            continue  # the plan skips it, with this reason: it needs nothing
        for prog in be.tools:
            if dut_host is None:
                require_tool(prog)
            elif dut_host.run(["sh", "-c", 'command -v "$1" || PATH=$PATH:/usr/sbin:/sbin command -v "$1"',
                               "sh", prog], check=False).returncode != 0:
                raise ToolMissing(f"backend '{b}' needs '{prog}', which is not installed on host "
                                 f"{dut_host.name}", fix=f"install it on {dut_host.name}")
    if dut_host is None and "direct" not in suite.mode:
        # the largest rule set of each backend must fit in this host's memory (checked again
        # before each load, when the other users of the host may have taken some)
        avail_b = meminfo(LocalHost()).get("MemAvailable", 0) * 1024
        largest: dict[tuple[str, str], int] = {}
        for t in expand(suite, system).trials:
            if get_backend(t.backend).loads_rules:
                k = (t.backend, t.layout)
                largest[k] = max(largest.get(k, 0), t.rules)
        for (b, layout), n in sorted(largest.items()):
            why = memory_need(b, layout, n).shortfall(avail_b)
            if why:
                raise BackendError(why, fix="free memory on the DUT host or lower 'rules' in the suite")
    for item in suite.traffic:
        why = get_runner(item.tool).unavailable()
        if why:
            raise RunnerError(f"traffic tool '{item.tool}' is unavailable: {why}",
                              fix="install it (see README) or remove it from the suite")


# -- the run -------------------------------------------------------------------------------------
@dataclass
class Executor:
    suite: Suite
    record: RunRecord
    progress: Progress
    on_trial: Callable[[dict], None] | None = None
    placement: Placement | None = None  #: roles on remote hosts (None: all local)
    rule: PrecisionRule | None = None  #: adaptive repetitions (the suite's precision), else fixed
    lean: bool = True  #: lean trials and bed reuse (False: the previous path, for the bench)
    run_phases: Phases = field(default_factory=Phases)  #: the run's own bookkeeping time
    #: generated rule sets by their generator's arguments (repetitions reload them; generation is
    #: deterministic for a seed, and a RuleSet is frozen)
    _generated: dict = field(default_factory=dict)
    #: the pause before a bed's next trial: the previous trial's last counter reading and its
    #: time (None: no trial on this bed yet, or the previous path), when the full pause ends
    #: (monotonic [s]) and whether a rule-set load ran since the previous trial
    _after_links: tuple[dict, float] | None = None
    _quiet_until: float = 0.0
    _loaded: bool = False
    #: work for after the run (e.g. importing the report's plotting library) done on a thread
    #: while the first bed is built and its first rule set loaded; it never overlaps traffic:
    #: the first trial waits for it (run overhead ``prepare_wait``)
    prepare: Callable[[], None] | None = None
    _preparing: threading.Thread | None = None

    def _start_prepare(self) -> None:
        if self.prepare is None:
            return
        work = self.prepare

        def run() -> None:
            try:
                work()
            except Exception:  # noqa: BLE001 — a warm-up only: whoever needs it later meets the error
                pass

        self._preparing = threading.Thread(target=run, name="fwlab-prepare", daemon=True)
        self._preparing.start()

    def _finish_prepare(self) -> None:
        """Wait for the prepare thread (before any traffic), timed as ``prepare_wait``."""
        if self._preparing is not None:
            with self.run_phases.timed("prepare_wait"):
                self._preparing.join()
            self._preparing = None

    def run(self, trials: list[TrialSpec], done: set[str]) -> None:
        self._start_prepare()
        beds = self._beds(trials, done)
        cur = next(beds, None)
        kept: _KeptBed | None = None
        try:
            while cur is not None:
                nxt = next(beds, None)  # the next bed with work: may this bed be handed on to it?
                bed_key, group, order = cur
                kept = self._run_bed(bed_key, group, kept, nxt[0] if nxt is not None else None, order=order)
                cur = nxt
        finally:
            self._finish_prepare()
            if kept is not None:
                kept.bed.teardown()

    def _beds(self, trials: list[TrialSpec], done: set[str]):
        """(bed key, the bed's trials, run order or None) per bed that has work left."""
        for bed_key, group in groupby(trials, key=lambda t: t.bed_key):
            group = list(group)
            if self.rule is None:
                todo = [t for t in group if t.trial_id not in done]
                if todo:
                    yield bed_key, todo, None
                continue
            # repetitions past the minimum, interleaved, until each figure is precise (stats.precision)
            order = self._planned(adaptive_order(group, self.rule, done, self.record.trials,
                                                 on_round=self._round_note))
            first = next(order, None)
            if first is not None:
                yield bed_key, group, chain([first], order)

    def _planned(self, order: Iterable[TrialSpec]) -> Iterable[TrialSpec]:
        """Each adaptive trial joins run.json's plan.trial_ids as it is scheduled (the record's
        state then counts it: planned, and present once it ends)."""
        plan = self.record.run.setdefault("plan", {})
        for spec in order:
            ids = plan.setdefault("trial_ids", [])
            if spec.trial_id not in ids:
                ids.append(spec.trial_id)
                plan["trials"] = len(ids)
                self.record.save_run()
            yield spec

    def _round_note(self, rep: int, short: int, figures: int) -> None:
        self.progress.note(f"precision: repetition {rep}: {short} of {figures} figures still short of "
                           f"±{100 * self.rule.precision:g} % (at most {self.rule.max_repetitions})")

    def _topology(self, mode: str, link_rate_bps: int | None = None) -> Topology:
        s = self.suite
        return Topology(run_id=new_run_id(), mode=mode,
                        offloads=Offloads(**s.offloads.model_dump()),
                        pinning=Pinning(**s.pinning.model_dump()), device_model=s.device_model,
                        plan_overrides=self.placement.plan_overrides() if self.placement else (),
                        attacker=bool(s.background) and mode != "direct",
                        link_rate_bps=link_rate_bps, link_delay_us=s.link_delay_us, tuning=s.tuning,
                        pairs=s.pairs, ip_versions=tuple(sorted(set(s.ip_versions))))

    def _run_bed(self, bed_key: tuple, trials: list[TrialSpec], kept: "_KeptBed | None" = None,
                 next_key: tuple | None = None, order: Iterable[TrialSpec] | None = None) -> "_KeptBed | None":
        """Run ``order`` (default ``trials``; ``trials`` tell the runners what the bed holds) on
        ``kept`` (a bed reset clean after the previous backend) or on a new bed. Return this bed
        for ``next_key`` when that is the same mode and link rate and the reset after this backend
        is proven clean; otherwise tear it down and return None."""
        mode, backend_name, link_rate_bps = bed_key
        backend = get_backend(backend_name)
        ph = Phases()
        self._after_links = None  # a pause is measured on one bed only
        # the delay (link_delay) is one for the whole suite, so a bed of the same mode and link rate
        # is the same bed, delay lines included
        reuse_next = (self.lean and next_key is not None and next_key[0] == mode
                      and next_key[2] == link_rate_bps and self.placement is None)
        if kept is not None:
            bed, pristine = kept.bed, kept.pristine
        else:
            topo = self._topology(mode, link_rate_bps)
            bed = Testbed(topo, placement=self.placement, engine=require_engine() if topo.wires else None)
            pristine = None
            with ph.timed("build"):
                bed.build()
        runners = {get_runner(t.tool) for t in trials}
        handed_on: _KeptBed | None = None
        desc: dict | None = None
        try:
            with ph.timed("describe"):
                desc = dict(kept.desc) if kept is not None else bed.describe()
            desc["backend"] = backend_name
            with ph.timed("backend_version"):
                desc["backend_version"] = backend.version_at(bed.host_for("dut") if bed.topo.has_dut else bed.host,
                                                             bed.ns("dut") if bed.topo.has_dut else None)
            desc["bed_reused"] = kept is not None
            if kept is not None:
                desc["reset"] = kept.reset
            self.record.run.setdefault("beds", []).append(desc)
            self.record.save_run()
            self.progress.note(f"test bed {bed.topo.run_id}: {mode}, backend {backend_name} "
                               + (f"(reused: reset clean after {kept.reset['after_backend']})" if kept is not None
                                  else f"(built in {bed.build_s:.2f} s)"))
            line = bed.path_line([NicInfo(**n) for n in desc["nics"]])
            conditions_base = {
                "offloads": desc["offloads"],
                # speed, driver, firmware, every offload, queues, IRQs and their affinity, per interface
                "nics": [trial_nic(n) for n in desc["nics"]],
                "line_rate": desc["line_rate"],
                "pinning": bed.topo.to_dict()["pinning"],
                "device": desc.get("device"),
                "link": desc.get("link"),
                "link_delay": _delay_conditions(desc.get("delay")),
                "tuning": desc.get("tuning"),
                "testbed_run_id": bed.topo.run_id,
                "bed_reused": kept is not None,
                "backend_version": desc["backend_version"],
                "tool_versions": {r.name: r.version() for r in runners},
            }
            if self.placement is not None and self.placement.remote_roles:
                # remote commands (rule loads too) include an SSH session each: say how much
                conditions_base["remote_roles"] = {r: self.placement.describe_role(r)
                                                   for r in bed.topo.roles if bed.is_remote(r)}
            ctx = DutContext(bed.host_for("dut"), bed.ns("dut"), mode) if bed.topo.has_dut else None
            if reuse_next and ctx is not None and pristine is None:
                with ph.timed("reset"):
                    pristine = fingerprint(bed, ctx)  # the new bed, to compare the reset with
            env = TrialEnv(backend=backend if ctx else None, dut=ctx, note=self.progress.note)
            with ph.timed("runners_start"):
                for r in sorted(runners, key=lambda r: r.name):
                    info = r.bed_started(bed, env, [t for t in trials if t.tool == r.name])
                    if info is not None:
                        env.bed_info[r.name] = info
                        desc.setdefault("runner_info", {})[r.name] = info
                        self.record.save_run()
            loaded_key = None
            load_info: dict = {}
            try:
                for spec in (trials if order is None else order):
                    if spec.config_key != loaded_key:
                        load_info = self._load(bed, ctx, backend, spec, ph)
                        loaded_key = spec.config_key
                    self._trial(bed, env, spec, load_info, conditions_base, line)
            finally:
                with ph.timed("runners_stop"):
                    for r in runners:
                        r.stop(bed)
                if ctx is not None:
                    with ph.timed("flush"):
                        try:
                            backend.flush(ctx)
                        except FwlabError:
                            pass
            if reuse_next and ctx is not None and pristine is not None:
                with ph.timed("reset"):
                    res = reset(bed, ctx, backend, pristine)
                note = {"after_backend": backend_name, "clean": res.clean, "proven": res.proven,
                        "residue": list(res.residue)}
                desc["reset_for_next"] = note
                if res.reusable:
                    handed_on = _KeptBed(bed, pristine, note, {k: v for k, v in desc.items() if k not in _PER_BACKEND})
                else:
                    self.progress.note(f"test bed {bed.topo.run_id} rebuilt after {backend_name}: "
                                       + ("; ".join(res.residue[:2]) if res.residue
                                          else "its clean reset is not proven (Backend.clean_reset)"))
        finally:
            if handed_on is None:
                with ph.timed("teardown"):
                    bed.teardown()
            if desc is not None:
                desc["overhead_s"] = ph.to_dict()
                self.record.save_run()
        return handed_on

    def _load(self, bed: Testbed, ctx: DutContext | None, backend, spec: TrialSpec,
              ph: Phases | None = None) -> dict:
        ph = ph or Phases()
        self._loaded = True  # the next trial is the first on this rule set
        if ctx is None:
            return {"digest": None, "family": None, "load_s": None, "bridge_nf_call": None}
        plan = bed.topo.plan
        t_gen = time.monotonic()
        if spec.layout == "kube-proxy":
            if spec.tool != "engine":
                raise SuiteError(f"layout kube-proxy sends the test traffic to a Service ClusterIP, "
                                 f"which only the engine does (not {spec.tool})",
                                 fix="use tool = \"engine\" with layout kube-proxy")
            rs = generate_kube_proxy(spec.rules, endpoints=self.suite.kube_endpoints,
                                     server_addr=plan.server(spec.ip_version), port=ENGINE_PORT,
                                     client_net=plan.client_net(spec.ip_version),
                                     server_net=plan.server_net(spec.ip_version), seed=self.suite.seed)
        elif spec.layout in REALWORLD_LAYOUTS:
            if spec.layout in ("docker", "classbench-acl") and spec.tool != "engine":
                raise SuiteError(f"layout {spec.layout} sends the test traffic to addresses other than the "
                                 f"server's, which only the engine does (not {spec.tool})",
                                 fix=f"use tool = \"engine\" with layout {spec.layout}")
            topo = bed.topo
            rs = generate_realworld(spec.layout, spec.rules, ip_version=spec.ip_version,
                                    server_addr=plan.server(spec.ip_version), port=ENGINE_PORT,
                                    host_addr=plan.dut_client_side4 or "", dut_client_if=topo.dut_client_if,
                                    dut_server_if=topo.dut_server_if, client_net=plan.client_net(spec.ip_version),
                                    server_net=plan.server_net(spec.ip_version), seed=self.suite.seed)
        else:
            args = (spec.rules, spec.layout if spec.layout in ("linear", "set") else "linear",
                    spec.ip_version, plan.client_net(spec.ip_version), plan.server_net(spec.ip_version),
                    spec.stateful_shortcut, self.suite.seed)
            rs = self._generated.get(args)
            if rs is None:
                rs = generate(args[0], args[1], ip_version=args[2], client_net=args[3], server_net=args[4],
                              stateful_shortcut=args[5], seed=args[6])
                if rs.count <= GENERATED_KEPT_MAX:  # the next repetition loads the same (frozen) rule set
                    self._generated[args] = rs
        ph.add("load_generate", time.monotonic() - t_gen)
        with ph.timed("load_flush"):
            backend.flush(ctx)
        check_headroom(ctx.host, backend.name, rs.layout, rs.count)
        t0 = time.monotonic()
        res = backend.load(ctx, rs)
        ph.add("load_apply", res.load_s)  # the one load command
        ph.add("load_readback", time.monotonic() - t0 - res.load_s)  # render, digest read, sysctls
        if self.lean:  # the pause runs from the load command's end, while the rule set is read
            # back and the next trial prepares (see _trial)
            self._quiet_until = (res.applied_monotonic or time.monotonic()) + self.suite.settle_s
        else:
            with ph.timed("load_settle"):
                time.sleep(self.suite.settle_s)
        info = {"digest": res.digest, "family": res.family, "load_s": res.load_s,
                "bridge_nf_call": res.bridge_nf_call, "rendered_lines": res.rendered_lines,
                "kernel_mem_bytes": res.kernel_mem_bytes,
                # the read the load's digest came from: the first trial's counters before
                "_digest_family": res.digest_family, "_state": res.state}
        if res.notes:
            info["notes"] = list(res.notes)
        info["target"] = rs.target  # the test service / published port (None: the server itself)
        info["fresh_flows"] = rs.fresh_flows_per_trial
        if rs.flows:  # classbench-acl: the flows spread over the rules, and which rules they meet
            info["flows"] = rs.flows
            if rs.count <= 5000:  # O(N^2) check, under a second at 1000 rules
                from fwlab.rules.classbench import first_matches
                hits = first_matches(rs)
                info["flows_rules_met"] = len({h for h in hits if h is not None})
                info["flows_unmatched"] = sum(h is None for h in hits)
        return info

    def _links(self, bed: Testbed) -> dict:
        if self.lean:
            return bed.all_link_counters()
        return {f"{role}:{dev}": bed.link_counters(role, dev) for role, dev in bed.interfaces()}

    def _rule_read(self, ctx: DutContext, backend, load_info: dict, side: str):
        """The firewall's counters for one side of a trial, and the digest of the listing they
        came with (None in the old path). Lean: the before side is the last read on this loaded
        rule set (the load's own read, or the previous trial's after-read); the after side is
        one fresh read, kept for the next trial."""
        if not self.lean:
            return backend.counters(ctx), None, "read"
        last = load_info.get("_state")
        if side == "before" and last is not None:
            return last.counters, last.digest, load_info.get("_state_from", "load")
        state = backend.read_state(ctx, load_info["_digest_family"])
        load_info["_state"], load_info["_state_from"] = state, "previous trial's after-read"
        return state.counters, state.digest, state.how

    def _trial(self, bed: Testbed, env: TrialEnv, spec: TrialSpec, load_info: dict, cond: dict,
               line: PathLine | None = None) -> None:
        self._finish_prepare()  # nothing of it runs beside the traffic
        runner = get_runner(spec.tool)
        backend, ctx = env.backend, env.dut
        ph = Phases()
        # the previous trial's last counter reading on this bed (None for the bed's first trial):
        # the pause, a load included, is measured from it
        prev = self._after_links if self.lean else None
        after_load, self._loaded = self._loaded, False
        self._after_links = None
        until_quiet_ok = prev is not None and self.suite.settle_until_quiet
        lb = None
        with ph.timed("wait"):
            if until_quiet_ok:
                # the pause ends once the bed is idle (at the latest settle_s after the traffic or
                # the load); the reading that shows it idle is this trial's counters before (what
                # runs until the traffic, conntrack -F and the lean rule-set read, sends nothing)
                lb, pause = until_quiet(lambda: self._links(bed), prev[0], prev[1], self._quiet_until,
                                        after_load=after_load)
            else:  # the rest of the pause after the previous trial or load
                time.sleep(max(0.0, self._quiet_until - time.monotonic()))
        tspec = TrafficSpec(traffic=spec.traffic, tool=spec.tool, size_bytes=spec.size_bytes,
                            streams=spec.streams, rate_bps=spec.rate_bps, ip_version=spec.ip_version,
                            duration_s=spec.duration_s, options=dict(spec.options),
                            target=load_info.get("target"), flows=load_info.get("flows"))
        if load_info.get("fresh_flows") and ctx is not None:
            # NAT rules see only a flow's first packet: every trial starts without flows, so its
            # packets (distinct source ports, option new_flows) all walk the Service rules
            with ph.timed("dut_prep"):
                ctx.host.run(["conntrack", "-F"], ns=ctx.ns)
        started = utc_now()
        cb = digest_before = None
        if ctx:
            with ph.timed("dut_read_before"):
                cb, digest_before, before_from = self._rule_read(ctx, backend, load_info, "before")
        with ph.timed("links_before"):
            # the wire's queue for this trial's tool: two bands when it marks its bulk data
            bed.set_link_bands(runner.marks_bulk_data)
            if lb is None:
                lb = self._links(bed)
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
        if self.lean:  # the pause between trials starts with the end of the traffic
            self._quiet_until = time.monotonic() + self.suite.settle_s
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
            la = self._links(bed)
        if self.lean:
            self._after_links = (la, t_la)  # where the next trial's pause is measured from
        ca = digest_after = None
        if ctx:
            with ph.timed("dut_read_after"):
                ca, digest_after, read_how = self._rule_read(ctx, backend, load_info, "after")
        ruleset = load_info
        if digest_after is not None:
            # the digest of the listing this trial's counters came with (the load's, unless the
            # rule set changed under the trial: then say so)
            ruleset = {**load_info, "digest": digest_after}
            extra["dut_counters_before_from"] = before_from
            extra["dut_read"] = read_how  # listing, or netlink (rule set unchanged since the listing)
            for d in {digest_before, digest_after} - {load_info.get("digest")}:
                flags.append({"code": "ruleset-changed", "severity": "warning",
                              "message": f"the rule set read back during this trial (digest {d[:12]}) is "
                                         f"not the one loaded ({str(load_info.get('digest'))[:12]})"})
        if shaped_before is not None:
            extra["link_shapers"] = _shaper_deltas(shaped_before, bed.link_state())
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
        if self.lean:
            extra["settle"] = pause.to_dict()
        t_rec = time.monotonic()
        rec = build_trial(
            spec.to_dict(), kind=kind, metrics=metrics, series=series, started_utc=started, ruleset=ruleset,
            dut_counters_before=cb, dut_counters_after=ca, links_before=lb, links_after=la,
            conditions={**cond, "bridge_nf_call": load_info.get("bridge_nf_call"),
                        "tool_version": cond["tool_versions"][spec.tool]},
            raw=raw, flags=flags, error=error,
            extra={"rendered_lines": load_info.get("rendered_lines"),
                   "rule_kernel_mem_bytes": load_info.get("kernel_mem_bytes"),
                   **({"ruleset_notes": load_info["notes"]} if load_info.get("notes") else {}), **extra,
                   # classbench-acl: the flows' ranges and how many rules they meet first
                   **{k: load_info[k] for k in ("flows", "flows_rules_met", "flows_unmatched") if k in load_info}})
        self.record.append_trial(rec)
        if self.on_trial:
            self.on_trial(rec.to_json())
        self.progress.trial_done(spec, _fmt_result(metrics, error))
        self.run_phases.add("record", time.monotonic() - t_rec)
        if not self.lean:
            time.sleep(self.suite.settle_s)
            self.run_phases.add("settle", self.suite.settle_s)


#: keys of a bed's description that belong to one backend's use of it (not copied on reuse)
_PER_BACKEND = ("backend", "backend_version", "runner_info", "overhead_s", "bed_reused", "reset", "reset_for_next")


@dataclass
class _KeptBed:
    """A bed handed from one backend to the next: reset clean, with its fingerprint when new."""

    bed: Testbed
    pristine: Fingerprint
    reset: dict  #: what the reset found (after_backend, clean, proven, residue)
    desc: dict  #: its description (measured when it was built)


def _delay_conditions(delay: dict | None) -> dict | None:
    """The delay lines' settings and wiring for each trial's conditions (not their counters)."""
    if not delay:
        return None
    return {k: v for k, v in delay.items() if k != "lines"}


def _shaper_deltas(before: dict, after: dict) -> dict[str, dict | None]:
    """Per shaped interface: what its shaper sent, dropped and held back during one trial."""
    out: dict[str, dict | None] = {}
    for dev, a in (after.get("shapers") or {}).items():
        b = (before.get("shapers") or {}).get(dev)
        out[dev] = {k: a[k] - b.get(k, 0) for k in a} if a and b else None
    return out


def _placement(suite: Suite, hosts: dict[str, HostEntry] | None) -> Placement | None:
    """The suite's [hosts] with a hosts file's entries on top (None when every role is local)."""
    entries = {**parse_hosts({"hosts": suite.hosts}, "in the suite"), **(hosts or {})}
    if not any(e.remote for e in entries.values()):
        return None
    return Placement(entries)


def check_remote_roles(plan, placement: Placement | None) -> None:
    """Refuse, in one line, trials whose tool (or background flood) runs only in this machine's
    namespaces while the hosts file puts its roles on remote hosts."""
    if placement is None:
        return
    remote = set(placement.remote_roles)
    ends = sorted(remote & {"client", "server"})
    servers = placement.server_roles[1:]
    for t in plan.trials:
        if ends and not get_runner(t.tool).remote_roles:
            raise SuiteError(f"tool '{t.tool}' runs only on this machine, but the hosts file puts "
                             f"{' and '.join(ends)} on a remote host",
                             fix="run it on the namespace test bed (no --hosts), or use engine, rfc2544, "
                                 "iperf3, netperf or parallel in a lab (docs/lab.md)")
        if servers and get_runner(t.tool).splits_generators:
            raise SuiteError(f"tool '{t.tool}' splits its trial across the generator hosts towards one server, "
                             f"but the hosts file names server hosts {', '.join(servers)} (client<k> streams to "
                             f"server<k>: iperf3 streams only)",
                             fix="drop the server2 ... entries for this suite, or run iperf3 stream trials "
                                 "(docs/lab.md, \"Several generator hosts\")")
        if t.background and t.mode != "direct":
            check_flood_roles(placement)


def check_flood_placement(suite: Suite, placement: Placement | None) -> None:
    """:func:`check_flood_roles` for a suite with a background flood in a mode with a DUT."""
    if placement is not None and suite.background and any(m != "direct" for m in suite.mode):
        check_flood_roles(placement)


def check_flood_roles(placement: Placement) -> None:
    """A background flood runs from the attacker's namespace here beside a DUT namespace here
    (every role local), or from a remote attacker host cabled to a remote DUT host whose third
    data interface (``hosts.dut.ifaces``) is that cable's end (client and server may then be
    anywhere). Anything else: one line."""
    remote = set(placement.remote_roles)
    if "attacker" not in remote:
        if remote:
            raise SuiteError("a background flood from this machine's attacker namespace needs every role here, "
                             f"but the hosts file puts {' and '.join(sorted(remote))} on a remote host",
                             fix="add a remote [hosts.attacker] (one data interface) cabled to a remote DUT, or "
                                 "run the flood suite on the namespace test bed (no --hosts) (docs/lab.md)")
        return
    dut = placement.entry("dut")
    if dut is None or not dut.remote:
        raise SuiteError("a remote attacker host floods a remote DUT only, but the hosts file has the DUT on "
                         "this machine",
                         fix="add a remote [hosts.dut] with ifaces = [client side, server side, attacker side], "
                             "or drop [hosts.attacker] (docs/lab.md)")
    if len(dut.ifaces) != 3:
        raise SuiteError("a remote attacker host needs the DUT's interface cabled to it, but hosts.dut.ifaces "
                         f"names {len(dut.ifaces)}",
                         fix="give hosts.dut.ifaces a third entry: the DUT's attacker-side interface (docs/lab.md)")


def dut_system(placement: Placement | None) -> str | None:
    """The remote DUT host's ``uname -s`` (None: the DUT is on this machine)."""
    host = placement.hosts.get("dut") if placement is not None else None
    return host.system() if host is not None else None


def _remote_hosts_info(placement: Placement) -> dict:
    return {"entries": {r: e.model_dump(exclude_defaults=True) for r, e in placement.entries.items()},
            "clock_offsets": {r: c.to_dict() for r, c in placement.clocks.items()},
            "clock_sync": dict(placement.sync),
            "clock_warning": placement.latency_clock_warning(),
            "command_overhead_s": dict(placement.overheads_s),
            "metadata": {r: remote_host_metadata(h) for r, h in placement.hosts.items()}}


def start_run(suite: Suite, suite_text: str, out_root: Path, *, quiet: bool = False,
              hosts: dict[str, HostEntry] | None = None,
              order: Callable[[list[TrialSpec]], list[TrialSpec]] | None = None,
              lean: bool = True, prepare: Callable[[], None] | None = None) -> RunRecord:
    """Run ``suite``; ``hosts`` (from ``--hosts FILE``) places roles on remote hosts; ``order``
    may reorder the planned trials (the same trials; e.g. ``fwlab bench search``'s ABBA order);
    ``lean`` False takes the previous per-trial path (``fwlab bench overhead --compare-old``);
    ``prepare`` is work for after the run done beside the first bed's set-up, never beside
    traffic (:attr:`Executor.prepare`; e.g. :func:`fwlab.report.prepare`)."""
    placement = _placement(suite, hosts)
    check_flood_placement(suite, placement)  # before any host is connected
    if placement is None:
        preflight(suite)
    with placement or _Nothing():
        if placement is not None:
            preflight(suite, placement)
        plan = expand(suite, dut_system(placement))
        check_remote_roles(plan, placement)
        if order is not None:
            plan = _reordered(plan, order)
        rec = RunRecord.create(out_root, suite.name, {
            "suite": {"name": suite.name, "toml": suite_text, "parsed": suite.model_dump()},
            "plan": {"trials": len(plan.trials), "trial_ids": [t.trial_id for t in plan.trials],
                     "skipped": list(plan.skipped)},
            "host": host_metadata(),
            **({"remote_hosts": _remote_hosts_info(placement)} if placement else {}),
        })
        _execute(suite, plan, rec, quiet, placement, lean=lean, prepare=prepare)
    return rec


def resume_hosts_change(rec: RunRecord, suite: Suite, hosts: dict[str, HostEntry],
                        origin: str | None) -> dict:
    """What a hosts file given to ``--resume`` changes in the run's stored entries (for
    ``resume_events[].hosts_file``); HostError naming the first differing field when it changes
    what the record's identity depends on (roles, data interfaces, addresses, namespaces)."""
    stored = (rec.run.get("remote_hosts") or {}).get("entries")
    old = {**suite.hosts, **(stored or {})}
    new = {**suite.hosts, **{r: e.model_dump(exclude_defaults=True) for r, e in hosts.items()}}
    diff = identity_difference(old, new)
    if diff is not None:
        raise HostError(f"hosts file {origin or ''} does not match the run in {rec.path}: {diff} differs",
                        fix="give --resume a hosts file with the run's roles, data interfaces, addresses and "
                            "namespaces (only how each host is reached may change), or start a new run")
    return {"file": origin, "changed": changed_fields(old, new), "previous_entries": stored}


def resume_run(path: Path, *, quiet: bool = False, hosts: dict[str, HostEntry] | None = None,
               hosts_origin: str | None = None, repair: bool = False) -> RunRecord:
    """Finish the run in ``path``. Its hosts are the ones stored in run.json, or ``hosts`` (from
    ``--resume DIR --hosts FILE``) when they keep the run's roles, data interfaces, addresses and
    namespaces (:func:`fwlab.testbed.hosts.identity_difference`); the change is recorded.

    Every check runs before the record is written: a damaged trials.jsonl (lines that are not
    trial records) is refused, or with ``repair`` its bad lines are moved to a side file
    (RunRecord.set_aside_bad_lines) once every other check has passed; a record holding trials
    the suite does not plan is refused. A refused resume leaves the record byte for byte as it was."""
    rec = RunRecord.open(path)
    read = rec.read()
    if why := rec.resume_damage(read):
        if not repair or read.unreadable:
            raise RecordError(f"{path} is damaged: {why}", fix="restore it from a backup" if read.unreadable else
                              f"fwlab run --resume {path} --repair moves the bad lines to a side file "
                              "(kept), or restore the record from a backup")
    suite = parse_suite(rec.run["suite"]["parsed"], f"from {path}")
    stored = (rec.run.get("remote_hosts") or {}).get("entries")
    changed = None
    if hosts is None:
        try:
            placement = _placement(suite, parse_hosts({"hosts": stored}, f"stored in {path}") if stored else None)
        except HostError as exc:  # e.g. a key or known_hosts file that has moved since
            raise HostError(exc.message, fix=f"give the run's hosts as they are reached now: fwlab run --resume "
                                             f"{path} --hosts FILE (docs/lab.md)") from None
    else:
        changed = resume_hosts_change(rec, suite, hosts, hosts_origin)
        placement = _placement(suite, hosts)
        check_flood_placement(suite, placement)
    with placement or _Nothing():
        preflight(suite, placement)
        plan = expand(suite, dut_system(placement))
        check_remote_roles(plan, placement)
        rule = PrecisionRule.of_suite(suite)
        known = {t.trial_id for t in (expand_max(suite, dut_system(placement)) if rule else plan).trials}
        if extra := sorted({t["trial_id"] for t in read.trials if not t.get("error")} - known):
            raise RecordError(f"{rec.path} holds {len(extra)} trial(s) this suite does not plan "
                              f"(e.g. {extra[0][:80]})", fix="resume with the fwlab that wrote it")
        if repair and (side := rec.set_aside_bad_lines()) is not None:
            Progress(total=0, quiet=quiet).note(f"repair: moved {len(read.bad_lines)} damaged line(s) to {side}")
        rec.repair_torn_tail()
        if not isinstance(rec.run.get("plan"), dict):
            rec.run["plan"] = {"trials": len(plan.trials), "skipped": list(plan.skipped)}
        rec.run["plan"].setdefault("trial_ids", [t.trial_id for t in plan.trials])  # a 1.0 record has none
        if changed is not None and placement is not None:  # a later --resume uses the new entries
            rec.run["remote_hosts"] = {**(rec.run.get("remote_hosts") or {}), "entries": {
                r: e.model_dump(exclude_defaults=True) for r, e in placement.entries.items()}}
        rec.note_resume(hosts_file=changed)
        _execute(suite, plan, rec, quiet, placement)
    return rec


def _reordered(plan, order: Callable[[list[TrialSpec]], list[TrialSpec]]):
    trials = list(order(list(plan.trials)))
    if sorted(t.trial_id for t in trials) != sorted(t.trial_id for t in plan.trials):
        raise FwlabError("a trial order must keep exactly the planned trials", fix="report this as a bug")
    return type(plan)(tuple(trials), plan.skipped)


class _Nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc) -> None:
        return None


def _execute(suite: Suite, plan, rec: RunRecord, quiet: bool, placement: Placement | None = None,
             lean: bool = True, prepare: Callable[[], None] | None = None) -> None:
    done = rec.finished_ids()
    rule = PrecisionRule.of_suite(suite)
    known = {t.trial_id for t in (expand_max(suite, dut_system(placement)) if rule else plan).trials}
    if done - known:
        raise RecordError(f"{rec.path} holds trials this suite does not plan", fix="resume with the fwlab that wrote it")
    # adaptive: the bar counts to the maximum (figures that reach the precision stop earlier)
    total = len(known) if rule else len(plan.trials)
    progress = Progress(total=total, already=len(done & known), quiet=quiet)
    if progress.already:
        progress.note(f"resuming: {progress.already} of {progress.total} trials already done")
    warning = placement.latency_clock_warning() if placement is not None else None
    if warning and any(t.tool in ("engine", "rfc2544") for t in plan.trials):
        progress.note(f"warning: {warning}")
    ex = Executor(suite, rec, progress, placement=placement, rule=rule, lean=lean, prepare=prepare)
    rec.run["lean_trials"] = lean
    try:
        ex.run(list(plan.trials), done)
    except KeyboardInterrupt:
        _record_precision(rec, rule, plan)
        rec.set_status("interrupted")
        raise Interrupted(f"run interrupted; {len(rec.finished_ids())} finished trials kept in {rec.path}",
                          fix=f"fwlab run --resume {rec.path}") from None
    except BaseException:
        rec.set_status("failed")
        raise
    finally:
        rec.run["overhead_s"] = ex.run_phases.to_dict()  # record writing (and settle, old path)
    p = _record_precision(rec, rule, plan)
    if p is not None:
        at_max = sum(1 for f in p["figures"] if f["status"] == "max-reached")
        progress.note(f"precision: {p['met']} of {p['total']} figures within ±{100 * p['precision']:g} %"
                      + (f"; {at_max} hit the maximum of {p['max_repetitions']} without it" if at_max else ""))
    rec.set_status("complete")


def _record_precision(rec: RunRecord, rule: PrecisionRule | None, plan) -> dict | None:
    """run.json's ``precision``: per figure the repetitions it took and the interval reached."""
    if rule is None:
        return None
    rec.run["precision"] = outcome(rec.trials(), rule, [figure_id(t.to_dict()) for t in plan.trials]
                                   ).model_dump(mode="json")
    return rec.run["precision"]


def measure_baseline(suite_name_or_path: str, runs: int, out_root: Path | str, *, quiet: bool = False,
                     start_run: Callable | None = None) -> "Baseline":
    """Run the suite `runs` times (needs root and real traffic), then build the baseline.

    `start_run` defaults to :func:`start_run` (suite, text, out_root, quiet=...); the records are
    read back by `fwlab.analysis.baseline.baseline_from_runs`.
    """
    if runs < 2:
        raise FwlabError(f"a noise baseline needs at least 2 runs, got {runs}",
                         fix="use --runs 2 or more (seed 002 used ten)")
    from fwlab.analysis.baseline import baseline_from_runs
    from fwlab.suites import load_suite

    start_run = start_run or globals()["start_run"]
    suite, text = load_suite(suite_name_or_path)
    dirs = [start_run(suite, text, Path(out_root), quiet=quiet).path for _ in range(runs)]
    return baseline_from_runs(dirs)
