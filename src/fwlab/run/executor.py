"""The order of work of a suite's run: beds one after another, rule sets once per group of
trials, each trial written the moment it ends.

Owns: the order — one bed per mode, firewall backend and link rate (the next backend of the same
mode and link rate reuses it after a reset proven clean, :func:`fwlab.run.beds.hand_on`); on
each bed the runners started once, each rule set loaded once for the trials that share it
(:class:`fwlab.run.load.RuleLoader`), every trial run (:func:`fwlab.run.trial.run_trial`) and
appended to the record at once; adaptive repetitions (the suite's precision) scheduled as they
go; where the time goes (fwlab.results.overhead: per trial, per bed, per run); and work for
after the run (``prepare``, e.g. the report's imports) beside the first bed's set-up, ended
before the first traffic; and a plan run to its end on a record (:func:`execute`: the trials not
yet in it, the precision reached, the run's status, :class:`Interrupted` on SIGINT or SIGTERM).
Never parses tool output (runners do), renders rules (backends do), computes statistics or
decides what a run is: its suite, hosts, checks and plan (:mod:`fwlab.run.start` does).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from itertools import chain, groupby
from typing import Callable, Iterable

from fwlab.dut import DutContext, get_backend
from fwlab.dut.reset import fingerprint
from fwlab.errors import FwlabError, RecordError
import fwlab.methods  # noqa: F401  (registers the test methods beside the tools)
from fwlab.results import RunRecord
from fwlab.results.overhead import Phases
from fwlab.run.beds import KeptBed, bed_conditions, describe, hand_on, open_bed, topology
from fwlab.run.load import LoadedRuleset, RuleLoader
from fwlab.run.plan import Plan, TrialSpec
from fwlab.run.progress import Progress, fmt_result
from fwlab.run.trial import Pacing, run_trial
from fwlab.runners import TrialEnv, get_runner
from fwlab.stats.precision import PrecisionRule, adaptive_order, figure_id, outcome
from fwlab.suites import Suite
from fwlab.testbed import Testbed
from fwlab.testbed.hosts import Placement
from fwlab.testbed.nic import NicInfo, PathLine


@dataclass
class Executor:
    suite: Suite
    record: RunRecord
    progress: Progress
    on_trial: Callable[[dict], None] | None = None
    placement: Placement | None = None  #: roles on remote hosts (None: all local)
    rule: PrecisionRule | None = None  #: adaptive repetitions (the suite's precision), else fixed
    run_phases: Phases = field(default_factory=Phases)  #: the run's own bookkeeping time
    loader: RuleLoader | None = None  #: each trial's rule set (default: one for ``suite``)
    pacing: Pacing = field(default_factory=Pacing)  #: the pause between a bed's trials
    #: work for after the run (e.g. importing the report's plotting library) done on a thread
    #: while the first bed is built and its first rule set loaded; it never overlaps traffic:
    #: the first trial waits for it (run overhead ``prepare_wait``)
    prepare: Callable[[], None] | None = None
    _preparing: threading.Thread | None = None

    def __post_init__(self) -> None:
        if self.loader is None:
            self.loader = RuleLoader(self.suite)

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
        kept: KeptBed | None = None
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

    def _run_bed(self, bed_key: tuple, trials: list[TrialSpec], kept: KeptBed | None = None,
                 next_key: tuple | None = None, order: Iterable[TrialSpec] | None = None) -> KeptBed | None:
        """Run ``order`` (default ``trials``; ``trials`` tell the runners what the bed holds) on
        ``kept`` (a bed reset clean after the previous backend) or on a new bed. Return this bed
        for ``next_key`` when that is the same mode and link rate and the reset after this backend
        is proven clean; otherwise tear it down and return None."""
        mode, backend_name, link_rate_bps = bed_key
        backend = get_backend(backend_name)
        ph = Phases()
        self.pacing.new_bed()
        # the delay (link_delay) is one for the whole suite, so a bed of the same mode and link rate
        # is the same bed, delay lines included
        reuse_next = (next_key is not None and next_key[0] == mode and next_key[2] == link_rate_bps
                      and self.placement is None)
        if kept is not None:
            bed, pristine = kept.bed, kept.pristine
        else:
            bed = open_bed(topology(self.suite, mode, link_rate_bps, self.placement), placement=self.placement)
            pristine = None
            with ph.timed("build"):
                bed.build()
        runners = {get_runner(t.tool) for t in trials}
        handed_on: KeptBed | None = None
        desc: dict | None = None
        try:
            desc = describe(bed, kept, backend, ph)
            self.record.run.setdefault("beds", []).append(desc)
            self.record.save_run()
            self.progress.note(f"test bed {bed.topo.run_id}: {mode}, backend {backend_name} "
                               + (f"(reused: reset clean after {kept.reset['after_backend']})" if kept is not None
                                  else f"(built in {bed.build_s:.2f} s)"))
            line = bed.path_line([NicInfo(**n) for n in desc["nics"]])
            cond = bed_conditions(bed, desc, runners, self.placement)
            ctx = DutContext(bed.host_for("dut"), bed.ns("dut"), mode) if bed.topo.has_dut else None
            if reuse_next and ctx is not None and pristine is None:
                with ph.timed("reset"):
                    pristine = fingerprint(bed, ctx)  # the new bed, to compare the reset with
            env = TrialEnv(backend=backend if ctx else None, dut=ctx, note=self.progress.note,
                           step=self.progress.step)
            with ph.timed("runners_start"):
                for r in sorted(runners, key=lambda r: r.name):
                    info = r.bed_started(bed, env, [t for t in trials if t.tool == r.name])
                    if info is not None:
                        env.bed_info[r.name] = info
                        desc.setdefault("runner_info", {})[r.name] = info
                        self.record.save_run()
            loaded_key = None
            loaded = LoadedRuleset()
            try:
                for spec in (trials if order is None else order):
                    if spec.config_key != loaded_key:
                        loaded = self.loader.load(bed.topo, ctx, backend, spec, ph)
                        self.pacing.rule_set_loaded(loaded, self.suite.settle_s)
                        loaded_key = spec.config_key
                    self._trial(bed, env, spec, loaded, cond, line)
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
                handed_on = hand_on(bed, ctx, backend, pristine, desc, ph, self.progress.note)
        finally:
            if handed_on is None:
                with ph.timed("teardown"):
                    bed.teardown()
            if desc is not None:
                desc["overhead_s"] = ph.to_dict()
                self.record.save_run()
        return handed_on

    def _trial(self, bed: Testbed, env: TrialEnv, spec: TrialSpec, loaded: LoadedRuleset, cond: dict,
               line: PathLine | None = None) -> None:
        """Run one trial (nothing of ``prepare`` beside its traffic) and write it at once."""
        self._finish_prepare()
        self.progress.trial_started(spec)
        outcome = run_trial(bed, env, spec, loaded, cond, line, self.suite, self.pacing)
        t_rec = time.monotonic()
        rec = outcome.record()
        self.record.append_trial(rec)
        if self.on_trial:
            self.on_trial(rec.to_json())
        self.progress.trial_done(spec, fmt_result(outcome.metrics, outcome.error))
        self.run_phases.add("record", time.monotonic() - t_rec)


class Interrupted(FwlabError):
    """The run was stopped by SIGINT or SIGTERM; finished trials are on disk."""


def execute(suite: Suite, plan: Plan, rec: RunRecord, quiet: bool, placement: Placement | None = None,
            prepare: Callable[[], None] | None = None) -> None:
    """Run ``plan``'s trials not yet in ``rec`` (:class:`~fwlab.run.executor.Executor`), then
    record the precision reached and the run's status."""
    done = rec.finished_ids()
    rule = PrecisionRule.of_suite(suite)
    known = plan.trial_ids_max if plan.trial_ids_max is not None else frozenset(t.trial_id for t in plan.trials)
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
    ex = Executor(suite, rec, progress, placement=placement, rule=rule, prepare=prepare)
    rec.run["lean_trials"] = True  # (records before the old path went may say False)
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
        progress.close()  # the live display ends on every path (a TTY's cursor comes back)
        rec.run["overhead_s"] = ex.run_phases.to_dict()  # record writing
    p = _record_precision(rec, rule, plan)
    if p is not None:
        at_max = sum(1 for f in p["figures"] if f["status"] == "max-reached")
        progress.note(f"precision: {p['met']} of {p['total']} figures within ±{100 * p['precision']:g} %"
                      + (f"; {at_max} hit the maximum of {p['max_repetitions']} without it" if at_max else ""))
    rec.set_status("complete")


def _record_precision(rec: RunRecord, rule: PrecisionRule | None, plan: Plan) -> dict | None:
    """run.json's ``precision``: per figure the repetitions it took and the interval reached."""
    if rule is None:
        return None
    rec.run["precision"] = outcome(rec.trials(), rule, [figure_id(t.to_dict()) for t in plan.trials]
                                   ).model_dump(mode="json")
    return rec.run["precision"]
