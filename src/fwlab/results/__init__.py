"""The run record, the one typed layer writers and readers share.

``identity`` (TrialIdentity: fields, trial id, keys, labels), ``kinds`` (TrialKind), ``trial``
(TrialRecord: one line of trials.jsonl), ``store`` (RunRecord: the run directory, versions,
resume state, RecordState), ``curves`` (Point, Curve, metric info), ``schema`` (the published
JSON Schema) and ``metadata`` (host metadata)."""

from fwlab.results.identity import TrialIdentity
from fwlab.results.kinds import TrialKind
from fwlab.results.metadata import host_metadata, tool_versions
from fwlab.results.record import trial_record
from fwlab.results.store import RECORD_VERSION, RecordState, RunRecord
from fwlab.results.trial import TrialRecord, build_trial, utc_now

__all__ = ["host_metadata", "tool_versions", "RECORD_VERSION", "RecordState", "RunRecord", "TrialIdentity",
           "TrialKind", "TrialRecord", "build_trial", "trial_record", "utc_now"]
