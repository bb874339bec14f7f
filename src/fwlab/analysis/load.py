"""Loading a run record for notebooks: `load(run_dir)` and pandas frames of it.

Owns: `Run` (the record's ``run.json`` plus its trials, each a `Trial`: the stored dict behind a
small read-only class with the identity fields as attributes), the tidy per-trial table
(`Run.to_dataframe`: one row per trial, identity columns first in `IDENTITY_FIELDS` order, then
``metrics.<name>`` columns, ``flags``, ``error``) and the long-format series table
(`series_rows` / `Run.series_dataframe`: trial id, t_s, field, value; the trial's own series,
 its link counters as ``link.*`` and its CPU use as ``cpu.*``) and the computed summary
(`Run.summary` / `Run.summary_dataframe`: summary.csv's rows, from ``fwlab.stats.run_summary``).
pandas is optional (the ``[analysis]`` extra); everything but the ``*dataframe`` methods works
without it. ``fwlab.load`` at the package root is this module's `load`. Reads
records only through `RunRecord`. Never touches statistics, plots, the test bed or traffic.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fwlab.errors import FwlabError
from fwlab.results.curves import curves
from fwlab.results.identity import IDENTITY_FIELDS as TRIAL_IDENTITY_FIELDS
from fwlab.results.record import RunRecord
from fwlab.results.trial import TrialRecord, as_records
from fwlab.stats.run_summary import SUMMARY_COLUMNS, point_summaries

__all__ = ["IDENTITY_FIELDS", "SERIES_COLUMNS", "Run", "Trial", "load", "series_rows", "trial_row"]

#: identity and per-trial scalar fields, in CSV column order (docs/record-format.md)
IDENTITY_FIELDS = (("kind", "trial_id") + tuple(f for f in TRIAL_IDENTITY_FIELDS if f not in ("options", "background"))
                   + ("started_utc", "ended_utc", "ruleset_digest", "ruleset_family", "rule_load_s"))
SERIES_COLUMNS = ("trial_id", "t_s", "field", "value")
"""Columns of the long-format series table."""


class Trial(Mapping):
    """One stored trial: read-only mapping over the ``trials.jsonl`` line, identity as attributes."""

    __slots__ = ("_d",)

    def __init__(self, data: dict) -> None:
        self._d = data

    def __getitem__(self, key: str) -> Any:
        return self._d[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in IDENTITY_FIELDS or name in ("metrics", "series", "flags", "error", "extra"):
            return self._d.get(name)
        raise AttributeError(f"trial has no field {name!r}")

    def __repr__(self) -> str:
        return f"Trial({self._d.get('kind')!r}, {self._d.get('trial_id')!r})"

    @property
    def ok(self) -> bool:
        """Ended without error and with metrics."""
        return not self._d.get("error") and bool(self._d.get("metrics"))

    def metric(self, name: str) -> float | None:
        return (self._d.get("metrics") or {}).get(name)

    def as_dict(self) -> dict:
        return dict(self._d)


def trial_row(t: Mapping | TrialRecord) -> dict[str, Any]:
    """A trial as one flat row: identity fields, ``metrics.<name>``, flags (codes, ';'), error."""
    t = as_records([t])[0]
    row: dict[str, Any] = {f: getattr(t, f) for f in IDENTITY_FIELDS}
    row["kind"] = str(t.kind)
    for m, v in (t.metrics or {}).items():
        row[f"metrics.{m}"] = v
    row["flags"] = ";".join(t.flag_codes)
    row["error"] = t.error
    return row


def series_rows(trials: list[Mapping] | list[TrialRecord]) -> list[tuple[str, float, str, float]]:
    """Every per-interval sample of every trial as (trial id, t_s, field, value) rows, in trial
    order; per trial its own series (``series``: field names as stored), then the link counters
    (``extra.link_series``: fields ``link.<name>``, e.g. ``link.server_rx_pps``) and the CPU use
    per role (``extra.cpu_series``: fields ``cpu.<name>``, e.g. ``cpu.dut_busy_pct``), each in time
    order. Non-numeric and missing values are left out."""
    out = []
    for t in as_records(trials):
        extra = t.extra if isinstance(t.extra, dict) else {}
        cpu = extra.get("cpu_series")
        for prefix, points in (("", t.series), ("link.", extra.get("link_series")),
                               ("cpu.", cpu.get("samples") if isinstance(cpu, dict) else None)):
            for point in points if isinstance(points, list) else ():
                ts = point.get("t_s") if isinstance(point, dict) else None
                if ts is None or isinstance(ts, bool) or not isinstance(ts, (int, float)):
                    continue
                for field, v in point.items():
                    if field == "t_s" or isinstance(v, bool) or not isinstance(v, (int, float)):
                        continue
                    if isinstance(v, float) and math.isnan(v):
                        continue
                    out.append((t.trial_id, float(ts), prefix + field, float(v)))
    return out


def _pandas():
    try:
        import pandas
    except ImportError:
        raise FwlabError("pandas is not installed", fix="pip install 'fwlab[analysis]'") from None
    return pandas


@dataclass(frozen=True)
class Run:
    """A loaded run record."""

    path: Path
    run: dict
    """``run.json`` as stored."""
    trials: tuple[Trial, ...]
    """Every trial, the last line per trial id winning (as `RunRecord.trials`)."""

    @property
    def suite(self) -> str | None:
        return (self.run.get("suite") or {}).get("name")

    @property
    def status(self) -> str | None:
        return self.run.get("status")

    def of_kind(self, kind: str) -> list[Trial]:
        return [t for t in self.trials if t.kind == kind]

    def to_dataframe(self):
        """Tidy pandas DataFrame, one row per trial: identity columns first (`IDENTITY_FIELDS`),
        then ``metrics.<name>`` (sorted), ``flags``, ``error``. Typed: ``started_utc`` and
        ``ended_utc`` are UTC datetimes, ``flags`` a list of flag codes per trial (empty when none),
        ``rules`` an integer. Needs the ``[analysis]`` extra."""
        pd = _pandas()
        rows = [trial_row(t) for t in self.trials]
        for r, t in zip(rows, as_records(list(self.trials)), strict=True):
            r["flags"] = list(t.flag_codes)
        metric_cols = sorted({k for r in rows for k in r if k.startswith("metrics.")})
        cols = list(IDENTITY_FIELDS) + metric_cols + ["flags", "error"]
        df = pd.DataFrame.from_records(rows, columns=cols)
        for c in ("started_utc", "ended_utc"):
            df[c] = pd.to_datetime(df[c], utc=True, format="ISO8601")
        if "rules" in df and df["rules"].notna().all():
            df["rules"] = df["rules"].astype("int64")
        return df

    def summary(self) -> list[dict[str, Any]]:
        """The record's computed summary, one row per configuration and rule count: the rows of
        summary.csv and of ``fwlab report --json`` (``fwlab.stats.run_summary``), each with its
        ``key``. The same values the report shows."""
        return [{"key": ps.key(), **ps.row()} for ps in point_summaries(curves(list(self.trials)))]

    def summary_dataframe(self):
        """`summary` as a DataFrame: ``key``, then summary.csv's columns in their order
        (`SUMMARY_COLUMNS`); ``quality_flags`` a list of codes per row; absent values NaN."""
        pd = _pandas()
        rows = self.summary()
        for r in rows:
            r["quality_flags"] = [f for f in r.get("quality_flags", "").split(";") if f]
        return pd.DataFrame.from_records(rows, columns=["key", *SUMMARY_COLUMNS])

    def series_dataframe(self):
        """Long-format DataFrame of every trial's series (`series_rows`: its own, ``link.*`` and
        ``cpu.*``): trial_id, t_s (float seconds from the trial's start), field, value."""
        pd = _pandas()
        return pd.DataFrame.from_records(series_rows(list(self.trials)), columns=list(SERIES_COLUMNS))


def load(run_dir: Path | str) -> Run:
    """Load the run record in `run_dir` (the notebook entry point)."""
    rec = RunRecord.open(run_dir)
    return Run(path=rec.path, run=rec.run, trials=tuple(Trial(t) for t in rec.trials()))
