"""The run directory on disk: ``RunRecord`` (append, read, resume state), versioned with upgrades.

Owns: ``run.json`` (``RunInfo``) and ``trials.jsonl`` (one ``TrialRecord`` per line): creating a
run directory, writing each trial the moment it ends (write + flush + fsync), reading a record
back (a torn last line from a killed run is skipped; other lines that fail to parse are named,
not hidden), the record version (``major.minor``: a reader opens every minor of its major and
upgrades older minors in memory), the resume events, and what the record is (``RecordState``:
complete / incomplete / damaged / interrupted, resumed or not). Never runs traffic.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fwlab.errors import RecordError
from fwlab.files import as_file_part
from fwlab.results.precision import PrecisionRecord
from fwlab.results.trial import TrialRecord, utc_now
from fwlab.results.shape import trial_problem

#: the version this fwlab writes; readers open any "1.x" and upgrade older minors in memory
RECORD_VERSION = "1.1"
RECORD_MAJOR, RECORD_MINOR = (int(x) for x in RECORD_VERSION.split("."))
RUN_FILE = "run.json"
TRIALS_FILE = "trials.jsonl"
SUMMARY_FILE = "summary.csv"
REPORT_FILE = "report.html"

RunStatus = Literal["running", "complete", "interrupted", "failed"]


class ResumeEvent(BaseModel):
    """One ``fwlab run --resume`` of this record."""

    model_config = ConfigDict(extra="allow")
    at_utc: str
    trials_done: int | None = Field(default=None, description="trials that had ended without error before it")
    hosts_file: dict[str, Any] | None = Field(
        default=None, description="the hosts file given with this --resume, if any: `file`, "
        "`changed` (per role, the entry keys that differ from the run's), `previous_entries`")


class Plan(BaseModel):
    model_config = ConfigDict(extra="allow")
    trials: int = Field(description="planned trial count")
    trial_ids: list[str] | None = Field(default=None, description="planned trial ids in run order (since 1.1)")
    skipped: list[dict[str, Any]] = Field(default_factory=list, description="combinations left out, with reason")


class RunInfo(BaseModel):
    """``run.json``. Unknown keys are kept (a newer minor may add some)."""

    model_config = ConfigDict(extra="allow")
    record_version: str = Field(description="major.minor; readers accept their major and upgrade older minors")
    status: RunStatus
    started_utc: str
    ended_utc: str | None = None
    resumed_utc: list[str] = Field(default_factory=list, description="when each resume started")
    resume_events: list[ResumeEvent] = Field(default_factory=list, description="each resume (since 1.1)")
    suite: dict[str, Any] = Field(description="name, toml (as given), parsed (validated, with defaults)")
    plan: Plan
    host: dict[str, Any] = Field(default_factory=dict, description="host metadata")
    beds: list[dict[str, Any]] = Field(default_factory=list, description="one per test bed built")
    remote_hosts: dict[str, Any] | None = None
    precision: PrecisionRecord | None = Field(default=None, description="adaptive repetitions: per figure the "
                                              "repetitions run and the interval reached (suites with precision)")


def parse_version(v: Any) -> tuple[int, int] | None:
    """``1`` (records before 1.1) -> (1, 0); ``"1.1"`` -> (1, 1); anything else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return (v, 0)
    if isinstance(v, str):
        parts = v.split(".")
        if len(parts) == 2 and all(p.isdigit() for p in parts):
            return (int(parts[0]), int(parts[1]))
    return None


def upgrade_run(run: dict, where: str) -> dict:
    """``run.json`` of any version this fwlab reads, as the current version (in memory)."""
    v = parse_version(run.get("record_version"))
    if v is None or v[0] != RECORD_MAJOR:
        raise RecordError(f"{where} has record version {run.get('record_version')!r}, "
                          f"this fwlab reads {RECORD_MAJOR}.x", fix="use the fwlab version that wrote it")
    run = dict(run)
    if v < (1, 1):
        # 1.0 -> 1.1: version as "major.minor", resume events beside the resume times
        run.setdefault("resume_events", [{"at_utc": t, "trials_done": None} for t in run.get("resumed_utc") or []])
    run["record_version"] = RECORD_VERSION if v[1] <= RECORD_MINOR else f"{v[0]}.{v[1]}"
    return run


def _fits(line: dict) -> bool:
    try:
        TrialRecord.model_validate(line)
    except ValidationError:
        return False
    return True


