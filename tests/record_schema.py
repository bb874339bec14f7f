"""Check a stored run record against the published JSON Schema (docs/schema/, jsonschema).

Unit tests call it on the golden records; netns tests on every record they write."""

import json
from pathlib import Path

import jsonschema

from fwlab.results import RunRecord
from fwlab.results.schema import RUN_SCHEMA_FILE, TRIAL_SCHEMA_FILE

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "docs" / "schema"


def _validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def assert_record_valid(run_dir: Path | str) -> int:
    """Validate run.json (as read, i.e. upgraded) and every line of trials.jsonl as written (not
    through fwlab's reader); return the number of distinct trial ids."""
    rec = RunRecord.open(run_dir)
    run_v, trial_v = _validator(RUN_SCHEMA_FILE), _validator(TRIAL_SCHEMA_FILE)
    errors = [f"run.json: {e.json_path}: {e.message}" for e in run_v.iter_errors(rec.run)]
    ids = set()
    for n, line in enumerate((Path(run_dir) / "trials.jsonl").read_text().splitlines(), 1):
        t = json.loads(line)
        ids.add(t.get("trial_id"))
        errors += [f"line {n}: {e.json_path}: {e.message}" for e in trial_v.iter_errors(t)]
    assert not errors, "record does not match the schema:\n" + "\n".join(errors[:20])
    return len(ids)
