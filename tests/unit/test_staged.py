"""The run pipeline's staged jobs (fwlab.run.staged): one bed, one record, stages planned from the
results of the ones before, trials dispatched to registered methods, the status and the clean-up
on every exit path. The bed is a stand-in (no namespaces): what is tested is the order of work."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from fwlab.errors import FwlabError
from fwlab.run import staged as staged_mod
from fwlab.run.header import derived_suite
from fwlab.run.stages import STAGE_METHODS, JobHead, Stage, StagedJob, StageTrial, stage_method
from fwlab.run.start import start


class FakeBed:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("bed up")
        return self

    def __exit__(self, *exc):
        self.log.append("bed down")
        return False

    def describe(self):
        return {"mode": "routed", "nics": []}


@pytest.fixture
def bed_log(monkeypatch):
    log: list[str] = []
    monkeypatch.setattr(staged_mod, "open_bed", lambda mode: FakeBed(log))
    return log


@pytest.fixture
def methods():
    @stage_method("test-double")
    def double(run, trial):
        run.state.append(("double", trial.args["x"], run.condition))
        return 2 * trial.args["x"]

    @stage_method("test-fail")
    def fail(run, trial):
        raise FwlabError("the method failed", fix="none")

    yield
    del STAGE_METHODS["test-double"]
    del STAGE_METHODS["test-fail"]


@dataclass
class Job:
    log: list
    fail: bool = False
    record_nothing: bool = False
    mode: str = "routed"
    seen: list = field(default_factory=list)

    def setup(self, bed, note):
        self.log.append("setup")
        note("set up")
        if self.record_nothing:
            return None
        return JobHead(suite=derived_suite("staged-x", repetitions=1, ip_versions=[4], description="d"),
                       bed={"backend": "imported"}, state=self.seen, run={"mine": {"k": 1}}, condition="a")

    def stages(self, run):
        first = yield Stage("one", (StageTrial("test-double", "a", {"x": 1}), StageTrial("test-double", "b", {"x": 2})),
                            done_note="one done")
        run.record.run["mine"]["first"] = first
        # the next stage is planned from the first's results
        second = yield Stage("two", tuple(StageTrial("test-double", "b", {"x": x}) for x in first), fresh=True)
        run.record.run["mine"]["second"] = second
        if self.fail:
            yield Stage("three", (StageTrial("test-fail"),))

    def set_condition(self, run, condition):
        self.log.append(f"condition {condition}")

    def cleanup(self, run):
        self.log.append("cleanup")


def test_a_staged_job_runs_its_stages_on_one_bed_into_one_record(tmp_path, bed_log, methods):
    notes = []

    class Log:
        def write(self, s):
            notes.append(s)

        def flush(self):
            pass

    job = Job(bed_log)
    assert isinstance(job, StagedJob)
    rec = start(job, out_root=tmp_path, log=Log())
    run = json.loads((rec.path / "run.json").read_text())
    assert run["status"] == "complete" and run["suite"]["name"] == "staged-x"
    assert run["beds"] == [{"mode": "routed", "nics": [], "backend": "imported"}]
    assert run["mine"] == {"k": 1, "first": [2, 4], "second": [4, 8]}
    # the condition is set when a trial needs another one, and at a fresh stage's start
    assert bed_log == ["bed up", "setup", "condition b", "condition b", "cleanup", "bed down"]
    assert job.seen == [("double", 1, "a"), ("double", 2, "b"), ("double", 2, "b"), ("double", 4, "b")]
    assert notes == ["set up\n", "one done\n"]


def test_a_failing_stage_leaves_a_failed_record_and_cleans_up(tmp_path, bed_log, methods):
    with pytest.raises(FwlabError, match="the method failed"):
        start(Job(bed_log, fail=True), out_root=tmp_path)
    (d,) = list(tmp_path.iterdir())
    run = json.loads((d / "run.json").read_text())
    assert run["status"] == "failed" and run["mine"]["second"] == [4, 8]
    assert bed_log[-2:] == ["cleanup", "bed down"]
    from fwlab.results import RunRecord
    assert RunRecord.open(d).run["status"] == "failed"  # a status the record reader takes (not "damaged")


def test_a_job_with_nothing_to_record_writes_no_record(tmp_path, bed_log, methods):
    assert start(Job(bed_log, record_nothing=True), out_root=tmp_path / "out") is None
    assert not (tmp_path / "out").exists()
    assert bed_log == ["bed up", "setup", "bed down"]


def test_an_unknown_method_is_one_line_naming_the_known_ones(tmp_path, bed_log, methods):
    class Bad(Job):
        def stages(self, run):
            yield Stage("x", (StageTrial("no-such-method"),))

    with pytest.raises(FwlabError) as e:
        start(Bad(bed_log), out_root=tmp_path)
    assert "unknown stage method 'no-such-method'" in e.value.one_line() and "test-double" in e.value.one_line()


def test_the_rule_set_runs_name_registered_methods_and_build_no_bed_of_their_own():
    """run --ruleset and optimize are staged jobs: their trials' methods are in the one registry, and
    no module of ruleset/ opens a bed, makes a record or sets its status itself."""
    from pathlib import Path

    import fwlab.ruleset.methods  # noqa: F401  (registers the rule-set methods)
    from fwlab.ruleset.optimize import OptimizeRun
    from fwlab.ruleset.run import DryRun, RulesetRun

    assert {"probe-check", "probe-observe", "class-rate", "class-cost", "class-latency"} <= set(STAGE_METHODS)
    for job in (RulesetRun, OptimizeRun, DryRun):
        assert all(callable(getattr(job, m)) for m in ("setup", "stages", "set_condition", "cleanup"))
    src = Path(fwlab.ruleset.methods.__file__).parent
    for f in sorted(src.glob("*.py")):
        text = f.read_text()
        for own in ("open_bed(", "Testbed(", "new_record(", "set_status("):
            assert own not in text, f"{f.name} calls {own}"
