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
    """Validate run.json (as read, i.e. upgraded) and every trial line; return the trial count."""
    rec = RunRecord.open(run_dir)
    run_v, trial_v = _validator(RUN_SCHEMA_FILE), _validator(TRIAL_SCHEMA_FILE)
    errors = [f"run.json: {e.json_path}: {e.message}" for e in run_v.iter_errors(rec.run)]
    trials = rec.trials()
    for t in trials:
        errors += [f"{t.get('trial_id')}: {e.json_path}: {e.message}" for e in trial_v.iter_errors(t)]
    assert not errors, "record does not match the schema:\n" + "\n".join(errors[:20])
    return len(trials)