def run_dir_name(suite: str, when: datetime | None = None) -> str:
    when = when or datetime.now(timezone.utc)
    return f"{suite}-{when.strftime('%Y%m%dT%H%M%SZ')}"


def _atomic_write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    os.replace(tmp, path)


def check_results_root(root: Path | str) -> Path:
    """The directory run records go into (``fwlab run --out``), checked before anything runs: not
    under /proc, /sys or /dev, not a file, and (if it exists) writable. RecordError otherwise."""
    root = Path(root)
    real = Path(os.path.realpath(root))
    if any(str(real) == t or str(real).startswith(t + "/") for t in ("/proc", "/sys", "/dev")):
        raise RecordError(f"results directory {root} is under /{real.parts[1]}, where no output goes",
                          fix="give --out a directory of your own, e.g. ./results")
    probe = real
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise RecordError(f"results directory {root}: {probe} is not a directory",
                          fix="give --out a directory, e.g. ./results")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise RecordError(f"results directory {root}: {probe} is not writable for this user",
                          fix="give --out a directory you can write")
    return root


@dataclass
class TrialsRead:
    """What ``trials.jsonl`` holds, read tolerantly."""

    trials: list[dict]  #: the last line per trial id, in file order
    bad_lines: list[int] = field(default_factory=list)  #: 1-based lines that are not a trial record (not the torn tail)
    torn_tail: bool = False  #: the last line, without its newline, was cut by a kill mid-write
    file_missing: bool = False
    #: why each bad line is not a trial record (line -> one phrase, naming the trial where it is known)
    bad_reasons: dict[int, str] = field(default_factory=dict)
    #: why the file as a whole could not be read (a directory, a FIFO, permission denied, too large)
    unreadable: str | None = None
    #: the last line is a whole trial without its newline (a kill between the line and its newline)
    unterminated: bool = False

    def damage(self) -> str | None:
        """One phrase naming what is damaged (the file, or each bad line and why), or None."""
        if self.unreadable:
            return self.unreadable
        if self.bad_lines:
            shown = [f"{n} ({self.bad_reasons[n]})" if n in self.bad_reasons else str(n) for n in self.bad_lines[:5]]
            more = f" and {len(self.bad_lines) - 5} more" if len(self.bad_lines) > 5 else ""
            return f"{TRIALS_FILE} lines {', '.join(shown)}{more} could not be read"
        return None


def _line_problem(raw: bytes) -> tuple[dict | None, str | None]:
    """(trial, None) for a line that is a trial record, else (None, why not)."""
    from fwlab.files import MAX_DEPTH, depth, non_finite

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 at byte {exc.start}"
    try:
        t = json.loads(text)
    except RecursionError:
        return None, f"nested more than {MAX_DEPTH} deep"
    except ValueError as exc:
        return None, f"not JSON: {getattr(exc, 'msg', exc)}"
    if not isinstance(t, dict):
        return None, f"a JSON {type(t).__name__}, not an object"
    tid = t.get("trial_id")
    who = f"trial {str(tid)[:80]}: " if isinstance(tid, str) and tid else ""
    if depth(t) > MAX_DEPTH:
        return None, f"{who}nested more than {MAX_DEPTH} deep"
    if where := non_finite(t):
        return None, f"{who}{where[:80]} is not a finite number"
    if why := trial_problem(t):
        return None, f"{who}{why[:200]}"
    if not _fits(t):
        return None, f"{who}does not fit the trial record"
    return t, None


