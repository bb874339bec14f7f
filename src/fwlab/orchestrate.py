"""Running a suite: plan -> test beds -> rule sets -> traffic -> record, one trial at a time.

Owns: the order of work, the life cycle of each test bed (one fresh bed, hence one fresh DUT
namespace, per mode and firewall backend), loading each rule set once for all trials that share
it, writing each trial the moment it ends, resuming, and progress output.
Never parses tool output (runners do), renders rules (backends do) or computes statistics.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Callable, TextIO

from fwlab.dut import DutContext, get_backend
from fwlab.dut.memory import check_headroom, meminfo, need as memory_need
from fwlab.errors import BackendError, FwlabError, RecordError, RunnerError, SuiteError, ToolMissing
from fwlab.floods import FloodSpec, run_with_background
from fwlab.results import RunRecord, build_trial, host_metadata, utc_now
from fwlab.results.metadata import remote_host_metadata
from fwlab.rules import generate, generate_kube_proxy
import fwlab.methods  # noqa: F401  (registers the test methods beside the tools)
from fwlab.runners import TrafficSpec, TrialEnv, get_runner
from fwlab.runners.engine import ENGINE_PORT
from fwlab.testbed.cpuseries import CpuSampler
from fwlab.testbed.linkseries import LinkSampler, as_stream_series
from fwlab.stats.quality import flag_cpu_saturated, flag_link_limited
from fwlab.suites import Suite, parse_suite
from fwlab.suites.plan import TrialSpec, check_suite, expand
from fwlab.testbed import LocalHost, Offloads, Pinning, Testbed, Topology, new_run_id, require_root, require_tool
from fwlab.testbed.hosts import HostEntry, Placement, parse_hosts


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
        parts.append(f"{m['throughput_bps'] / 1e9:.2f} Gbit/s")
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

    def run(self, trials: list[TrialSpec], done: set[str]) -> None:
        for bed_key, group in groupby(trials, key=lambda t: t.bed_key):
            todo = [t for t in group if t.trial_id not in done]
            if todo:
                self._run_bed(bed_key, todo)

    def _topology(self, mode: str) -> Topology:
        s = self.suite
        return Topology(run_id=new_run_id(), mode=mode,
                        offloads=Offloads(**s.offloads.model_dump()),
                        pinning=Pinning(**s.pinning.model_dump()), device_model=s.device_model,
                        plan_overrides=self.placement.plan_overrides() if self.placement else (),
                        attacker=bool(s.background) and mode != "direct",
                        link_rate_bps=s.link_rate_bps)

    def _run_bed(self, bed_key: tuple, trials: list[TrialSpec]) -> None:
        mode, backend_name = bed_key
        backend = get_backend(backend_name)
        bed = Testbed(self._topology(mode), placement=self.placement)
        runners = {get_runner(t.tool) for t in trials}
        with bed:
            desc = bed.describe()
            desc["backend"] = backend_name
            desc["backend_version"] = backend.version(bed.host_for("dut") if bed.topo.has_dut else bed.host)
            self.record.run.setdefault("beds", []).append(desc)
            self.record.save_run()
            self.progress.note(f"test bed {bed.topo.run_id}: {mode}, backend {backend_name} "
                               f"(built in {bed.build_s:.2f} s)")
            conditions_base = {
                "offloads": desc["offloads"],
                "pinning": bed.topo.to_dict()["pinning"],
                "device": desc.get("device"),
                "link": desc.get("link"),
                "testbed_run_id": bed.topo.run_id,
                "backend_version": desc["backend_version"],
                "tool_versions": {r.name: r.version() for r in runners},
            }
            if self.placement is not None and self.placement.remote_roles:
                # remote commands (rule loads too) include an SSH session each: say how much
                conditions_base["remote_roles"] = {r: self.placement.describe_role(r)
                                                   for r in bed.topo.roles if bed.is_remote(r)}
            ctx = DutContext(bed.host_for("dut"), bed.ns("dut"), mode) if bed.topo.has_dut else None
            env = TrialEnv(backend=backend if ctx else None, dut=ctx, note=self.progress.note)
            for r in sorted(runners, key=lambda r: r.name):
                info = r.bed_started(bed, env, [t for t in trials if t.tool == r.name])
                if info is not None:
                    env.bed_info[r.name] = info
                    desc.setdefault("runner_info", {})[r.name] = info
                    self.record.save_run()
            loaded_key = None
            load_info: dict = {}
            try:
                for spec in trials:
                    if spec.config_key != loaded_key:
                        load_info = self._load(bed, ctx, backend, spec)
                        loaded_key = spec.config_key
                    self._trial(bed, env, spec, load_info, conditions_base)
            finally:
                for r in runners:
                    r.stop(bed)
                if ctx is not None:
                    try:
                        backend.flush(ctx)
                    except FwlabError:
                        pass

    def _load(self, bed: Testbed, ctx: DutContext | None, backend, spec: TrialSpec) -> dict:
        if ctx is None:
            return {"digest": None, "family": None, "load_s": None, "bridge_nf_call": None}
        plan = bed.topo.plan
        if spec.layout == "kube-proxy":
            if spec.tool != "engine":
                raise SuiteError(f"layout kube-proxy sends the test traffic to a Service ClusterIP, "
                                 f"which only the engine does (not {spec.tool})",
                                 fix="use tool = \"engine\" with layout kube-proxy")
            rs = generate_kube_proxy(spec.rules, endpoints=self.suite.kube_endpoints,
                                     server_addr=plan.server(spec.ip_version), port=ENGINE_PORT,
                                     client_net=plan.client_net(spec.ip_version),
                                     server_net=plan.server_net(spec.ip_version), seed=self.suite.seed)
        else:
            rs = generate(spec.rules, spec.layout if spec.layout in ("linear", "set") else "linear",
                          ip_version=spec.ip_version, client_net=plan.client_net(spec.ip_version),
                          server_net=plan.server_net(spec.ip_version),
                          stateful_shortcut=spec.stateful_shortcut, seed=self.suite.seed)
        backend.flush(ctx)
        check_headroom(ctx.host, backend.name, rs.layout, rs.count)
        res = backend.load(ctx, rs)
        time.sleep(self.suite.settle_s)
        info = {"digest": res.digest, "family": res.family, "load_s": res.load_s,
                "bridge_nf_call": res.bridge_nf_call, "rendered_lines": res.rendered_lines,
                "kernel_mem_bytes": res.kernel_mem_bytes}
        if res.notes:
            info["notes"] = list(res.notes)
        if rs.layout == "kube-proxy":
            info["target"] = rs.target  # the test service (None at 0 services: the server itself)
        return info

    def _links(self, bed: Testbed) -> dict:
        return {f"{role}:{dev}": bed.link_counters(role, dev) for role, dev in bed.interfaces()}

    def _trial(self, bed: Testbed, env: TrialEnv, spec: TrialSpec, load_info: dict, cond: dict) -> None:
        runner = get_runner(spec.tool)
        backend, ctx = env.backend, env.dut
        tspec = TrafficSpec(traffic=spec.traffic, tool=spec.tool, size_bytes=spec.size_bytes,
                            streams=spec.streams, rate_bps=spec.rate_bps, ip_version=spec.ip_version,
                            duration_s=spec.duration_s, options=dict(spec.options),
                            target=load_info.get("target"))
        if spec.layout == "kube-proxy" and ctx is not None:
            # NAT rules see only a flow's first packet: every trial starts without flows, so its
            # packets (distinct source ports, option new_flows) all walk the Service rules
            ctx.host.run(["conntrack", "-F"], ns=ctx.ns)
        started = utc_now()
        cb = backend.counters(ctx) if ctx else None
        lb = self._links(bed)
        shaped_before = bed.link_state()
        metrics, series, raw, flags, error = None, [], {}, [], None
        kind, extra = "stream", {}
        flood = FloodSpec.from_dict(spec.background) if spec.background else None
        sampler = LinkSampler(bed).start()
        cpu_sampler = CpuSampler(bed, interval_s=sampler.interval_s).start()
        try:
            m, flood_rec = run_with_background(bed, env, flood, spec.ip_version, spec.duration_s,
                                               lambda: runner.measure(bed, tspec, env))
            metrics, series, raw, flags = m.metrics, m.series, m.raw, list(m.flags)
            kind, extra = m.kind, dict(m.extra)
        except RunnerError as exc:
            error = exc.one_line()
            flood_rec = getattr(exc, "flood_record", None)
        link_series = sampler.stop()
        extra["link_series"] = link_series
        extra["cpu_series"] = cpu_sampler.stop()
        if metrics and not series:
            series = as_stream_series(link_series)
        if flood is not None:
            kind = "attack" if kind == "stream" else kind
            extra["background"] = flood_rec
        la = self._links(bed)
        ca = backend.counters(ctx) if ctx else None
        if shaped_before is not None:
            extra["link_shapers"] = _shaper_deltas(shaped_before, bed.link_state())
            for f in flag_link_limited(extra["link_shapers"], bed.topo.link_rate_bps):
                flags.append(f.to_dict())
        if metrics:
            for f in flag_cpu_saturated(metrics.get("cpu_sender_pct") or 0, who="sender CPU"):
                d = f.to_dict()
                d["message"] += (" — on veth the DUT's forwarding runs in the sender's softirq, "
                                 "so this rate is the generator and the firewall path together")
                flags.append(d)
        rec = build_trial(
            spec.to_dict(), kind=kind, metrics=metrics, series=series, started_utc=started, ruleset=load_info,
            dut_counters_before=cb, dut_counters_after=ca, links_before=lb, links_after=la,
            conditions={**cond, "bridge_nf_call": load_info.get("bridge_nf_call"),
                        "tool_version": cond["tool_versions"][spec.tool]},
            raw=raw, flags=flags, error=error,
            extra={"rendered_lines": load_info.get("rendered_lines"),
                   "rule_kernel_mem_bytes": load_info.get("kernel_mem_bytes"),
                   **({"ruleset_notes": load_info["notes"]} if load_info.get("notes") else {}), **extra})
        self.record.append_trial(rec)
        if self.on_trial:
            self.on_trial(rec.to_json())
        self.progress.trial_done(spec, _fmt_result(metrics, error))
        time.sleep(self.suite.settle_s)


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


def dut_system(placement: Placement | None) -> str | None:
    """The remote DUT host's ``uname -s`` (None: the DUT is on this machine)."""
    host = placement.hosts.get("dut") if placement is not None else None
    return host.system() if host is not None else None


