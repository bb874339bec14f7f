"""What a staged job is made of: stages of trials that name registered methods, run on one bed.

A suite is planned whole before anything is built (:mod:`fwlab.run.plan`). Some measurements
cannot be: ``fwlab run --ruleset`` learns its traffic classes only from the rule set the kernel
holds, and which classes get cost and rate trials only from their probe checks. Such a
measurement is a :class:`StagedJob`: a bed mode, a set-up on the bed that says what the record's
head holds (:class:`JobHead`), and stages (:class:`Stage`) planned one after another, each from
the results of the ones before. Every trial of a stage (:class:`StageTrial`) names a method
registered in :data:`STAGE_METHODS` (``probe-check``, ``class-rate``, ``class-cost``,
``class-latency``, ...) and the DUT condition it needs (which rule set is loaded).

Owns: these types and the method registry. Never runs anything: :func:`fwlab.run.staged.run_staged`
(through :func:`fwlab.run.start.start`) does.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from fwlab.errors import FwlabError
from fwlab.registry import Registry
from fwlab.results import RunRecord
from fwlab.testbed import Testbed

Note = Callable[[str], None]


@dataclass(frozen=True)
class StageTrial:
    """One trial of a stage: a registered method, the DUT condition it needs, and its inputs."""

    method: str  #: a name in :data:`STAGE_METHODS`
    condition: str | None = None  #: the DUT state it needs (None: whatever is loaded)
    args: Mapping[str, Any] = field(default_factory=dict)  #: the method's inputs (a class, a round, a count, ...)


@dataclass(frozen=True)
class Stage:
    """Trials run in order on the job's bed. Before a trial whose condition is not the DUT's
    current one the job's :meth:`StagedJob.set_condition` is called; with ``fresh`` also before the
    stage's first trial, whatever is loaded (a round that starts from a freshly loaded rule set)."""

    name: str
    trials: tuple[StageTrial, ...]
    fresh: bool = False
    done_note: str | None = None  #: a progress line once the stage has run


@dataclass
class JobHead:
    """What a job's set-up tells the pipeline: the record's head and the job's own state."""

    suite: dict  #: run.json's ``suite`` (:func:`fwlab.run.header.derived_suite`)
    bed: dict  #: what the job adds to the bed's description (backend, its version, interfaces)
    state: Any  #: what the job's methods use (the prepared bed, the engine, routes ...)
    run: dict = field(default_factory=dict)  #: further run.json keys, written right after the head
    condition: str | None = None  #: the DUT condition the set-up leaves loaded
    plan: dict = field(default_factory=lambda: {"trials": 0, "skipped": []})


@dataclass
class StagedRun:
    """A job running on its bed: what its stages and methods see."""

    job: "StagedJob"
    bed: Testbed
    record: RunRecord
    state: Any  #: :attr:`JobHead.state`
    note: Note
    condition: str | None = None  #: the DUT condition now loaded


#: the stages generator: yields a stage, receives its results (one per trial, in order)
Stages = Generator[Stage, list, None]


@runtime_checkable
class StagedJob(Protocol):
    """A measurement planned stage by stage on one bed (``fwlab run --ruleset``, ``fwlab optimize``)."""

    mode: str  #: the bed's mode (a fresh topology of it)

    def setup(self, bed: Testbed, note: Note) -> JobHead | None:
        """Prepare the built bed (load, read back, derive); None: nothing to record (a dry run,
        nothing to measure): the pipeline tears the bed down and returns no record."""

    def stages(self, run: StagedRun) -> Stages:
        """Yield the stages in order; each ``yield`` returns that stage's results. Writes what it
        concludes (summaries) into ``run.record.run``."""

    def set_condition(self, run: StagedRun, condition: str) -> None:
        """Put the DUT in ``condition`` (load a rule set, a reference, or none)."""

    def cleanup(self, run: StagedRun) -> None:
        """Leave the DUT as the set-up found it (every exit path once the set-up succeeded)."""


#: a stage method: one trial on a staged run -> its result (what the job's next stages read)
StageMethod = Callable[[StagedRun, StageTrial], Any]

STAGE_METHODS: Registry[StageMethod] = Registry("stage method", FwlabError)


def stage_method(name: str) -> Callable[[StageMethod], StageMethod]:
    """Register the decorated function as stage method ``name``."""
    def add(fn: StageMethod) -> StageMethod:
        return STAGE_METHODS.add(name, fn)
    return add
