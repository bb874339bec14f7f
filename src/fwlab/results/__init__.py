"""The run record: on-disk format (``record``) and host metadata (``metadata``)."""

from fwlab.results.metadata import host_metadata, tool_versions
from fwlab.results.record import RECORD_VERSION, RunRecord, trial_record, utc_now

__all__ = ["host_metadata", "tool_versions", "RECORD_VERSION", "RunRecord", "trial_record", "utc_now"]
