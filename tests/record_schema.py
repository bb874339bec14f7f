"""Check a stored run record against the published JSON Schema (docs/schema/, jsonschema).

Unit tests call it on the golden records; netns tests on every record they write."""

import json
from pathlib import Path

import jsonschema

from fwlab.results import RunRecord
from fwlab.results.kinds import TRIAL_KINDS
from fwlab.results.schema import RUN_SCHEMA_FILE, TRIAL_SCHEMA_FILE, kind_schema_file

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "docs" / "schema"


def _validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def kinds_of(run_dir: Path | str) -> set[str]:
    """The kinds of the trial lines of a record (as written)."""
    lines = (Path(run_dir) / "trials.jsonl").read_text().splitlines()
    return {json.loads(line).get("kind") for line in lines if line.strip()}


def assert_record_valid(run_dir: Path | str) -> int:
    """Validate run.json (as read, i.e. upgraded) and every line of trials.jsonl as written (not
    through fwlab's reader) against trial.schema.json and its kind's trial-<kind>.schema.json;
    return the number of distinct trial ids."""
    rec = RunRecord.open(run_dir)
    run_v, trial_v = _validator(RUN_SCHEMA_FILE), _validator(TRIAL_SCHEMA_FILE)
    kind_v = {k: _validator(kind_schema_file(k)) for k in TRIAL_KINDS}
    errors = [f"run.json: {e.json_path}: {e.message}" for e in run_v.iter_errors(rec.run)]
    ids = set()
    for n, line in enumerate((Path(run_dir) / "trials.jsonl").read_text().splitlines(), 1):
        t = json.loads(line)
        ids.add(t.get("trial_id"))
        errors += [f"line {n}: {e.json_path}: {e.message}" for e in trial_v.iter_errors(t)]
        if t.get("kind") in kind_v:
            errors += [f"line {n} ({t['kind']}): {e.json_path}: {e.message}"
                       for e in kind_v[t["kind"]].iter_errors(t)]
    assert not errors, "record does not match the schema:\n" + "\n".join(errors[:20])
    return len(ids)


def trial_line_errors(run_dir: Path | str) -> tuple[list[str], dict[str, dict]]:
    """Every complete JSON line of a record's trials.jsonl checked against trial.schema.json and
    its kind's schema (lines that are not JSON objects are the reader's business: a torn or
    damaged line is reported by fwlab itself). Returns (errors, first trial line per kind)."""
    trial_v = _validator(TRIAL_SCHEMA_FILE)
    kind_v = {k: _validator(kind_schema_file(k)) for k in TRIAL_KINDS}
    errors: list[str] = []
    examples: dict[str, dict] = {}
    for n, line in enumerate((Path(run_dir) / "trials.jsonl").read_text().splitlines(), 1):
        try:
            t = json.loads(line)
        except ValueError:
            continue
        if not isinstance(t, dict):
            continue
        errors += [f"{run_dir} line {n}: {e.json_path}: {e.message}" for e in trial_v.iter_errors(t)]
        v = kind_v.get(t.get("kind"))
        if v is not None:
            errs = [f"{run_dir} line {n} ({t['kind']}): {e.json_path}: {e.message}" for e in v.iter_errors(t)]
            errors += errs
            if not errs and t.get("metrics"):
                examples.setdefault(t["kind"], t)
    return errors, examples
