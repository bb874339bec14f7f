"""The report's "Changed since" section: this run against an older one, by `fwlab compare`'s rules.

Owns: turning a `fwlab.analysis.compare.RunComparison` (old run = A, the baseline; this run = B)
into one HTML section - a line counting figures and significant changes, then a table per figure
(old and new mean in the report's units, % change with its 95 % interval, the verdict of Welch's
t-test at alpha 0.05 and its p), significant changes first - and the figures only one run holds.
Never computes statistics itself (`fwlab.stats.compare_figure` does) and never touches the page
around it (`fwlab.report.write_report` places it).
"""

from __future__ import annotations

import html
from pathlib import Path

from fwlab.analysis.compare import RunComparison, compare_runs, human_value
from fwlab.stats import SIGNIFICANT, NoiseModel
from fwlab.stats.compare import RATIO_SOURCE

__all__ = ["changed_since_html", "render_changed_since"]

_ORDER = {SIGNIFICANT: 0, "not significant": 1, "insufficient data": 2}
DRIFT = "reference: the runs' drift (not tested)"
"""The verdict cell of a reference in ratio mode (`RunComparison.drift`)."""


def render_changed_since(cmp: RunComparison) -> str:
    """HTML section for run B (this run) against run A (the older run)."""
    rows = []
    ordered = sorted(cmp.comparisons, key=lambda c: (_ORDER.get(c.verdict, 3), str(c.label)))
    for c in ordered + sorted(cmp.drift, key=lambda c: str(c.label)):
        drift = c in cmp.drift
        if c.change_pct is None:
            change = "n/a"
        elif c.threshold_pct is None:
            change = f"{c.change_pct:+.1f}%"
        else:
            change = f"{c.change_pct:+.1f}% [{c.change_pct - c.threshold_pct:+.1f}, {c.change_pct + c.threshold_pct:+.1f}]"
        def val(v, c=c):
            if v is None:
                return ""
            return f"{100.0 * v:.1f} % of its run's reference" if c.baseline_source == RATIO_SOURCE else human_value(c.key, v)
        old, new = val(c.mean_a), val(c.mean_b)
        style = " style='font-weight:bold'" if c.verdict == SIGNIFICANT and not drift else ""
        p = "" if c.p_value is None or drift else f"{c.p_value:.3g}"
        verdict = DRIFT if drift else c.verdict
        rows.append(f"<tr{style}><td>{html.escape(c.label)}</td><td>{old} (n={c.n_a})</td><td>{new} (n={c.n_b})</td>"
                    f"<td>{change}</td><td>{verdict}</td><td>{p}</td></tr>")
    parts = [
        "<h2 id='changed-since'>Changed since an earlier run</h2>",
        f"<p>This run against <code>{html.escape(cmp.run_a)}</code> (suite {html.escape(str(cmp.suite_a))}), "
        "by the rules of <code>fwlab compare</code>: a change is significant when Welch's t-test (two-sided, "
        "Welch-Satterthwaite degrees of freedom) gives p &lt; 0.05 (spread from "
        f"{'the noise model where it has the figure, else ' if cmp.noise_used else ''}both runs' "
        "repetitions); the interval is the 95 % interval of the difference of the means (t quantile x its "
        "standard error). "
        f"{html.escape(cmp.mode_line())}. {html.escape(cmp.summary_line())}.</p>",
        "<table><tr><th>figure</th><th>earlier run</th><th>this run</th><th>change [interval]</th>"
        "<th>verdict</th><th>Welch p</th></tr>" + "".join(rows) + "</table>",
    ]
    if cmp.only_a or cmp.only_b:
        parts.append("<p>Only in the earlier run: " + (html.escape(", ".join(cmp.only_a)) or "none")
                     + ". Only in this run: " + (html.escape(", ".join(cmp.only_b)) or "none") + ".</p>")
    return "\n".join(parts)


def changed_since_html(run_dir: Path | str, older: Path | str, noise: NoiseModel | None = None) -> str:
    """The section for `run_dir` against the `older` run."""
    return render_changed_since(compare_runs(older, run_dir, noise=noise))
