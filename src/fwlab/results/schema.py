"""The record's published JSON Schema, generated from the models (``RunInfo``, ``TrialRecord``).

Owns: the schema documents committed under docs/schema/ (``run.schema.json`` for run.json,
``trial.schema.json`` for one line of trials.jsonl of any kind, ``trial-<kind>.schema.json`` for
a line of one kind: ``kind`` fixed and ``metrics`` that kind's model from
``fwlab.results.metrics``) and the metric tables of docs/record-format.md (between the
``<!-- metrics:begin -->`` / ``<!-- metrics:end -->`` markers).
Regenerate after changing a model: ``python -m fwlab.results.schema docs/schema`` (also rewrites
the tables in docs/record-format.md); a unit test fails while the committed files differ.
"""

from __future__ import annotations

import json
import sys
import types
import typing
from pathlib import Path

from fwlab.results.kinds import TrialKind
from fwlab.results.metrics import KIND_METRICS
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


def kind_schema_file(kind: str | TrialKind) -> str:
    return f"trial-{TrialKind(kind).value}.schema.json"


def trial_kind_schema(kind: str | TrialKind) -> dict:
    """One kind's trial line: ``kind`` fixed, ``metrics`` that kind's model (or null: failed)."""
    kind = TrialKind(kind)
    model = KIND_METRICS[kind]
    s = trial_schema()
    s["$id"] = f"fwlab-record-{RECORD_VERSION}/{kind_schema_file(kind).removesuffix('.schema.json')}.json"
    s["title"] = f"TrialRecord ({kind.value})"
    props = s["properties"]
    props["kind"] = {"const": kind.value, "description": props["kind"].get("description", "")}
    ms = model.model_json_schema(ref_template="#/$defs/{model}")
    s.setdefault("$defs", {}).update(ms.pop("$defs", {}))
    s["$defs"][model.__name__] = ms
    props["metrics"] = {"anyOf": [{"$ref": f"#/$defs/{model.__name__}"}, {"type": "null"}],
                        "description": props["metrics"].get("description", "")}
    return s


def schema_texts() -> dict[str, str]:
    """File name -> the text committed under docs/schema/."""
    docs = [(RUN_SCHEMA_FILE, run_schema()), (TRIAL_SCHEMA_FILE, trial_schema())]
    docs += [(kind_schema_file(k), trial_kind_schema(k)) for k in TrialKind]
    return {name: json.dumps(doc, indent=2, sort_keys=True) + "\n" for name, doc in docs}


METRICS_BEGIN, METRICS_END = "<!-- metrics:begin -->", "<!-- metrics:end -->"


_JSON_TYPES = {float: "number", int: "integer", str: "string", bool: "boolean", type(None): "null"}


def _json_type(annotation) -> str:
    """``float | None`` -> ``number / null`` (dicts: ``object``)."""
    args = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) \
        else (annotation,)
    return " / ".join(_JSON_TYPES.get(a, "object") for a in args)


def metrics_tables() -> str:
    """The per-kind metric tables of docs/record-format.md (generated from the models)."""
    out = []
    for kind in TrialKind:
        model = KIND_METRICS[kind]
        out.append(f"\n#### `{kind.value}` metrics\n\n{(model.__doc__ or '').strip()} "
                   f"Schema: `docs/schema/{kind_schema_file(kind)}`.\n")
        out.append("| metric | type | required | meaning |\n|---|---|---|---|")
        for name, f in model.model_fields.items():
            out.append(f"| `{name}` | {_json_type(f.annotation)} | {'yes' if f.is_required() else ''} | "
                       f"{f.description or ''} |")
    return "\n".join(out) + "\n"


def with_metrics_tables(doc_text: str) -> str:
    """``doc_text`` with the generated tables between the markers (refused without markers)."""
    a, b = doc_text.find(METRICS_BEGIN), doc_text.find(METRICS_END)
    if a < 0 or b < a:
        raise ValueError(f"record-format.md lacks the {METRICS_BEGIN} / {METRICS_END} markers")
    return doc_text[: a + len(METRICS_BEGIN)] + "\n" + metrics_tables() + doc_text[b:]


def write_schemas(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in schema_texts().items():
        (out_dir / name).write_text(text)
        paths.append(out_dir / name)
    doc = out_dir.parent / "record-format.md"
    if doc.exists():
        doc.write_text(with_metrics_tables(doc.read_text()))
        paths.append(doc)
    return paths


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    for p in write_schemas(Path(args[0] if args else "docs/schema")):
        print(p)


if __name__ == "__main__":
    main()
