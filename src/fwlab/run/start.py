"""Where every run starts and a suite's run resumes: the one entry point of the run pipeline.

:func:`start` takes either a suite (planned whole, then executed bed by bed) or a staged job
(:class:`fwlab.run.stages.StagedJob`: ``fwlab run --ruleset``, ``fwlab optimize``; stages planned
from the results of the ones before, on one bed, :func:`fwlab.run.staged.run_staged`).

Owns: a run from a suite to a finished record — where the roles live (the suite's [hosts] and a
hosts file), the checks before anything is built (:mod:`fwlab.run.preflight`), the plan
(:mod:`fwlab.run.plan`), the record's head (:mod:`fwlab.run.header`), the execution to the
run's end (:func:`fwlab.run.executor.execute`: the precision reached, the run's status); and resuming a record
(its stored hosts, or a hosts file that keeps the run's identity). ``fwlab run``, ``fwlab
baseline`` and the benches go through :func:`start` and :func:`resume`.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Callable, TextIO

from fwlab.errors import HostError, RecordError
from fwlab.results import RunRecord
from fwlab.results.metadata import remote_host_metadata
from fwlab.run.executor import execute
from fwlab.run.header import new_record, plan_header, suite_header
from fwlab.run.plan import TrialSpec
from fwlab.run.preflight import check_flood_placement, checked_plan
from fwlab.run.progress import Progress
from fwlab.run.staged import run_staged
from fwlab.run.stages import StagedJob
from fwlab.suites import Suite, parse_suite
from fwlab.testbed.hosts import HostEntry, Placement, changed_fields, identity_difference, parse_hosts


def _placement(suite: Suite, hosts: dict[str, HostEntry] | None) -> Placement | None:
    """The suite's [hosts] with a hosts file's entries on top (None when every role is local)."""
    entries = {**parse_hosts({"hosts": suite.hosts}, "in the suite"), **(hosts or {})}
    if not any(e.remote for e in entries.values()):
        return None
    return Placement(entries)


def _remote_hosts_info(placement: Placement) -> dict:
    return {"entries": {r: e.model_dump(exclude_defaults=True) for r, e in placement.entries.items()},
            "clock_offsets": {r: c.to_dict() for r, c in placement.clocks.items()},
            "clock_sync": dict(placement.sync),
            "clock_warning": placement.latency_clock_warning(),
            "command_overhead_s": dict(placement.overheads_s),
            "metadata": {r: remote_host_metadata(h) for r, h in placement.hosts.items()}}


def start(job: Suite | StagedJob, suite_text: str | None = None, out_root: Path | None = None, *,
          quiet: bool = False, hosts: dict[str, HostEntry] | None = None,
          order: Callable[[list[TrialSpec]], list[TrialSpec]] | None = None,
          prepare: Callable[[], None] | None = None, log: TextIO | None = None) -> RunRecord | None:
    """Run ``job``: a suite (``start(suite, suite_text, out_root)``) or a staged job
    (``start(job, out_root=out_root, log=...)``, its progress lines to ``log``; None when it
    recorded nothing: ``out_root`` may then be None). For a suite, ``hosts`` (from ``--hosts FILE``) places roles on remote
    hosts; ``order`` may reorder the planned trials (the same trials; e.g. ``fwlab bench
    search``'s ABBA order); ``prepare`` is work for after the run done beside the first bed's
    set-up, never beside traffic (:attr:`Executor.prepare`; e.g. :func:`fwlab.report.prepare`)."""
    if not isinstance(job, Suite):
        return run_staged(job, None if out_root is None else Path(out_root), log=log)
    suite = job
    if suite_text is None or out_root is None:
        raise TypeError("start(suite, suite_text, out_root) needs the suite's text and a results directory")
    placement = _placement(suite, hosts)
    check_flood_placement(suite, placement)  # before any host is connected
    with placement or nullcontext():
        plan = checked_plan(suite, placement)
        if order is not None:
            plan = plan.reordered(order)
        rec = new_record(out_root, suite_header(suite, suite_text), plan_header(plan),
                         remote_hosts=_remote_hosts_info(placement) if placement else None)
        execute(suite, plan, rec, quiet, placement, prepare=prepare)
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


def resume(path: Path, *, quiet: bool = False, hosts: dict[str, HostEntry] | None = None,
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
    with placement or nullcontext():
        plan = checked_plan(suite, placement)
        known = plan.trial_ids_max
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
        execute(suite, plan, rec, quiet, placement)
    return rec
