"""The transcribed tables of a published study: loading and validating ``data/<study>.toml``.

A value is a number as printed, or the string "n/a" where the study prints none. Every table
names the study's own reference (``ref``, e.g. "Table 1 (...)") and its unit.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from fwlab.errors import FwlabError

MISSING = "n/a"


def data_dir() -> Path:
    return Path(str(resources.files("fwlab.published") / "data"))


@dataclass(frozen=True)
class PublishedTable:
    """One table (or a group of numbers from the text) as the study printed it."""

    id: str
    ref: str
    """The study's own reference, e.g. 'Table 1 (Uni-directional Throughput for the Number of Rules)'."""
    quantity: str
    unit: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, tuple[float | None, ...]], ...]
    """(row label, values); None where the study prints none."""
    row_name: str = ""
    summary: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def row(self, label: str) -> tuple[float | None, ...]:
        for name, values in self.rows:
            if name == label:
                return values
        raise KeyError(f"{self.id} has no row {label!r}")

    def value(self, label: str, column: str) -> float | None:
        values = self.row(label)
        i = self.columns.index(column)
        return values[i] if i < len(values) else None


@dataclass(frozen=True)
class Study:
    study: str
    title: str
    citation: str
    source: str
    setup: str
    tables: dict[str, PublishedTable]
    notes: tuple[str, ...] = ()

    def table(self, table_id: str) -> PublishedTable:
        try:
            return self.tables[table_id]
        except KeyError:
            raise FwlabError(f"study {self.study} has no table {table_id!r}",
                             fix=f"use one of {', '.join(self.tables)}") from None


def study_names() -> list[str]:
    return sorted(p.stem for p in data_dir().glob("*.toml"))


def _value(v, where: str) -> float | None:
    if v == MISSING:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise FwlabError(f"{where}: value {v!r} is neither a number nor \"{MISSING}\"",
                         fix="correct the transcription")
    return float(v)


def load_study(name: str) -> Study:
    path = data_dir() / f"{name}.toml"
    if not path.exists():
        raise FwlabError(f"no published data for study '{name}'",
                         fix=f"use one of {', '.join(study_names())}")
    try:
        doc = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise FwlabError(f"{path.name} is not valid TOML: {exc}", fix="correct the transcription") from None
    tables = {}
    for t in doc.get("tables", []):
        for k in ("id", "ref", "quantity", "unit", "columns", "rows"):
            if k not in t or t[k] in ("", []):
                raise FwlabError(f"{path.name}: a table lacks '{k}'", fix="add it to the transcription")
        rows = []
        for r in t["rows"]:
            vals = tuple(_value(v, f"{path.name} {t['id']} {r.get('label')}") for v in r["values"])
            if len(vals) > len(t["columns"]):
                raise FwlabError(f"{path.name} {t['id']} row {r['label']!r} has more values than columns",
                                 fix="correct the transcription")
            rows.append((str(r["label"]), vals))
        tables[t["id"]] = PublishedTable(
            id=t["id"], ref=t["ref"], quantity=t["quantity"], unit=t["unit"],
            columns=tuple(str(c) for c in t["columns"]), rows=tuple(rows), row_name=t.get("row_name", ""),
            summary=dict(t.get("summary", {})), notes=tuple(t.get("notes", ())))
    return Study(study=doc["study"], title=doc["title"], citation=doc["citation"], source=doc["source"],
                 setup=doc.get("setup", ""), tables=tables, notes=tuple(doc.get("notes", ())))
