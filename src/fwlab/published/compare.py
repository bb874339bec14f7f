"""Side-by-side tables and findings: the common shape of every study's comparison.

Owns: `SideTable` (rows of cells, already formatted, with units in the header), `Finding` (a
published claim, the published figure behind it, fwlab's figure, the criterion and a verdict
computed from the record), `StudyComparison`, the registry of per-study comparisons and small
helpers to pick values out of stored trials. Never touches the test bed; reads trial dicts only.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import pkgutil
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fwlab.errors import FwlabError
from fwlab.published.model import Study, load_study
from fwlab.registry import Registry
from fwlab.stats import SIGNIFICANT, compare_figure  # noqa: F401  (SIGNIFICANT re-exported)
from fwlab.results.trial import TrialRecord, as_records

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
NOT_MEASURED = "not measured"
INCONCLUSIVE = "inconclusive"
"""The run cannot decide: a quality flag on the trials used says the generator or a CPU was the
limit, or the difference is within the noise of the repetitions; the reason says which."""
NOT_TESTABLE = "not testable here"
"""This bed cannot produce a negative verdict (or any) for the finding; the reason says why."""
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_MEASURED, NOT_TESTABLE)
DECIDED = (REPRODUCED, NOT_REPRODUCED)
NEEDS_REASON = (INCONCLUSIVE, NOT_MEASURED, NOT_TESTABLE)

LIMIT_FLAGS = {
    "generator-short": "the traffic generator fell short of its intended load",
    "cpu-saturated": "the sender's CPU was saturated (on veth it also does the DUT's forwarding)",
    "client-cpu-bound": "the clients' CPU was the limit",
    "flood-generator-short": "the flood generator fell short of its intended rate",
    "max-load-passed": "the search passed its largest load, so the figure is the generator's, a lower bound",
    "receiver-bound": "the receiving process, not the DUT, dropped packets",
    "flood-ended-early": "the flood ended before the measurement did, so part of it ran without the flood",
}
"""Quality flags (codes the runners write on a trial) that say the generator or a CPU, not the
firewall, set the figure: a finding reading such a trial cannot be reproduced or not reproduced.
Not here on purpose: `link-limited` (an emulated wire capping the figure is the seeds' own
regime; the headline still names it) and `overran` (stalled streams are what seed 004's
"many streams stall" finding looks for)."""


@dataclass(frozen=True)
class SideTable:
    """A table with the published figures and fwlab's in neighbouring columns."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""
    left: int = 1
    """How many leading columns hold text (left-aligned)."""


@dataclass(frozen=True)
class Finding:
    claim: str
    """The study's finding in one sentence."""
    published: str
    """The published figures behind it."""
    fwlab: str
    """fwlab's figures, in a sentence computed from the record."""
    criterion: str
    """When fwlab counts it as reproduced."""
    verdict: str
    reason: str = ""
    """Why the verdict is inconclusive, not measured or not testable here (empty when decided)."""
    trial_ids: tuple[str, ...] = ()
    """The trials whose figures the verdict read."""
    id: str = ""
    """A stable machine name, e.g. 'seed-001/rules-flat' (set by `compare_study` when empty)."""

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise FwlabError(f"verdict {self.verdict!r} is not one of {VERDICTS}", fix="use the constants")
        if self.verdict == NOT_MEASURED and not self.reason:
            object.__setattr__(self, "reason", self.fwlab)
        if self.verdict in NEEDS_REASON and not self.reason:
            raise FwlabError(f"finding {self.claim!r} is {self.verdict} without a reason", fix="give the reason")

    @classmethod
    def judge(cls, *, claim: str, published: str, fwlab: str, criterion: str, verdict: str,
              used: list[dict] = (), reason: str = "", weighed: tuple[str, ...] = (), id: str = "") -> "Finding":
        """A finding whose decided verdict (reproduced / not reproduced) turns inconclusive when a
        trial in `used` carries a limiting quality flag (`LIMIT_FLAGS`) the finding has not
        itself `weighed`; the reason names the flags and the trials."""
        used = as_records(used)
        ids = tuple(str(t.trial_id) for t in used if t.trial_id is not None)
        if verdict in DECIDED:
            lim = limit_reason(used, ignore=weighed)
            if lim:
                reason = f"{lim}; the numbers alone would say '{verdict}'"
                verdict = INCONCLUSIVE
        return cls(claim=claim, published=published, fwlab=fwlab, criterion=criterion, verdict=verdict,
                   reason=reason, trial_ids=ids, id=id)

    def to_dict(self) -> dict:
        return {"id": self.id, "statement": self.claim, "verdict": self.verdict, "reason": self.reason,
                "trial_ids": list(self.trial_ids), "published": self.published, "fwlab": self.fwlab,
                "criterion": self.criterion}

    def sentence(self) -> str:
        why = f" ({self.reason})" if self.reason and self.reason != self.fwlab else ""
        return f"{self.claim}: {self.verdict}{why}. {self.fwlab}"


