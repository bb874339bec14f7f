"""Report section for a suite with ``precision`` (adaptive repetitions): per figure the
repetitions it took and the interval it reached, figures that hit the maximum without the
precision flagged. Computed from the trial lines with ``fwlab.stats.precision`` (the same rule the
run stopped by), so an interrupted record shows where it stood. Laid out by
templates/section_precision.html.j2."""

from __future__ import annotations

from fwlab.errors import FwlabError
from fwlab.report import templating
from fwlab.report.markup import esc, raw
from fwlab.report.sections import Section, register
from fwlab.results.curves import METRIC_INFO
from fwlab.results.trial import TrialRecord, as_records
from fwlab.stats.precision import INTERVAL, PrecisionRule, figure_id, outcome
from fwlab.suites import parse_suite

STATUS_WORDS = {"met": "met", "max-reached": "hit the maximum without the precision",
                "no-figure": "no value (every repetition failed)", "short": "stopped early (run not finished)"}


def rule_of(run: dict) -> PrecisionRule | None:
    """The rule the run was made with: run.json's ``precision`` block, else its parsed suite."""
    p = run.get("precision")
    try:
        if isinstance(p, dict):
            return PrecisionRule(float(p["precision"]), int(p["min_repetitions"]), int(p["max_repetitions"]))
        parsed = (run.get("suite") or {}).get("parsed") if isinstance(run.get("suite"), dict) else None
        if not isinstance(parsed, dict) or parsed.get("precision") is None:
            return None
        return PrecisionRule.of_suite(parse_suite(parsed, "stored in run.json"))
    except (FwlabError, KeyError, TypeError, ValueError):
        return None


def _value(metric: str | None, v: float | None, digits: int = 2) -> str:
    if v is None:
        return "–"
    _, unit, scale = METRIC_INFO.get(metric or "", (None, "", 1.0))
    return f"{v * scale:.{digits}f} {unit}".strip()


def render(run: dict, trials: list[TrialRecord]) -> str | None:
    rule = rule_of(run)
    if rule is None:
        return None
    records = as_records(trials)
    lines = [t.to_json() for t in records]  # the stopping rule (stats) reads trial lines
    plan = run.get("plan") if isinstance(run.get("plan"), dict) else {}
    ids = plan.get("trial_ids") if isinstance(plan.get("trial_ids"), list) else None
    figures = [figure_id({"trial_id": i}) for i in ids] if ids else None
    rec = outcome(lines, rule, figures)
    first: dict[str, TrialRecord] = {}
    for t, line in zip(records, lines):
        first.setdefault(figure_id(line), t)
    rows = []
    for f in rec.figures:
        t = first.get(f.figure)
        what = f"{t.traffic_label} · {t.config_label} · {t.rules} rules" if t else f.figure
        pct = "–" if f.rel_half_width is None else f"±{100 * f.rel_half_width:.2f} %"
        cls = "ok" if f.status == "met" else "warn"
        rows.append([esc(what), esc(f.metric or "–"), f.repetitions, f.n, _value(f.metric, f.mean),
                     "–" if f.half_width is None else "±" + _value(f.metric, f.half_width, 3), pct,
                     raw(f"<span class='{cls}'>{esc(STATUS_WORDS[f.status])}</span>")])
    return str(templating.render(
        "section_precision.html.j2", rows=rows, met=rec.met, total=rec.total, precision_pct=f"{100 * rule.precision:g}",
        interval=INTERVAL, min_reps=rule.min_repetitions, max_reps=rule.max_repetitions,
        at_max=sum(1 for f in rec.figures if f.status == "max-reached")))


register(Section(kind="@precision", title="Precision", render=render, order=5, run_level=True))