@dataclass
class RecordState:
    """What the record is, for the report's overview and headline."""

    status: Literal["complete", "incomplete", "damaged", "interrupted", "running", "failed"]
    stated: str | None  #: the status run.json states
    planned: int | None
    planned_ids: list[str] | None
    present: int  #: distinct trial ids in trials.jsonl
    failed: int  #: of those, ended with an error
    missing_ids: list[str]  #: planned but not in trials.jsonl (empty when the plan's ids are unknown)
    bad_lines: list[int]
    torn_tail: bool
    file_missing: bool
    resumes: list[dict]  #: {at_utc, trials_done}
    #: what is damaged, with each bad line's reason (TrialsRead.damage), or None
    damage: str | None = None

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    def sentence(self) -> str:
        """One line, e.g. 'incomplete: 6 of 8 planned trials (missing: a, b)'."""
        planned = "?" if self.planned is None else str(self.planned)
        s = f"{self.status}: {self.present} of {planned} planned trials in the record"
        if self.failed:
            s += f" ({self.failed} failed)"
        if self.file_missing:
            s += f"; {TRIALS_FILE} is missing"
        if self.damage:
            s += f"; {self.damage}"
        elif self.bad_lines:
            s += f"; {TRIALS_FILE} lines {', '.join(str(n) for n in self.bad_lines)} could not be read"
        if self.torn_tail:
            s += "; its last line was cut off (a kill mid-write)"
        if self.planned_ids is None and self.planned is not None and self.present < self.planned:
            s += " (this record's version does not store the planned trial ids)"
        if self.missing_ids:
            shown = self.missing_ids[:20]
            more = f" and {len(self.missing_ids) - len(shown)} more" if len(self.missing_ids) > len(shown) else ""
            s += f"; missing: {', '.join(shown)}{more}"
        if self.stated and self.stated != self.status:
            s += f"; run.json says '{self.stated}'"
        if self.resumes:
            n = len(self.resumes)
            s += f"; resumed {n} time{'s' if n > 1 else ''} ({', '.join(str(r.get('at_utc')) for r in self.resumes)})"
        return s