def limit_reason(trials, ignore: tuple[str, ...] = ()) -> str:
    """'cpu-saturated on 3 of 8 trials (t1, t2, t5): the sender's CPU ...; ...', or '' when no
    trial carries a limiting flag (`LIMIT_FLAGS`, minus `ignore`)."""
    trials = as_records(trials)
    by_code: dict[str, list[str]] = {}
    for t in trials:
        for code in t.flag_codes:
            if code in LIMIT_FLAGS and code not in ignore:
                ids = by_code.setdefault(code, [])
                tid = str(t.trial_id or "?")
                if tid not in ids:
                    ids.append(tid)
    parts = []
    for code, ids in sorted(by_code.items()):
        shown = ", ".join(ids[:4]) + (", ..." if len(ids) > 4 else "")
        parts.append(f"{code} on {len(ids)} of {len(trials)} trials used ({shown}): {LIMIT_FLAGS[code]}")
    return "; ".join(parts)


@dataclass
class StudyComparison:
    study: Study
    scaling: list[str] = field(default_factory=list)
    """How the study's parameters were mapped to this test bed."""
    tables: list[SideTable] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    """Experiments of the study this run does not measure, each with the reason."""

    def counts(self) -> dict[str, int]:
        return {v: sum(1 for f in self.findings if f.verdict == v) for v in VERDICTS}

    def findings_json(self) -> dict:
        """The verdicts as a program reads them (written beside the record as findings.json)."""
        return {"study": self.study.study, "verdicts": list(VERDICTS),
                "counts": self.counts(), "findings": [f.to_dict() for f in self.findings]}


Comparator = Callable[[Study, dict, list[dict]], StudyComparison]
COMPARATORS: Registry[Comparator] = Registry("published-study comparison")


def register(study: str) -> Callable[[Comparator], Comparator]:
    def add(fn: Comparator) -> Comparator:
        COMPARATORS.add(study, fn)
        return fn
    return add


def _load_builtin() -> None:
    import fwlab.published as pkg

    for m in pkgutil.iter_modules(pkg.__path__):
        if m.name.startswith("study_"):
            importlib.import_module(f"fwlab.published.{m.name}")


def study_of(run: dict) -> str | None:
    """The study a run is set beside: the suite's ``study`` field (None when it names none)."""
    return ((run.get("suite") or {}).get("parsed") or {}).get("study")


def compare_study(run: dict, trials: list[TrialRecord], study: str | None = None) -> StudyComparison | None:
    """The comparison for the run's study (or `study`), None when the run names none."""
    study = study or study_of(run)
    if not study:
        return None
    _load_builtin()
    if study not in COMPARATORS:
        raise FwlabError(f"no comparison for study '{study}'", fix=f"use one of {', '.join(COMPARATORS.names())}")
    trials = as_records(trials)  # the read boundary: the studies read typed records
    out = COMPARATORS.get(study)(load_study(study), run, trials)
    seen: dict[str, int] = {}
    for i, f in enumerate(out.findings):
        base = f.id or f"{study}/{_slug(f.claim)}"
        seen[base] = seen.get(base, 0) + 1
        fid = base if seen[base] == 1 else f"{base}-{seen[base]}"
        if fid != f.id:
            out.findings[i] = dataclasses.replace(f, id=fid)
    return out


def _slug(text: str) -> str:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return "-".join(words[:8])


FINDINGS_FILE = "findings.json"


def write_findings(run_dir, run: dict, trials: list[TrialRecord]):
    """Write the run's verdicts as ``findings.json`` beside the record (None, and nothing written,
    when the run names no study). Returns the path."""
    path = Path(run_dir) / FINDINGS_FILE
    cmp = compare_study(run, trials)
    if cmp is None:
        path.unlink(missing_ok=True)   # a stale file from an earlier study setting would mislead
        return None
    path.write_text(json.dumps(cmp.findings_json(), indent=1, sort_keys=True) + "\n")
    return path


# --- picking values out of stored trials -----------------------------------------------------------

def values(trials: list[TrialRecord], metric: str, **match) -> list[float]:
    """`metric` of every successful trial whose fields equal `match` (a callable matches by test)."""
    return [float(t.metric(metric)) for t in pick(trials, metric, **match)]