def _remote_hosts_info(placement: Placement) -> dict:
    return {"entries": {r: e.model_dump(exclude_defaults=True) for r, e in placement.entries.items()},
            "clock_offsets": {r: c.to_dict() for r, c in placement.clocks.items()},
            "command_overhead_s": dict(placement.overheads_s),
            "metadata": {r: remote_host_metadata(h) for r, h in placement.hosts.items()}}


def start_run(suite: Suite, suite_text: str, out_root: Path, *, quiet: bool = False,
              hosts: dict[str, HostEntry] | None = None,
              order: Callable[[list[TrialSpec]], list[TrialSpec]] | None = None) -> RunRecord:
    """Run ``suite``; ``hosts`` (from ``--hosts FILE``) places roles on remote hosts; ``order``
    may reorder the planned trials (the same trials; e.g. ``fwlab bench search``'s ABBA order)."""
    placement = _placement(suite, hosts)
    if placement is None:
        preflight(suite)
    with placement or _Nothing():
        if placement is not None:
            preflight(suite, placement)
        plan = expand(suite, dut_system(placement))
        if order is not None:
            plan = _reordered(plan, order)
        rec = RunRecord.create(out_root, suite.name, {
            "suite": {"name": suite.name, "toml": suite_text, "parsed": suite.model_dump()},
            "plan": {"trials": len(plan.trials), "trial_ids": [t.trial_id for t in plan.trials],
                     "skipped": list(plan.skipped)},
            "host": host_metadata(),
            **({"remote_hosts": _remote_hosts_info(placement)} if placement else {}),
        })
        _execute(suite, plan, rec, quiet, placement)
    return rec


