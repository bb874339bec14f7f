"""A failed trial keeps its runner's kind (the orchestrator records ``runner.record_kind``), so
every reader of the record meets failed trials of every kind: metrics null, an error, no
kind-specific extra. Each fits its kind's schema, and the report, the terminal summary, every
study's comparison and every export read a record holding them without a traceback. No root."""

import io
import json
import shutil
import warnings
from pathlib import Path

import jsonschema
import pytest

from record_schema import SCHEMA_DIR
from fwlab.analysis.export import FORMATS, export_run
from fwlab.published.compare import COMPARATORS, _load_builtin, compare_study
from fwlab.report import print_summary, write_report
from fwlab.results.kinds import TRIAL_KINDS
from fwlab.results.schema import kind_schema_file
from fwlab.results.trial import as_records

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def failed_copy(kind: str) -> dict:
    """The recorded example of `kind` as the orchestrator writes it when the runner fails."""
    line = json.loads((GOLDEN / "kinds" / f"{kind}.json").read_text())
    line.update(metrics=None, series=[], raw={}, error=f"the {kind} runner failed (test); this trial's figure is missing",
                extra={"link_series": [], "cpu_series": None}, trial_id=f"{line['trial_id']}-failed")
    return line


@pytest.mark.parametrize("kind", TRIAL_KINDS)
def test_a_failed_trial_fits_its_kinds_schema(kind):
    schema = json.loads((SCHEMA_DIR / kind_schema_file(kind)).read_text())
    errors = [f"{e.json_path}: {e.message}" for e in jsonschema.Draft202012Validator(schema).iter_errors(failed_copy(kind))]
    assert not errors, errors


@pytest.fixture()
def run_with_failures(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(GOLDEN / "run-tiny", run)
    with (run / "trials.jsonl").open("a") as f:
        for kind in TRIAL_KINDS:
            f.write(json.dumps(failed_copy(kind)) + "\n")
    return run


def test_report_summary_and_exports_read_failed_trials_of_every_kind(run_with_failures, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. matplotlib's legend of an empty plot
        html = write_report(run_with_failures).read_text()
    assert "runner failed (test)" in html  # the failures are shown, with their reasons
    # a figure no trial measured is said to be missing, not drawn as empty axes
    assert "no value measured (every trial failed" in html
    assert "no transaction figure measured (every trial failed)" in html
    out = io.StringIO()
    print_summary(run_with_failures, out)
    assert out.getvalue()
    for fmt in FORMATS:
        export_run(run_with_failures, fmt, tmp_path / f"export-{fmt}")


def test_every_study_reads_failed_trials_of_every_kind(run_with_failures):
    _load_builtin()
    run = json.loads((run_with_failures / "run.json").read_text())
    trials = as_records([json.loads(x) for x in (run_with_failures / "trials.jsonl").read_text().splitlines()])
    for study in COMPARATORS.names():
        assert compare_study(run, trials, study) is not None
