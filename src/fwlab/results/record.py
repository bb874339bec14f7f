"""The record's older import path: ``fwlab.results.record`` names what now lives in
``store`` (RunRecord, files, version), ``trial`` (TrialRecord) and ``kinds`` (TrialKind).

Format (``RECORD_VERSION`` "1.1"), documented in docs/record-format.md and published as JSON
Schema in docs/schema/:
- ``run.json``: record_version, suite (as given, TOML text and parsed), plan (trial count,
  planned trial ids, skipped combinations), host metadata, test-bed descriptions,
  started/ended times, resume events, status ("running", "complete", "interrupted", "failed").
- ``trials.jsonl``: one JSON object per finished trial (``TrialRecord``). A trial id may appear
  again after a resume; the last line wins.
- ``summary.csv``: one row per configuration over its repetitions (written by ``fwlab.report``).
"""

from __future__ import annotations

from fwlab.results.kinds import TRIAL_KINDS, TrialKind
from fwlab.results.store import (
    RECORD_VERSION,
    REPORT_FILE,
    RUN_FILE,
    SUMMARY_FILE,
    TRIALS_FILE,
    RecordState,
    RunRecord,
    TrialsRead,
    run_dir_name,
)
from fwlab.results.trial import TrialRecord, build_trial, utc_now

__all__ = ["RECORD_VERSION", "REPORT_FILE", "RUN_FILE", "SUMMARY_FILE", "TRIALS_FILE", "TRIAL_KINDS", "RecordState",
           "RunRecord", "TrialKind", "TrialRecord", "TrialsRead", "run_dir_name", "trial_record", "utc_now"]


def trial_record(spec_dict: dict, **kw) -> dict:
    """One line of ``trials.jsonl`` as a dict (``build_trial(...).to_json()``)."""
    return build_trial(spec_dict, **kw).to_json()
