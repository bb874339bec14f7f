"""The order of work of a staged job: one bed, one record, stages run as the job plans them.

Owns: a :class:`~fwlab.run.stages.StagedJob` run to its end — its bed opened
(:func:`fwlab.run.beds.open_bed`) and described, the job's set-up on it, the record made from the
job's head (:func:`fwlab.run.header.new_record`, the bed's description with the job's part), each
stage's trials dispatched to their registered methods (:data:`fwlab.run.stages.STAGE_METHODS`)
with the DUT put in each trial's condition first, every stage's results handed back to the job
that plans the next, the record's trial count and its status (complete; interrupted on Ctrl-C or SIGTERM; failed on any
other exit: the statuses a record may hold), the job's clean-up and the bed's teardown on every exit path, and the progress notes
(:func:`fwlab.run.progress.note_writer`). Never decides what a stage holds (the job does) and
never measures (the methods do).
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from fwlab.results import RunRecord
from fwlab.run.beds import open_bed
from fwlab.run.header import new_record
from fwlab.run.progress import note_writer
from fwlab.run.stages import STAGE_METHODS, Stage, StagedJob, StagedRun


def run_stage(run: StagedRun, stage: Stage) -> list:
    """Every trial of ``stage`` through its method, the DUT in the trial's condition; the results in order."""
    out = []
    for i, trial in enumerate(stage.trials):
        method = STAGE_METHODS.get(trial.method)
        if trial.condition is not None and (trial.condition != run.condition or (stage.fresh and i == 0)):
            run.job.set_condition(run, trial.condition)
            run.condition = trial.condition
        out.append(method(run, trial))
    if stage.done_note:
        run.note(stage.done_note)
    return out


def run_staged(job: StagedJob, out_root: Path | None, *, log: TextIO | None = None) -> RunRecord | None:
    """Run ``job`` on a fresh bed of its mode; its record under ``out_root`` (None when the set-up
    found nothing to record). Progress lines go to ``log`` (None: silent)."""
    note = note_writer(log)
    with open_bed(job.mode) as bed:
        desc = bed.describe()
        head = job.setup(bed, note)  # a refusal raises here; `with` removes the bed
        if head is None:
            return None
        run = StagedRun(job, bed, None, head.state, note, head.condition)  # type: ignore[arg-type]
        try:
            if out_root is None:
                raise TypeError("run_staged: a job that records needs out_root")
            run.record = new_record(out_root, head.suite, head.plan, beds=[{**desc, **head.bed}])
            run.record.run.update(head.run)
            run.record.save_run()
            try:
                stages = job.stages(run)
                results = None
                while True:
                    try:
                        stage = stages.send(results)
                    except StopIteration:
                        break
                    results = run_stage(run, stage)
                run.record.run["plan"]["trials"] = len(run.record.trials())
                run.record.set_status("complete")
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM: what finished is in the record
                run.record.set_status("interrupted")
                raise
            except BaseException:
                run.record.set_status("failed")
                raise
        finally:
            job.cleanup(run)
    return run.record