def resume_run(path: Path, *, quiet: bool = False) -> RunRecord:
    rec = RunRecord.open(path)
    suite = parse_suite(rec.run["suite"]["parsed"], f"from {path}")
    stored = (rec.run.get("remote_hosts") or {}).get("entries")
    placement = _placement(suite, parse_hosts({"hosts": stored}, f"stored in {path}") if stored else None)
    with placement or _Nothing():
        preflight(suite, placement)
        plan = expand(suite, dut_system(placement))
        rec.repair_torn_tail()
        if not isinstance(rec.run.get("plan"), dict):
            rec.run["plan"] = {"trials": len(plan.trials), "skipped": list(plan.skipped)}
        rec.run["plan"].setdefault("trial_ids", [t.trial_id for t in plan.trials])  # a 1.0 record has none
        rec.note_resume()
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


def _execute(suite: Suite, plan, rec: RunRecord, quiet: bool, placement: Placement | None = None) -> None:
    done = rec.finished_ids()
    known = {t.trial_id for t in plan.trials}
    if done - known:
        raise RecordError(f"{rec.path} holds trials this suite does not plan", fix="resume with the fwlab that wrote it")
    progress = Progress(total=len(plan.trials), already=len(done & known), quiet=quiet)
    if progress.already:
        progress.note(f"resuming: {progress.already} of {progress.total} trials already done")
    ex = Executor(suite, rec, progress, placement=placement)
    try:
        ex.run(list(plan.trials), done)
    except KeyboardInterrupt:
        rec.set_status("interrupted")
        raise Interrupted(f"run interrupted; {len(rec.finished_ids())} finished trials kept in {rec.path}",
                          fix=f"fwlab run --resume {rec.path}") from None
    except BaseException:
        rec.set_status("failed")
        raise
    rec.set_status("complete")


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
