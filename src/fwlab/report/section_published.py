"""Run-level report section: the published study's figures beside fwlab's ("as published").

Owns: rendering a `fwlab.published.StudyComparison` as HTML (how the study was scaled to this
test bed, the side-by-side tables, one sentence per finding with its verdict, and what is not
measured). Shown for runs whose suite names a ``study``. Reads the record only.
"""

from __future__ import annotations

import html

from fwlab.published.compare import (
    INCONCLUSIVE,
    NOT_MEASURED,
    NOT_REPRODUCED,
    NOT_TESTABLE,
    REPRODUCED,
    compare_study,
    study_of,
)
from fwlab.report.sections import Section, register
from fwlab.results.trial import TrialRecord, as_records


def _e(x) -> str:
    return html.escape(str(x))


_CLASS = {REPRODUCED: "ok", NOT_REPRODUCED: "err", INCONCLUSIVE: "warn", NOT_MEASURED: "muted", NOT_TESTABLE: "muted"}


def _table(t) -> str:
    out = [f"<h3>{_e(t.title)}</h3><div class='scroll'><table><tr>"]
    out += [f"<th class='l'>{_e(h)}</th>" if i < t.left else f"<th>{_e(h)}</th>" for i, h in enumerate(t.header)]
    out.append("</tr>")
    for r in t.rows:
        out.append("<tr>" + "".join(f"<td class='l'>{_e(c)}</td>" if i < t.left else f"<td>{_e(c)}</td>"
                                    for i, c in enumerate(r)) + "</tr>")
    out.append("</table></div>")
    if t.note:
        out.append(f"<p class='muted'>{_e(t.note)}</p>")
    return "".join(out)


def render(run: dict, trials: list[dict] | list[TrialRecord]) -> str | None:
    trials = as_records(trials)
    if not study_of(run):
        return None
    cmp = compare_study(run, [t.to_json() if isinstance(t, TrialRecord) else t for t in trials])
    st = cmp.study
    n = cmp.counts()
    parts = [f"<h2 id='published'>As published: {_e(st.study)} beside this run</h2>",
             f"<p><b>{_e(st.title)}</b> — {_e(st.citation)}. <span class='muted'>Transcribed from "
             f"<code>{_e(st.source)}</code>.</span></p>",
             f"<p class='muted'>Published setup: {_e(st.setup)}</p>"]
    parts.append(f"<p>Of {len(cmp.findings)} published findings checked, {n[REPRODUCED]} reproduced, "
                 f"{n[NOT_REPRODUCED]} not reproduced, {n[INCONCLUSIVE]} inconclusive (a limit or the noise "
                 f"decided, the reason is given), {n[NOT_TESTABLE]} not testable on this bed and "
                 f"{n[NOT_MEASURED]} not measured in this run. The verdicts are also in <code>findings.json</code> "
                 f"beside the record.</p>")
    if cmp.findings:
        parts.append("<div class='scroll'><table><tr><th class='l'>published finding</th><th class='l'>as published</th>"
                     "<th class='l'>fwlab (this run)</th><th class='l'>criterion</th><th class='l'>verdict</th></tr>")
        for f in cmp.findings:
            parts.append(f"<tr><td class='l'>{_e(f.claim)}</td><td class='l'>{_e(f.published)}</td>"
                         f"<td class='l'>{_e(f.fwlab)}</td><td class='l'>{_e(f.criterion)}</td>"
                         f"<td class='l {_CLASS[f.verdict]}'><b>{_e(f.verdict)}</b>"
                         + (f"<br><span class='muted'>{_e(f.reason)}</span>" if f.reason and f.reason != f.fwlab
                            else "") + "</td></tr>")
        parts.append("</table></div>")
    if cmp.scaling:
        parts.append("<details open><summary>How the study was scaled to this test bed</summary><ul>"
                     + "".join(f"<li>{_e(s)}</li>" for s in cmp.scaling) + "</ul></details>")
    for t in cmp.tables:
        parts.append(_table(t))
    notes = [note for t in st.tables.values() for note in t.notes] + list(st.notes)
    if notes:
        parts.append("<details><summary>Notes on the transcription</summary><ul>"
                     + "".join(f"<li>{_e(x)}</li>" for x in notes) + "</ul></details>")
    if cmp.missing:
        parts.append("<p>Not measured by this run:</p><ul>" + "".join(f"<li>{_e(m)}</li>" for m in cmp.missing) + "</ul>")
    return "\n".join(parts)


register(Section(kind="@published", title="As published", render=render, order=10, run_level=True))
