"""Side-by-side tables and findings: the common shape of every study's comparison.

Owns: `SideTable` (rows of cells, already formatted, with units in the header), `Finding` (a
published claim, the published figure behind it, fwlab's figure, the criterion and a verdict
computed from the record), `StudyComparison`, the registry of per-study comparisons and small
helpers to pick values out of stored trials. Never touches the test bed; reads trial dicts only.
"""

from __future__ import annotations

import importlib
import pkgutil
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from fwlab.errors import FwlabError
from fwlab.published.model import Study, load_study
from fwlab.registry import Registry
from fwlab.stats import SIGNIFICANT, compare_figure  # noqa: F401  (SIGNIFICANT re-exported)

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
NOT_MEASURED = "not measured"
INCONCLUSIVE = "inconclusive"
"""A 'no effect' finding whose fwlab threshold is too wide to confirm it (a noisy run)."""
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_MEASURED)


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

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise FwlabError(f"verdict {self.verdict!r} is not one of {VERDICTS}", fix="use the constants")

    def sentence(self) -> str:
        return f"{self.claim}: {self.verdict}. {self.fwlab}"


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


def compare_study(run: dict, trials: list[dict], study: str | None = None) -> StudyComparison | None:
    """The comparison for the run's study (or `study`), None when the run names none."""
    study = study or study_of(run)
    if not study:
        return None
    _load_builtin()
    if study not in COMPARATORS:
        raise FwlabError(f"no comparison for study '{study}'", fix=f"use one of {', '.join(COMPARATORS.names())}")
    return COMPARATORS.get(study)(load_study(study), run, trials)


# --- picking values out of stored trials -----------------------------------------------------------

def values(trials: list[dict], metric: str, **match) -> list[float]:
    """`metric` of every successful trial whose fields equal `match` (a callable matches by test)."""
    out = []
    for t in trials:
        if t.get("error") or not t.get("metrics"):
            continue
        ok = True
        for k, want in match.items():
            have = t.get(k)
            if callable(want):
                ok = bool(want(have))
            else:
                ok = have == want
            if not ok:
                break
        if ok and t["metrics"].get(metric) is not None:
            out.append(float(t["metrics"][metric]))
    return out


def distinct(trials: list[dict], name: str, **match) -> list:
    """Sorted distinct values of field `name` among trials matching `match`."""
    seen = {t.get(name) for t in trials if all(t.get(k) == v for k, v in match.items())}
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


def no_effect_verdict(pairs: list[tuple[list[float], list[float]]], floor_pct: float) -> str:
    """Verdict on a 'no effect' finding from (reference, changed) repetitions per point.

    Reproduced when every point keeps at least `floor_pct` % of its reference; not reproduced
    when a point falls below it and the drop is significant (fwlab.stats: outside two standard
    errors of the difference) or cannot be tested (one repetition: the ratio decides, as the
    seeds did); inconclusive when every point below the floor is within the noise.
    """
    below_sig = below_noise = False
    for ref, other in pairs:
        r = ratio_pct(other, ref)
        if r is None or r >= floor_pct:
            continue
        c = change(ref, other)
        if c is None or c.significant_2sigma is None or c.significant_2sigma:
            below_sig = True
        else:
            below_noise = True
    if below_sig:
        return NOT_REPRODUCED
    return INCONCLUSIVE if below_noise else REPRODUCED