@dataclass
class RunRecord:
    """An open run directory."""

    path: Path
    run: dict = field(default_factory=dict)

    # -- creation and loading --------------------------------------------------------------
    @classmethod
    def create(cls, root: Path, suite_name: str, run: dict) -> "RunRecord":
        check_results_root(root)
        base = run_dir_name(as_file_part(suite_name))
        try:
            root.mkdir(parents=True, exist_ok=True)
            path = root / base
            k = 1
            while path.exists():
                k += 1
                path = root / f"{base}-{k}"
            path.mkdir()
        except OSError as exc:
            raise RecordError(f"results directory {root} cannot hold a new run: {exc.strerror or exc}",
                              fix="give --out a directory you can write") from None
        run = {"record_version": RECORD_VERSION, **run, "status": "running", "started_utc": utc_now()}
        rec = cls(path, run)
        rec.save_run()
        (path / TRIALS_FILE).touch()
        return rec

    @classmethod
    def open(cls, path: Path | str) -> "RunRecord":
        path = Path(path)
        f = path / RUN_FILE
        from fwlab.files import MAX_DEPTH, depth, read_text
        from fwlab.results.shape import run_problem

        try:
            os.stat(f)
        except (FileNotFoundError, NotADirectoryError):
            raise RecordError(f"{path} holds no fwlab run record ({RUN_FILE} missing)",
                              fix="pass a directory written by 'fwlab run'") from None
        except PermissionError:
            raise RecordError(f"{f} cannot be read by this user: permission denied",
                              fix="read it as the user that wrote it, or give this user read access") from None
        except (OSError, ValueError) as exc:
            raise RecordError(f"{path} is not usable: {getattr(exc, 'strerror', None) or exc}",
                              fix="pass a directory written by 'fwlab run'") from None
        text = read_text(f, "record file", RecordError, fix="restore it from a backup", max_bytes=64 * 1024 * 1024)
        try:
            run = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            why = getattr(exc, "msg", "nested too deeply")
            raise RecordError(f"{f} is not valid JSON: {why}", fix="restore it from a backup") from None
        if depth(run) > MAX_DEPTH:
            raise RecordError(f"{f} nests more than {MAX_DEPTH} deep", fix="restore it from a backup")
        if not isinstance(run, dict):
            raise RecordError(f"{f} holds a JSON {type(run).__name__}, not an object", fix="restore it from a backup")
        run = upgrade_run(run, str(f))
        if why := run_problem(run):
            raise RecordError(f"{f} is damaged: {why}", fix="restore it from a backup, or correct the field")
        return cls(path, run)

    def info(self) -> RunInfo:
        """``run.json`` as a typed model (raises RecordError naming the first bad field)."""
        try:
            return RunInfo.model_validate(self.run)
        except ValidationError as exc:
            e = exc.errors()[0]
            loc = ".".join(str(x) for x in e["loc"]) or "(top)"
            raise RecordError(f"{self.path / RUN_FILE}: {loc}: {e['msg']}", fix="restore it from a backup") from None

    def save_run(self) -> None:
        _atomic_write_json(self.path / RUN_FILE, self.run)

    def set_status(self, status: str) -> None:
        self.run["status"] = status
        self.run["ended_utc"] = utc_now()
        self.save_run()

    def note_resume(self, hosts_file: dict | None = None) -> None:
        """Record that a resume starts now (time, how many trials were done before it and, when
        ``--resume`` was given a hosts file, which and what it changed)."""
        now = utc_now()
        self.run.setdefault("resumed_utc", []).append(now)
        event = {"at_utc": now, "trials_done": len(self.finished_ids())}
        if hosts_file is not None:
            event["hosts_file"] = hosts_file
        self.run.setdefault("resume_events", []).append(event)
        self.run["record_version"] = RECORD_VERSION
        self.run["status"] = "running"
        self.save_run()

    # -- trials ------------------------------------------------------------------------------
    def append_trial(self, trial: TrialRecord | dict) -> None:
        """Append one finished trial and make it durable before returning."""
        if isinstance(trial, TrialRecord):
            trial = trial.to_json()
        line = json.dumps(trial, separators=(",", ":"), default=str)
        with open(self.path / TRIALS_FILE, "a") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def read(self) -> TrialsRead:
        """Every trial line, tolerantly: the last line per trial id wins; the torn tail (a last
        line without its newline that is not a whole trial) is skipped; every other line that is
        not a trial record (not UTF-8, not JSON, a NaN or infinite number, not fitting the
        schema) is listed in ``bad_lines`` with its reason. A file that cannot be read at all
        (a directory, a FIFO, permission denied, too large) is ``unreadable``."""
        from fwlab.files import MAX_RECORD_BYTES, read_bytes

        f = self.path / TRIALS_FILE
        if not os.path.lexists(f):
            return TrialsRead([], file_missing=True)
        try:
            data = read_bytes(f, "trials file", RecordError, fix="restore it from a backup",
                              max_bytes=MAX_RECORD_BYTES)
        except RecordError as exc:
            return TrialsRead([], unreadable=exc.message)
        by_id: dict[str, dict] = {}
        bad: list[int] = []
        reasons: dict[int, str] = {}
        torn = unterminated = False
        lines = data.split(b"\n")
        last = len(lines) - 1  # lines[last] is what follows the final newline (b"" when there is one)
        for i, raw in enumerate(lines):
            if not raw.strip():
                continue
            t, why = _line_problem(raw)
            if why is not None:
                if i == last:
                    torn = True  # no newline after it: cut by a kill mid-write
                else:
                    bad.append(i + 1)
                    reasons[i + 1] = why
                continue
            unterminated = i == last
            by_id.pop(t["trial_id"], None)
            by_id[t["trial_id"]] = t
        return TrialsRead(list(by_id.values()), bad, torn, bad_reasons=reasons, unterminated=unterminated)

    def trials(self, kind: str | None = None) -> list[dict]:
        """All trials, the last line per trial id winning; a torn last line is skipped, any other
        unreadable line is an error (RecordError naming it)."""
        r = self.read()
        if r.unreadable:
            raise RecordError(r.unreadable, fix="restore it from a backup")
        if r.bad_lines:
            n = r.bad_lines[0]
            raise RecordError(f"{self.path / TRIALS_FILE} line {n} is not a trial record: {r.bad_reasons.get(n, '?')}",
                              fix=f"fwlab run --resume {self.path} --repair moves damaged lines aside, "
                                  "or restore the file from a backup")
        return [t for t in r.trials if kind is None or t.get("kind") == kind]

    def records(self, kind: str | None = None) -> list[TrialRecord]:
        """All trials as ``TrialRecord`` (RecordError naming the first that does not fit the schema)."""
        out = []
        for t in self.trials(kind):
            try:
                out.append(TrialRecord.from_json(t))
            except ValidationError as exc:
                e = exc.errors()[0]
                loc = ".".join(str(x) for x in e["loc"])
                raise RecordError(f"{self.path / TRIALS_FILE}: trial {t.get('trial_id')}: {loc}: {e['msg']}",
                                  fix="remove the line or restore it from a backup") from None
        return out

    def finished_ids(self) -> set[str]:
        """Trials that need not run again on resume (those that ended without error)."""
        return {t["trial_id"] for t in self.trials() if not t.get("error")}

    def repair_torn_tail(self) -> None:
        """Make appends after a resume start on a clean line: a torn last line (not a whole
        trial) is dropped; a whole trial that only lacks its newline gets it."""
        f = self.path / TRIALS_FILE
        if not f.is_file():
            return
        data = f.read_bytes()
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n")
            tail = data[cut + 1:]
            if _line_problem(tail)[1] is None:
                with open(f, "ab") as fh:
                    fh.write(b"\n")
                    fh.flush()
                    os.fsync(fh.fileno())
            else:
                with open(f, "r+b") as fh:
                    fh.truncate(cut + 1 if cut >= 0 else 0)
                    fh.flush()
                    os.fsync(fh.fileno())

    def resume_damage(self, read: TrialsRead | None = None) -> str | None:
        """Why this record cannot be resumed as it is (trials.jsonl unreadable, or lines that are
        not trial records), or None. Changes nothing."""
        read = read or self.read()
        f = self.path / TRIALS_FILE
        if read.unreadable:
            return read.unreadable
        if os.path.lexists(f) and not f.is_file():
            return f"{f} is not a regular file"
        return read.damage()

    def set_aside_bad_lines(self) -> Path | None:
        """``--repair``: move every line that is not a trial record (the torn tail excepted) to
        ``trials.damaged-<UTC>.jsonl`` beside it, kept byte for byte with its line number, and
        rewrite ``trials.jsonl`` without them (temporary file, fsync, rename). Returns the side
        file, or None when nothing was bad."""
        read = self.read()
        if not read.bad_lines:
            return None
        f = self.path / TRIALS_FILE
        lines = f.read_bytes().split(b"\n")
        bad = set(read.bad_lines)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        side = self.path / f"trials.damaged-{stamp}.jsonl"
        kept = [ln for i, ln in enumerate(lines) if i + 1 not in bad]
        aside = b"".join(b"# line %d: %s\n" % (n, read.bad_reasons.get(n, "").encode("utf-8", "replace"))
                         + lines[n - 1] + b"\n" for n in read.bad_lines)
        with open(side, "ab") as fh:
            fh.write(aside)
            fh.flush()
            os.fsync(fh.fileno())
        tmp = f.with_name(f".{TRIALS_FILE}.repair.tmp")
        with open(tmp, "wb") as fh:
            fh.write(b"\n".join(kept))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, f)
        return side

    # -- what the record is -------------------------------------------------------------------
    def planned_ids(self) -> list[str] | None:
        """The planned trial ids, stored since 1.1 (None for older records: the plan is expanded
        by layers above the record, which it does not import)."""
        plan = self.run.get("plan") if isinstance(self.run.get("plan"), dict) else {}
        ids = plan.get("trial_ids")
        return [str(x) for x in ids] if isinstance(ids, list) else None

    def state(self, read: TrialsRead | None = None) -> RecordState:
        return record_state(self.run, read or self.read(), self.planned_ids())


