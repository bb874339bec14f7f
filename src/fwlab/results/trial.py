"""One finished trial as the record stores it: ``TrialRecord`` (one line of ``trials.jsonl``).

Owns: the typed trial line (identity + kind + metrics, series, rule set, DUT and link counters,
conditions, quality flags, error, the tool's raw output and ``extra``), its JSON form (the
identity stored flat at the top of the line, as every record since version 1 has it) and the
JSON Schema of that form. Unknown top-level keys (written by a newer minor version) are kept,
not refused. Never touches files; ``fwlab.results.store`` reads and writes lines.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fwlab.results.identity import IDENTITY_FIELDS, TrialIdentity, traffic_label
from fwlab.results.kinds import TrialKind


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


RENAMED_FLAGS = {"search-max-load-passed": "max-load-passed"}
"""Flag codes an older fwlab wrote, each with the one code that names the same thing now: a
record is read with the new code (the rfc2544 search wrote its own twin of ``max-load-passed``)."""


class TrialFlag(BaseModel):
    """A quality flag on a trial, e.g. ``cpu-saturated`` (fwlab.stats.quality ``Flag.to_dict``)."""

    model_config = ConfigDict(extra="allow")
    code: str
    severity: str | None = None
    message: str | None = None

    @field_validator("code")
    @classmethod
    def _one_code(cls, v: str) -> str:
        return RENAMED_FLAGS.get(v, v)


class TrialRecord(BaseModel):
    """One line of trials.jsonl: a finished trial. Rates are bit/s and packets/s, counters packets, times seconds / UTC."""

    model_config = ConfigDict(extra="allow")

    kind: TrialKind = Field(description="which measurement envelope metrics and extra follow")
    identity: TrialIdentity = Field(description="stored flat at the top of the line")
    trial_id: str = Field(description="e.g. ip4udp-64B-nftables-1000r-linear-sf-routed-r1; the last line per id wins")
    started_utc: str | None = None
    ended_utc: str | None = None
    metrics: dict[str, Any] | None = Field(default=None, description="null: the trial failed, see error")
    series: list[dict[str, Any]] = Field(default_factory=list, description="per-interval samples (t_s, ...)")
    ruleset_digest: str | None = None
    ruleset_family: str | None = None
    rule_load_s: float | None = None
    dut_counters_before: dict[str, Any] | None = None
    dut_counters_after: dict[str, Any] | None = None
    dut_counters_delta: dict[str, Any] | None = None
    links_before: dict[str, Any] | None = None
    links_after: dict[str, Any] | None = None
    conditions: dict[str, Any] = Field(default_factory=dict)
    flags: list[TrialFlag] = Field(default_factory=list)
    error: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict, description="the measurement's further data")
    raw: dict[str, Any] = Field(default_factory=dict, description="the tool's own output and command line")
    written_at: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _fold_identity(cls, data: Any) -> Any:
        """Accept the flat line: the identity fields at the top become ``identity``."""
        if isinstance(data, dict) and "identity" not in data:
            data = dict(data)
            data["identity"] = {f: data.pop(f) for f in IDENTITY_FIELDS if f in data}
        return data

    # -- convenient views: the identity's fields as attributes (readers write ``t.rules``) ---------
    @property
    def suite(self) -> str:
        return self.identity.suite

    @property
    def mode(self) -> str:
        return self.identity.mode

    @property
    def backend(self) -> str:
        return self.identity.backend

    @property
    def layout(self) -> str:
        return self.identity.layout

    @property
    def rules(self) -> int:
        return self.identity.rules

    @property
    def stateful_shortcut(self) -> bool:
        return self.identity.stateful_shortcut

    @property
    def ip_version(self) -> int:
        return self.identity.ip_version

    @property
    def traffic(self) -> str:
        return self.identity.traffic

    @property
    def tool(self) -> str:
        return self.identity.tool

    @property
    def size_bytes(self) -> int | None:
        return self.identity.size_bytes

    @property
    def streams(self) -> int:
        return self.identity.streams

    @property
    def rate_bps(self) -> int | None:
        return self.identity.rate_bps

    @property
    def duration_s(self) -> float:
        return self.identity.duration_s

    @property
    def repetition(self) -> int:
        return self.identity.repetition

    @property
    def label(self) -> str | None:
        return self.identity.label

    @property
    def options(self) -> dict:
        return self.identity.options

    @property
    def background(self) -> dict | None:
        return self.identity.background

    @property
    def link_rate_bps(self) -> int | None:
        return self.identity.link_rate_bps

    @property
    def curve_key(self) -> tuple:
        return self.identity.curve_key

    @property
    def config_key(self) -> tuple:
        return self.identity.config_key

    @property
    def config_label(self) -> str:
        return self.identity.config_label

    @property
    def traffic_label(self) -> str:
        return traffic_label(self.identity.__dict__, str(self.kind))

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.metrics)

    def metric(self, name: str, default: Any = None) -> Any:
        """One figure of ``metrics`` (``default`` when the trial failed or lacks it)."""
        v = (self.metrics or {}).get(name)
        return default if v is None else v

    @property
    def flag_codes(self) -> list[str]:
        return [f.code for f in self.flags]

    def has_flag(self, code: str) -> bool:
        return any(f.code == code for f in self.flags)

    # -- JSON ----------------------------------------------------------------------------------
    def to_json(self) -> dict:
        """The line as stored: ``kind``, the identity fields, ``trial_id``, then the rest."""
        d = self.model_dump(mode="json")
        identity = d.pop("identity")
        kind = d.pop("kind")
        return {"kind": kind, **identity, **d}

    @classmethod
    def from_json(cls, line: dict) -> "TrialRecord":
        return cls.model_validate(line)

    @classmethod
    def json_schema(cls) -> dict:
        """JSON Schema of the stored (flat) line, generated from this model."""
        s = copy.deepcopy(cls.model_json_schema())
        defs = s.get("$defs", {})
        ident = defs.pop("TrialIdentity")
        props = s["properties"]
        props.pop("identity")
        flat = {"kind": props.pop("kind"), **ident["properties"], **props}
        s["properties"] = flat
        s["required"] = ["kind"] + list(ident.get("required", [])) + [r for r in s["required"]
                                                                     if r not in ("kind", "identity")]
        return s


def as_records(trials: Iterable[TrialRecord | Mapping]) -> list[TrialRecord]:
    """Trial lines (dicts as ``RunRecord.trials`` gives them) or records, as ``TrialRecord``."""
    return [t if isinstance(t, TrialRecord) else TrialRecord.from_json(dict(t)) for t in trials]


def build_trial(identity: dict, *, kind: str = "stream", metrics: dict | None, series: list | None = None,
                started_utc: str, ended_utc: str | None = None, ruleset: dict | None = None,
                dut_counters_before: dict | None = None, dut_counters_after: dict | None = None,
                links_before: dict | None = None, links_after: dict | None = None,
                conditions: dict | None = None, raw: dict | None = None, flags: list | None = None,
                error: str | None = None, extra: dict | None = None) -> TrialRecord:
    """A ``TrialRecord`` from what the orchestrator holds when a trial ends. ``identity`` is
    ``TrialIdentity.to_dict()`` (with ``trial_id``)."""
    delta = None
    if dut_counters_before is not None and dut_counters_after is not None:
        delta = {k: dut_counters_after.get(k, 0) - dut_counters_before.get(k, 0) for k in dut_counters_after}
    rs = ruleset or {}
    return TrialRecord.model_validate({
        "kind": kind,
        **identity,
        "started_utc": started_utc,
        "ended_utc": ended_utc or utc_now(),
        "metrics": metrics,
        "series": series or [],
        "ruleset_digest": rs.get("digest"),
        "ruleset_family": rs.get("family"),
        "rule_load_s": rs.get("load_s"),
        "dut_counters_before": dut_counters_before,
        "dut_counters_after": dut_counters_after,
        "dut_counters_delta": delta,
        "links_before": links_before,
        "links_after": links_after,
        "conditions": conditions or {},
        "flags": flags or [],
        "error": error,
        "extra": extra or {},
        "raw": raw or {},
        "written_at": time.time(),
    })
