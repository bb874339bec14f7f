"""Run-level report section: the published study's figures beside fwlab's ("as published").

Owns: rendering a `fwlab.published.StudyComparison` as HTML (how the study was scaled to this
test bed, the side-by-side tables, one sentence per finding with its verdict, and what is not
measured), through its template (templates/section_published.html.j2). Shown for runs whose
suite names a ``study``. Reads the record only.
"""

from __future__ import annotations

from fwlab.published.compare import (
    INCONCLUSIVE,
    NOT_MEASURED,
    NOT_REPRODUCED,
    NOT_TESTABLE,
    REPRODUCED,
    compare_study,
    study_of,
)
from fwlab.report import templating
from fwlab.report.sections import Section, register
from fwlab.results.trial import TrialRecord, as_records


_CLASS = {REPRODUCED: "ok", NOT_REPRODUCED: "err", INCONCLUSIVE: "warn", NOT_MEASURED: "muted", NOT_TESTABLE: "muted"}


def render(run: dict, trials: list[dict] | list[TrialRecord]) -> str | None:
    """The section (templates/section_published.html.j2), or None for a run of no study."""
    trials = as_records(trials)
    if not study_of(run):
        return None
    cmp = compare_study(run, [t.to_json() if isinstance(t, TrialRecord) else t for t in trials])
    st = cmp.study
    n = cmp.counts()
    findings = [{"claim": f.claim, "published": f.published, "fwlab": f.fwlab, "criterion": f.criterion,
                 "verdict": f.verdict, "css": _CLASS[f.verdict],
                 "reason": f.reason if f.reason and f.reason != f.fwlab else None} for f in cmp.findings]
    return str(templating.render(
        "section_published.html.j2", st=st, findings=findings, scaling=cmp.scaling, tables=cmp.tables,
        n={"reproduced": n[REPRODUCED], "not_reproduced": n[NOT_REPRODUCED], "inconclusive": n[INCONCLUSIVE],
           "not_testable": n[NOT_TESTABLE], "not_measured": n[NOT_MEASURED]},
        notes=[note for t in st.tables.values() for note in t.notes] + list(st.notes), missing=cmp.missing))


register(Section(kind="@published", title="As published", render=render, order=10, run_level=True))
