"""Reports from a stored run record: summary figures (``summary``), SVG plots (``plots``) and
the HTML page (``html``). Reads the record only, never a live run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from fwlab.files import write_output
from fwlab.webpage import write_plotly_js
from fwlab.stats.run_summary import point_summaries
from fwlab.results.record import REPORT_FILE, SUMMARY_FILE, RunRecord
from fwlab.results.trial import as_records

if TYPE_CHECKING:
    from fwlab.results.curves import Curve


def write_report(run_dir: Path, appendix_html: str | None = None) -> Path:
    """report.html and summary.csv (and plotly.min.js beside the page for its interactive plots); `appendix_html` (e.g. the "changed since" section that
    `fwlab report --against` builds) goes at the end of the page."""
    from fwlab.published.compare import write_findings
    from fwlab.report import html
    from fwlab.report.summary import curves, summary_csv

    rec = RunRecord.open(run_dir)
    read = rec.read()  # tolerant: a damaged line is named in the report, not fatal
    trials = as_records(read.trials)  # the read boundary: typed records from here on
    cs = curves(trials)
    write_output(rec.path / SUMMARY_FILE, summary_csv(cs), "summary")
    write_findings(rec.path, rec.run, read.trials)   # findings.json: the published findings' verdicts
    out = rec.path / REPORT_FILE
    page = html.render(rec.run, trials, cs, SUMMARY_FILE, state=rec.state(read))
    if appendix_html:
        end = page.rfind("</body>")
        page = page[:end] + appendix_html + "\n" + page[end:] if end >= 0 else page + appendix_html
    write_output(out, page, "report")
    write_plotly_js(page, rec.path, write_output)  # beside the page: its interactive plots open offline
    return out


def prepare() -> None:
    """Import what :func:`write_report` draws with (the plotting library: about a second of CPU),
    so that a run can do it beside its first bed's set-up (``fwlab.run.start.start(prepare=...)``)."""
    from fwlab.report import cpu, html, parallel  # noqa: F401


def print_summary(run_dir: Path, stream: TextIO) -> None:
    """A short terminal table: per curve, the primary figure (median) per rule count and % of the
    0-rule reference (mean ratio) with its 95 % Fieller interval in brackets. Where that reference
    is pooled over layouts (linear and set), the line names it and shows its mean, the figure the
    percentages are of; the curve's own 0-rule median is then labelled as its own."""
    from fwlab.results.curves import METRIC_INFO, curves, primary_metric

    rec = RunRecord.open(run_dir)
    read = rec.read()
    stream.write(f"record: {rec.state(read).sentence()}\n")
    _precision_line(rec.run, read.trials, stream)
    from fwlab.report.kernel_cost import summary_lines

    cost = summary_lines(read.trials)
    for line in cost:
        stream.write(line + "\n")
    cs = curves(read.trials)
    if cost and cs:
        stream.write("Rates through the whole bed (capacity; on one host the generator shares the DUT's CPUs, so "
                     "these move with the host's load; the in-kernel figures above do not):\n")
    by_curve: dict[tuple, list] = {}
    for ps in point_summaries(cs):
        by_curve.setdefault(ps.curve.key, []).append(ps)
    for c in cs:
        m = primary_metric(c)
        _, unit, scale = METRIC_INFO[m]
        pooled = _pooled_reference_cell(c, m, scale)
        cells = [pooled] if pooled else []
        for ps in by_curve.get(c.key, []):
            n, s = ps.rules, ps.metrics.get(m)
            if s is None:
                cells.append(f"{n}r: missing")
                continue
            if n == 0 and pooled:
                cells.append(f"own 0r median {s.median * scale:.1f}")
                continue
            pct = ""
            if s.pct_of_0_rules is not None and n:
                pct = f" ({s.pct_of_0_rules:.0f}%"
                pct += (f" [{s.pct_of_0_rules_ci95_low:.0f}–{s.pct_of_0_rules_ci95_high:.0f}])"
                        if s.pct_of_0_rules_ci95_low is not None and s.pct_of_0_rules_ci95_high is not None
                        else " [no interval])")
            cells.append(f"{n}r {s.median * scale:.1f}{pct}")
        stream.write(f"{c.traffic_label:<28} {c.label:<28} [{unit}] " + "  ".join(cells) + "\n")


def summary_document(run_dir: Path) -> dict:
    """The record's computed summary as one JSON-safe document (``fwlab run/report --json``):
    where the record is, its state, and summary.csv's rows (``fwlab.stats.run_summary``: the
    same values the CSV and the page show), each with its ``key`` (`row_key`)."""
    from fwlab.results.curves import curves

    rec = RunRecord.open(run_dir)
    read = rec.read()
    state = rec.state(read)
    suite = rec.run.get("suite") or {}
    return {"record": str(rec.path), "report": str(rec.path / REPORT_FILE), "summary_csv": str(rec.path / SUMMARY_FILE),
            "suite": suite.get("name") if isinstance(suite, dict) else None,
            "status": rec.run.get("status"), "complete": state.complete, "state": state.sentence(),
            "trials": {"recorded": len(read.trials), "failed": sum(1 for t in read.trials if t.get("error"))},
            "failures": failures(rec.run, read.trials),
            "figures": [{"key": ps.key(), **_json_safe(ps.row())} for ps in point_summaries(curves(read.trials))]}


def failures(run: dict, trials: list[dict]) -> list[str]:
    """What failed in a record, one line each: a trial that ended with an error, a verdict check
    of an imported rule set that mismatched (``ruleset_import.probes``), a run marked failed.
    Empty for a record that measured everything it tried (the CLI's exit status 0; else 1)."""
    out = [f"trial {t.get('trial_id')}: {' '.join(str(t['error']).splitlines())}" for t in trials if t.get("error")]
    imp = run.get("ruleset_import") if isinstance(run.get("ruleset_import"), dict) else {}
    out += [f"verdict check {p.get('class_id')}: {p.get('why')}" for p in imp.get("probes") or []
            if isinstance(p, dict) and p.get("status") == "mismatch"]
    if run.get("status") == "failed" and not out:
        out.append(f"run: {run.get('error') or 'marked failed'}")
    return out


def _json_safe(row: dict) -> dict:
    return {k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}


def _pooled_reference_cell(curve: Curve, metric: str, scale: float) -> str | None:
    """The pooled 0-rule reference the curve's percentages are of (its mean), named as pooled;
    None when the curve's reference is its own 0-rule point."""
    ref = curve.shared_ref
    values = (ref.values.get(metric) or []) if ref is not None else []
    if not values:
        return None
    mean = sum(values) / len(values)
    return (f"0-rule reference (pooled {'+'.join(curve.shared_with)}, mean of {len(values)}) "
            f"{mean * scale:.1f}")


def _precision_line(run: dict, trials: list[dict], stream: TextIO) -> None:
    """Adaptive repetitions: how many figures reached the precision, which hit the maximum."""
    from fwlab.report.section_precision import rule_of
    from fwlab.stats.precision import outcome

    rule = rule_of(run)
    if rule is None:
        return
    rec = outcome(trials, rule)
    at_max = [f.figure for f in rec.figures if f.status == "max-reached"]
    stream.write(f"precision: {rec.met} of {rec.total} figures reached ±{100 * rule.precision:g} % (95 % t interval) "
                 f"with {rule.min_repetitions}..{rule.max_repetitions} repetitions"
                 + (f"; {len(at_max)} hit the maximum without it: {', '.join(at_max)}" if at_max else "") + "\n")
