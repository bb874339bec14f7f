"""The versioned run record: ``run.json``, ``trials.jsonl``, ``summary.csv`` in one directory.

Owns: the on-disk format, writing each trial the moment it ends (write + flush + fsync), reading
a record back (tolerating a torn last line from a killed run) and finding which trials an
interrupted run still owes. Never runs traffic; reports and stats read records only through here.

Format (``RECORD_VERSION`` 1), documented in docs/record-format.md:
- ``run.json``: record_version, run_id, suite (as given, TOML text and parsed), plan (trial
  count, skipped combinations), host metadata, test-bed descriptions, started/ended times,
  status ("running", "complete", "interrupted", "failed").
- ``trials.jsonl``: one JSON object per finished trial (see :func:`trial_record`). A trial id
  may appear again after a resume; the last line wins.
- ``summary.csv``: one row per configuration over its repetitions (written by ``fwlab.report``).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from fwlab.errors import RecordError

RECORD_VERSION = 1
RUN_FILE = "run.json"
TRIALS_FILE = "trials.jsonl"
SUMMARY_FILE = "summary.csv"
REPORT_FILE = "report.html"

#: trial kinds the record holds; later tests add kinds, never change these
TRIAL_KINDS = ("stream", "search_trial", "search_result", "connections", "series")


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def run_dir_name(suite: str, when: datetime | None = None) -> str:
    when = when or datetime.now(timezone.utc)
    return f"{suite}-{when.strftime('%Y%m%dT%H%M%SZ')}"


def _atomic_write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    os.replace(tmp, path)


@dataclass
class RunRecord:
    """An open run directory."""

    path: Path
    run: dict = field(default_factory=dict)

    # -- creation and loading --------------------------------------------------------------
    @classmethod
    def create(cls, root: Path, suite_name: str, run: dict) -> "RunRecord":
        root.mkdir(parents=True, exist_ok=True)
        base = run_dir_name(suite_name)
        path = root / base
        k = 1
        while path.exists():
            k += 1
            path = root / f"{base}-{k}"
        path.mkdir()
        run = {"record_version": RECORD_VERSION, **run, "status": "running", "started_utc": utc_now()}
        rec = cls(path, run)
        rec.save_run()
        (path / TRIALS_FILE).touch()
        return rec

    @classmethod
    def open(cls, path: Path | str) -> "RunRecord":
        path = Path(path)
        f = path / RUN_FILE
        if not f.exists():
            raise RecordError(f"{path} holds no fwlab run record ({RUN_FILE} missing)",
                              fix="pass a directory written by 'fwlab run'")
        from fwlab.results.shape import run_problem
        from fwlab.validation import read_text

        text = read_text(f, "record file", RecordError, fix="pass a directory written by 'fwlab run'")
        try:
            run = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise RecordError(f"{f} is not valid JSON: {getattr(exc, 'msg', 'nested too deeply')}",
                              fix="restore it from a backup") from None
        v = run.get("record_version") if isinstance(run, dict) else None
        if v == RECORD_VERSION and (why := run_problem(run)):
            raise RecordError(f"{f} is damaged: {why}", fix="restore it from a backup, or correct the field")
        if not isinstance(run, dict):
            raise RecordError(f"{f} is damaged: {run_problem(run)}", fix="restore it from a backup")
        if v != RECORD_VERSION:
            raise RecordError(f"{f} has record version {v}, this fwlab reads {RECORD_VERSION}",
                              fix="use the fwlab version that wrote it")
        return cls(path, run)

    def save_run(self) -> None:
        _atomic_write_json(self.path / RUN_FILE, self.run)

    def set_status(self, status: str) -> None:
        self.run["status"] = status
        self.run["ended_utc"] = utc_now()
        self.save_run()

    # -- trials ------------------------------------------------------------------------------
    def append_trial(self, trial: dict) -> None:
        """Append one finished trial and make it durable before returning."""
        line = json.dumps(trial, separators=(",", ":"), default=str)
        with open(self.path / TRIALS_FILE, "a") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def trials(self, kind: str | None = None) -> list[dict]:
        """All trials, the last line per trial id winning; a torn last line is skipped."""
        f = self.path / TRIALS_FILE
        if not f.exists():
            return []
        by_id: dict[str, dict] = {}
        from fwlab.results.shape import trial_problem
        from fwlab.validation import read_text

        lines = read_text(f, "record file", RecordError, fix="restore it from a backup").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                t = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                if i == len(lines) - 1:
                    continue  # torn by a kill mid-write
                raise RecordError(f"{f} line {i + 1} is not valid JSON", fix="remove the line") from None
            if why := trial_problem(t):
                raise RecordError(f"{f} line {i + 1} is damaged: {why}", fix="remove or correct the line")
            by_id.pop(t["trial_id"], None)
            by_id[t["trial_id"]] = t
        out = list(by_id.values())
        return [t for t in out if kind is None or t.get("kind") == kind]

    def finished_ids(self) -> set[str]:
        """Trials that need not run again on resume (those that ended without error)."""
        return {t["trial_id"] for t in self.trials() if not t.get("error")}

    def repair_torn_tail(self) -> None:
        """Drop a torn last line so appends after a resume start on a clean line."""
        f = self.path / TRIALS_FILE
        if not f.exists():
            return
        data = f.read_bytes()
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n")
            f.write_bytes(data[: cut + 1] if cut >= 0 else b"")


def trial_record(spec_dict: dict, *, kind: str = "stream", metrics: dict | None, series: list | None = None,
                 started_utc: str, ended_utc: str | None = None, ruleset: dict | None = None,
                 dut_counters_before: dict | None = None, dut_counters_after: dict | None = None,
                 links_before: dict | None = None, links_after: dict | None = None,
                 conditions: dict | None = None, raw: dict | None = None, flags: list | None = None,
                 error: str | None = None, extra: dict | None = None) -> dict:
    """One line of ``trials.jsonl``. ``spec_dict`` holds the trial's identity (suite, mode,
    backend, layout, rules, stateful_shortcut, ip_version, traffic, tool, size_bytes, streams,
    repetition, duration_s, trial_id). Counters are packets; rates bit/s and packets/s."""
    delta = None
    if dut_counters_before is not None and dut_counters_after is not None:
        delta = {k: dut_counters_after.get(k, 0) - dut_counters_before.get(k, 0) for k in dut_counters_after}
    rs = ruleset or {}
    return {
        "kind": kind,
        **spec_dict,
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
    }
