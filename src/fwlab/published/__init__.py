"""Published figures of the seed studies, transcribed, and fwlab's figures set beside them.

Owns: the transcribed tables (``data/<study>.toml``: each table with the study's own table or
figure reference, quantity and unit, values exactly as printed), their loader (``model``), and
one comparison per study (``study_<id>.py``) that turns a run record into side-by-side tables
and findings with a verdict computed from the record. Never touches the test bed or traffic.
"""

from fwlab.published.model import PublishedTable, Study, load_study, study_names

__all__ = ["PublishedTable", "Study", "load_study", "study_names"]