def pick(trials: list[TrialRecord], metric: str, **match) -> list[dict]:
    """The successful trials `values` reads (those with `metric`, fields equal to `match`)."""
    out = []
    for t in as_records(trials):
        if t.error or not t.metrics:
            continue
        ok = True
        for k, want in match.items():
            have = getattr(t, k, None)
            if callable(want):
                ok = bool(want(have))
            else:
                ok = have == want
            if not ok:
                break
        if ok and t.metrics.get(metric) is not None:
            out.append(t)
    return out


def distinct(trials: list[TrialRecord], name: str, **match) -> list:
    """Sorted distinct values of field `name` among trials matching `match`."""
    seen = {getattr(t, name, None) for t in as_records(trials)
            if all(getattr(t, k, None) == v for k, v in match.items())}
    return sorted((v for v in seen if v is not None), key=lambda v: (str(type(v)), v))


def mean(v: list[float]) -> float | None:
    return statistics.fmean(v) if v else None


def ratio_pct(num: list[float], den: list[float]) -> float | None:
    a, b = mean(num), mean(den)
    return None if a is None or not b else 100.0 * a / b


def change(base: list[float], other: list[float]):
    """fwlab.stats comparison of `other` against `base` (repetitions; None when either is empty)."""
    if not base or not other:
        return None
    return compare_figure("x", base, other)


def decides(c) -> bool:
    """Whether a `change` may decide a verdict: the difference is significant (Welch's t-test,
    alpha 0.05, `fwlab.stats`), or it cannot be tested (no comparison, or one repetition: the
    ratio decides, as the seeds did)."""
    return c is None or c.significant is None or c.significant


def fmt(v: float | None, digits: int = 1, unit: str = "") -> str:
    if v is None:
        return "–"
    s = f"{v:,.{digits}f}"
    return f"{s} {unit}".rstrip()


def fmt_range(vs: list[float], digits: int = 0, unit: str = "%") -> str:
    vs = [v for v in vs if v is not None]
    if not vs:
        return "–"
    lo, hi = min(vs), max(vs)
    if f"{lo:.{digits}f}" == f"{hi:.{digits}f}":
        return f"{lo:.{digits}f} {unit}".rstrip()
    return f"{lo:.{digits}f}–{hi:.{digits}f} {unit}".rstrip()


def config_name(backend: str, layout: str | None = None, shortcut: bool = False) -> str:
    if backend == "none":
        return "no firewall"
    s = f"{backend} {layout or ''}".strip()
    return s + (" +established" if shortcut else "")


def no_effect_verdict(pairs: list[tuple[list[float], list[float]]], floor_pct: float) -> tuple[str, str]:
    """(verdict, reason) on a 'no effect' finding from (reference, changed) repetitions per point.

    Reproduced when every point keeps at least `floor_pct` % of its reference; not reproduced
    when a point falls below it and the drop is significant (fwlab.stats: Welch's t-test,
    alpha 0.05) or cannot be tested (one repetition: the ratio decides, as the
    seeds did); inconclusive ("difference within noise at n repetitions") when every point
    below the floor is within the noise.
    """
    below_sig = False
    noisy: list[int] = []
    for ref, other in pairs:
        r = ratio_pct(other, ref)
        if r is None or r >= floor_pct:
            continue
        c = change(ref, other)
        if decides(c):
            below_sig = True
        else:
            noisy.append(min(len(ref), len(other)))
    if below_sig:
        return NOT_REPRODUCED, ""
    if noisy:
        return INCONCLUSIVE, (f"below {floor_pct:g} % but the difference is within the noise at "
                              f"{min(noisy)} repetitions")
    return REPRODUCED, ""


def direction_verdict(c, b_above: bool) -> tuple[str, str]:
    """(verdict, reason) on a 'B is above A' (or below, `b_above` False) finding from a
    `change(a, b)`: reproduced / not reproduced when the difference is significant; inconclusive
    when it is within the noise or the repetitions give no spread to judge it by."""
    if c is None or c.change_pct is None:
        return NOT_MEASURED, "no figures on both sides"
    n = min(c.n_a, c.n_b)
    if c.significant is None:
        return INCONCLUSIVE, f"no spread to judge the difference by at {n} repetition(s)"
    if not c.significant:
        against = (f"against a threshold of {c.threshold_pct:.1f} %" if c.threshold_pct is not None
                   else f"p = {c.p_value:.2g}")   # the permutation test (no spread) has no threshold
        return INCONCLUSIVE, f"difference within noise at {n} repetitions ({c.change_pct:+.1f} % {against})"
    return (REPRODUCED if (c.mean_b > c.mean_a) == b_above else NOT_REPRODUCED), ""
