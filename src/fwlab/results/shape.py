"""The shape a record must have before anything reads it: ``run.json`` and each ``trials.jsonl`` line.

Owns: the read-side check that turns a damaged or hand-edited record (``host: null``, a metric
that is a string, a trial without ``trial_id``) into one RecordError naming the file, the line and
the field, instead of a traceback deep in the report. Only types are checked, and only of the
fields the readers use; unknown fields pass (a later fwlab may add them).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fwlab.validation import one_line

#: metric names ending so carry a unit, hence a number
UNIT_SUFFIXES = ("_bps", "_pps", "_cps", "_ratio", "_pct", "_s", "_ms", "_us", "_ns", "_packets", "_bytes", "_size",
                 "_trials", "bytes", "retransmits")
Number = float  # strict: an int passes, a bool or a string does not


class _Shape(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class _Flag(_Shape):
    code: str
    severity: str = "warning"
    message: str = ""


class _TrafficShape(_Shape):
    kind: str | None = None
    tool: str | None = None
    label: str | None = None
    sizes: list[int | None] | None = None
    streams: int | None = None
    options: dict[str, Any] = Field(default_factory=dict)


class _ParsedShape(_Shape):
    """The parsed suite stored in run.json, as the report and the resume read it (types only)."""

    name: str | None = None
    study: str | None = None
    mode: list[str] | str | None = None
    backends: list[str] | None = None
    layouts: list[str] | None = None
    rules: list[int] | None = None
    ip_versions: list[int] | None = None
    stateful_shortcut: list[bool] | None = None
    traffic: list[_TrafficShape] = Field(default_factory=list)
    repetitions: int | None = None
    max_repetitions: int | None = None
    precision: Number | None = Field(default=None, allow_inf_nan=False)
    duration_s: Number | None = Field(default=None, allow_inf_nan=False)
    pairs: int | None = None
    link_rate: str | list[str] | None = None
    background: list[dict[str, Any]] = Field(default_factory=list)
    hosts: dict[str, dict[str, Any]] = Field(default_factory=dict)


class _SuiteShape(_Shape):
    name: str
    toml: str = ""
    parsed: _ParsedShape = Field(default_factory=_ParsedShape)


class _Skipped(_Shape):
    mode: str
    backend: str
    layout: str
    stateful_shortcut: bool
    reason: str


class _PlanShape(_Shape):
    trials: int | None = Field(default=None, ge=0)
    skipped: list[_Skipped] = Field(default_factory=list)


class _BedShape(_Shape):
    backend: str | None = None
    topology: dict[str, Any] = Field(default_factory=dict)


class _RunShape(_Shape):
    record_version: int | str  # "major.minor" since 1.1 (results.store.upgrade_run)
    suite: _SuiteShape
    plan: _PlanShape = Field(default_factory=_PlanShape)
    host: dict[str, Any] = Field(default_factory=dict)
    status: Literal["running", "complete", "interrupted", "failed"] | None = None
    started_utc: str | None = None
    ended_utc: str | None = None
    beds: list[_BedShape] = Field(default_factory=list)
    remote_hosts: dict[str, Any] | None = None
    resumed_utc: list[str] = Field(default_factory=list)


class _TrialShape(_Shape):
    trial_id: str = Field(min_length=1)
    kind: str
    suite: str
    mode: str
    backend: str
    layout: str
    rules: int = Field(ge=0, le=100_000_000)
    stateful_shortcut: bool
    ip_version: Literal[4, 6]
    traffic: str
    tool: str
    size_bytes: int | None = Field(ge=0, le=1_000_000)
    streams: int = Field(ge=1, le=100_000)
    rate_bps: Number | None = Field(ge=0, allow_inf_nan=False)
    duration_s: Number = Field(ge=0, allow_inf_nan=False)
    repetition: int = Field(ge=0, le=1_000_000)
    label: str | None = None
    metrics: dict[str, Any] | None = None
    series: list[dict[str, Any]] = Field(default_factory=list)
    flags: list[_Flag] = Field(default_factory=list)
    error: str | None = None
    conditions: dict[str, Any] = Field(default_factory=dict)
    extra: dict[str, Any] = Field(default_factory=dict)
    raw: dict[str, Any] = Field(default_factory=dict)

    @field_validator("series")
    @classmethod
    def _series(cls, v: list[dict[str, Any]]) -> list[dict[str, Any]]:
        _series_problem(v)
        return v

    @field_validator("metrics")
    @classmethod
    def _metrics(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        """A metric with a unit in its name (``throughput_bps``, ``loss_ratio``, ``latency_ns``)
        is a number or null, or a table of them (percentiles); others (``algorithm``,
        ``device_model``) may be text."""
        for k, x in (v or {}).items():
            if not k.endswith(UNIT_SUFFIXES):
                continue
            inner = x.values() if isinstance(x, dict) else [x]  # e.g. latency_ns percentiles
            if not all(y is None or _is_number(y) for y in inner):
                raise ValueError(f"metric {k[:40]!r} is {type(x).__name__}, not a number or null")
        return v


def _series_problem(v: list[dict[str, Any]]) -> None:
    """Each per-interval sample: ``t_s`` a number, and every field with a unit in its name a
    number or null (or a table of them), as in ``metrics``."""
    for i, sample in enumerate(v):
        for k, x in sample.items():
            if k != "t_s" and not k.endswith(UNIT_SUFFIXES):
                continue
            inner = x.values() if isinstance(x, dict) else [x]
            if not all(y is None or _is_number(y) for y in inner) or (k == "t_s" and x is None):
                raise ValueError(f"series sample {i}: {k[:40]!r} is {type(x).__name__}, not a number")


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _problem(model: type[BaseModel], data: Any) -> str | None:
    if not isinstance(data, dict):
        return f"holds a JSON {type(data).__name__}, not an object"
    try:
        model.model_validate(data)
    except ValidationError as exc:
        return one_line(exc)
    return None


def run_problem(run: Any) -> str | None:
    """Why ``run.json``'s content cannot be read (one line), or None."""
    return _problem(_RunShape, run)


def trial_problem(trial: Any) -> str | None:
    """Why one ``trials.jsonl`` line's content cannot be read (one line), or None."""
    return _problem(_TrialShape, trial)
