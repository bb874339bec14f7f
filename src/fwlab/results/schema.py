"""The record's published JSON Schema, generated from the models (``RunInfo``, ``TrialRecord``).

Owns: the schema documents committed under docs/schema/ (``run.schema.json`` for run.json,
``trial.schema.json`` for one line of trials.jsonl) and validating a record against them.
Regenerate after changing a model: ``python -m fwlab.results.schema docs/schema``; a unit test
fails while the committed files differ from the models.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fwlab.results.store import RECORD_VERSION, RunInfo
from fwlab.results.trial import TrialRecord

DRAFT = "https://json-schema.org/draft/2020-12/schema"
RUN_SCHEMA_FILE = "run.schema.json"
TRIAL_SCHEMA_FILE = "trial.schema.json"


def run_schema() -> dict:
    s = RunInfo.model_json_schema()
    return {"$schema": DRAFT, "$id": f"fwlab-record-{RECORD_VERSION}/run.json", **s}


def trial_schema() -> dict:
    s = TrialRecord.json_schema()
    return {"$schema": DRAFT, "$id": f"fwlab-record-{RECORD_VERSION}/trial.json", **s}


def schema_texts() -> dict[str, str]:
    """File name -> the text committed under docs/schema/."""
    return {name: json.dumps(doc, indent=2, sort_keys=True) + "\n"
            for name, doc in ((RUN_SCHEMA_FILE, run_schema()), (TRIAL_SCHEMA_FILE, trial_schema()))}


def write_schemas(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in schema_texts().items():
        (out_dir / name).write_text(text)
        paths.append(out_dir / name)
    return paths


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    for p in write_schemas(Path(args[0] if args else "docs/schema")):
        print(p)


if __name__ == "__main__":
    main()