def record_state(run: dict, read: TrialsRead, planned_ids: list[str] | None) -> RecordState:
    """What the record is: ``damaged`` (lines that are not trials, or trials.jsonl missing while
    trials were planned), else the stated ``interrupted`` / ``failed`` / ``running``, else
    ``incomplete`` (planned trials missing: a truncated file), else ``complete``."""
    stated = run.get("status")
    plan = run.get("plan") if isinstance(run.get("plan"), dict) else {}
    planned = len(planned_ids) if planned_ids is not None else (
        plan.get("trials") if isinstance(plan.get("trials"), int) else None)
    present = {t["trial_id"] for t in read.trials}
    missing = [i for i in planned_ids or [] if i not in present]
    failed = sum(1 for t in read.trials if t.get("error"))
    resumes = [dict(e) for e in run.get("resume_events") or [] if isinstance(e, dict)]
    short = bool(missing) or (planned is not None and len(present) < planned)
    if read.bad_lines or read.unreadable or (read.file_missing and (planned or 0) > 0):
        status = "damaged"
    elif stated in ("interrupted", "failed", "running"):
        status = stated
    elif short:
        status = "incomplete"
    else:
        status = "complete"
    return RecordState(status=status, stated=stated, planned=planned, planned_ids=planned_ids,
                       present=len(present), failed=failed, missing_ids=missing, bad_lines=read.bad_lines,
                       torn_tail=read.torn_tail, file_missing=read.file_missing, resumes=resumes,
                       damage=read.damage())


def state_without_plan(run: dict, trials: list[dict] | list[TrialRecord]) -> RecordState:
    """The state from run.json and the trials (lines or records) alone (planned ids only if
    run.json stores them)."""
    plan = run.get("plan") if isinstance(run.get("plan"), dict) else {}
    ids = plan.get("trial_ids")
    lines = [t.to_json() if isinstance(t, TrialRecord) else t for t in trials]
    return record_state(run, TrialsRead(lines), [str(i) for i in ids] if isinstance(ids, list) else None)
