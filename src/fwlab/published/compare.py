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
from fwlab.files import write_output
from fwlab.linerate import LineRate
from fwlab.published.model import Study, load_study
from fwlab.registry import Registry
from fwlab.stats import MIN_REPETITIONS, SIGNIFICANT, compare_figure  # noqa: F401  (SIGNIFICANT re-exported)
from fwlab.stats.ratio import RatioInterval, product_ratio_interval, ratio_interval
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


@dataclass(frozen=True)
class Limit:
    """A quality flag that says something other than the firewall set a figure."""

    headline: str
    """How a headline names it beside a percentage, e.g. 'sender-CPU-bound'."""
    why: str
    """What it means for a figure, as a finding's reason says it."""
    undecides: bool = True
    """Whether it makes a decided finding inconclusive (`LIMIT_FLAGS`)."""


LIMITS: dict[str, Limit] = {
    "generator-short": Limit("generator-short", "the traffic generator fell short of its intended load"),
    "cpu-saturated": Limit("sender-CPU-bound",
                           "the sender's CPU was saturated (on veth it also does the DUT's forwarding)"),
    "client-cpu-bound": Limit("client-CPU-bound", "the clients' CPU was the limit"),
    "flood-generator-short": Limit("flood-generator-short", "the flood generator fell short of its intended rate"),
    "max-load-passed": Limit("at the search's maximum load",
                             "the search passed its largest load, so the figure is the generator's, a lower bound"),
    "receiver-bound": Limit("receiver-bound", "the receiving process, not the DUT, dropped packets"),
    "flood-ended-early": Limit("flood-ended-early",
                               "the flood ended before the measurement did, so part of it ran without the flood"),
    "generator-skew": Limit("generator-skew",
                            "the generators (or a bidirectional trial's two senders, or the client/server pairs) "
                            "sent together for only part of a trial, so the aggregate overstates the load"),
    "delayline-limited": Limit("capped by the delay line",
                               "the emulated delay line (link_delay) dropped frames or fell behind, so it set the "
                               "figure"),
    "link-limited": Limit("capped by the emulated wire", "the emulated wire (link_rate) capped the figure",
                          undecides=False),
    "loss-below-capacity": Limit("loss-onset below its forwarding rate",
                                 "the search's result lies far below the rate the DUT forwarded in a lossy trial: "
                                 "transients (CPU stalls, bursts into its receive ring) set it, not the per-packet "
                                 "cost", undecides=False),
}
"""The one table of limiting quality flags (codes the runners write on a trial): how a headline
names each and what it means for a figure. An older record's ``search-max-load-passed`` is read
as ``max-load-passed`` (`fwlab.results.trial.RENAMED_FLAGS`). `link-limited` does not undecide a
finding: an emulated wire capping the figure is the seeds' own regime (the headline still names
it), except that it cannot refute a claim that a figure falls (`WIRE_HIDES_EFFECTS`). Not here on
purpose: `overran` (stalled streams are what seed 004's "many streams stall" finding looks for).
`loss-below-capacity` (fwlab.methods.rfc2544) does not undecide either: a zero-loss result set by
transients is still what RFC 2544 asks for, but like the wire it caps the high figures, so it
cannot refute a fall (`WIRE_HIDES_EFFECTS`)."""

WIRE_HIDES_EFFECTS = ("link-limited", "loss-below-capacity")
"""Flags that cannot undecide a finding in general but can hide a fall: a claim that a figure falls
(`Finding.judge`'s ``effect``) is not refuted by figures the wire (or the transients a zero-loss
search meets) capped (a fall above that cap cannot show)."""

LIMIT_FLAGS = {code: lim.why for code, lim in LIMITS.items() if lim.undecides}
"""The flags of `LIMITS` that say the generator or a CPU, not the firewall, set the figure: a
finding reading such a trial cannot be reproduced or not reproduced."""


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
              used: list[dict] = (), reason: str = "", weighed: tuple[str, ...] = (), id: str = "",
              effect: bool = False) -> "Finding":
        """A finding whose decided verdict (reproduced / not reproduced) turns inconclusive when a
        trial in `used` carries a limiting quality flag (`LIMIT_FLAGS`) the finding has not
        itself `weighed`; the reason names the flags and the trials. `effect`: the claim is that a
        figure falls, so a 'not reproduced' on figures the wire capped (`WIRE_HIDES_EFFECTS`) is
        inconclusive too."""
        used = as_records(used)
        ids = tuple(str(t.trial_id) for t in used if t.trial_id is not None)
        hides = WIRE_HIDES_EFFECTS if effect and verdict == NOT_REPRODUCED else ()
        lim = limit_reason(used, ignore=weighed, also=hides)
        if verdict in DECIDED and lim:
            reason = f"{lim}; the numbers alone would say '{verdict}'"
            verdict = INCONCLUSIVE
        elif verdict == INCONCLUSIVE and lim and lim not in reason:
            # undecided by the numbers, and the figures are not the firewall's anyway: say both
            reason = f"{reason}; besides, {lim}" if reason else lim
        return cls(claim=claim, published=published, fwlab=fwlab, criterion=criterion, verdict=verdict,
                   reason=reason, trial_ids=ids, id=id)

    def to_dict(self) -> dict:
        return {"id": self.id, "statement": self.claim, "verdict": self.verdict, "reason": self.reason,
                "trial_ids": list(self.trial_ids), "published": self.published, "fwlab": self.fwlab,
                "criterion": self.criterion}

    def sentence(self) -> str:
        why = f" ({self.reason})" if self.reason and self.reason != self.fwlab else ""
        return f"{self.claim}: {self.verdict}{why}. {self.fwlab}"


def limit_reason(trials, ignore: tuple[str, ...] = (), also: tuple[str, ...] = ()) -> str:
    """'cpu-saturated on 3 of 8 trials (t1, t2, t5): the sender's CPU ...; ...', or '' when no
    trial carries a limiting flag (`LIMIT_FLAGS` and the `LIMITS` codes in `also`, minus `ignore`)."""
    trials = as_records(trials)
    by_code: dict[str, list[str]] = {}
    for t in trials:
        for code in t.flag_codes:
            if (code in LIMIT_FLAGS or code in also) and code not in ignore:
                ids = by_code.setdefault(code, [])
                tid = str(t.trial_id or "?")
                if tid not in ids:
                    ids.append(tid)
    parts = []
    for code, ids in sorted(by_code.items()):
        shown = ", ".join(ids[:4]) + (", ..." if len(ids) > 4 else "")
        parts.append(f"{code} on {len(ids)} of {len(trials)} trials used ({shown}): {LIMITS[code].why}")
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


def link_rates_of(trials: list[TrialRecord]) -> list[LineRate | None]:
    """The emulated link rates the trials ran at (``link_rate_bps``; None: unshaped), the run's own
    first: the order of first appearance, which is the suite's ``link_rate`` order."""
    return list(dict.fromkeys(t.link_rate_bps or None for t in as_records(trials)))


def compare_study(run: dict, trials: list[TrialRecord], study: str | None = None) -> StudyComparison | None:
    """The comparison for the run's study (or `study`), None when the run names none.

    A run at several link rates (suite ``link_rate = ["100mbit", "none"]``) is compared once per
    rate: the run's own (first) rate gives the verdicts; every other rate's tables follow, titled
    with their link ("unshaped bed"), and its findings with ids ending ``@unshaped`` (or ``@1gbit``),
    so both columns of the study are shown."""
    study = study or study_of(run)
    if not study:
        return None
    _load_builtin()
    if study not in COMPARATORS:
        raise FwlabError(f"no comparison for study '{study}'", fix=f"use one of {', '.join(COMPARATORS.names())}")
    trials = as_records(trials)  # the read boundary: the studies read typed records
    from fwlab.results.identity import link_words

    rates = link_rates_of(trials)
    fn = COMPARATORS.get(study)
    if len(rates) <= 1:
        # (a run of a rate list that holds one rate's trials, interrupted, is read at that rate:
        # a comparator reads the rate from the trials, LineRate-typed)
        out = fn(load_study(study), run, trials)
    else:
        own = rates[0]
        out = fn(load_study(study), run, [t for t in trials if (t.link_rate_bps or None) == own])
        out.scaling.insert(0, f"This run measured every trial at {len(rates)} link rates: the verdicts are read on the "
                              f"{link_words(own)} (the run's own, first); "
                              + "the " + ", ".join(link_words(r) for r in rates[1:]) + " follow"
                              + ("s" if len(rates) == 2 else "") + " as a second column: its tables and findings "
                              "are marked so.")
        same = {(t.title, t.rows) for t in out.tables}      # tables of published figures only: shown once
        out.tables = [dataclasses.replace(t, title=f"{t.title} [{link_words(own)}]") for t in out.tables]
        for other in rates[1:]:
            more = fn(load_study(study), run, [t for t in trials if (t.link_rate_bps or None) == other])
            tag = "unshaped" if other is None else other.tc
            out.tables += [dataclasses.replace(t, title=f"{t.title} [{link_words(other)}]") for t in more.tables
                           if (t.title, t.rows) not in same]
            out.findings += [dataclasses.replace(f, id=f"{_base_id(study, f)}@{tag}",
                                                 claim=f"{f.claim} [{link_words(other)}]") for f in more.findings]
    seen: dict[str, int] = {}
    for i, f in enumerate(out.findings):
        base = f.id or f"{study}/{_slug(f.claim)}"
        seen[base] = seen.get(base, 0) + 1
        fid = base if seen[base] == 1 else f"{base}-{seen[base]}"
        if fid != f.id:
            out.findings[i] = dataclasses.replace(f, id=fid)
    return out


def _base_id(study: str, f: "Finding") -> str:
    return f.id or f"{study}/{_slug(f.claim)}"


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
    write_output(path, json.dumps(cmp.findings_json(), indent=1, sort_keys=True) + "\n", "findings file")
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
        if ok and t.metric(metric) is not None:
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


# --- how a verdict is decided: on an interval, never on a point estimate ----------------------------

DECISION_RULE = (
    "A verdict is decided on an interval, never on a point estimate: a difference must be significant "
    "(Welch's t-test, two-sided, alpha 0.05, fwlab.stats) and a figure compared with a limit (at least "
    "90 %, at most 75 %, 30-70 %, within +-10 %) must have its whole 95 % interval (the ratio's "
    "Fieller interval; a ratio of ratios on the log scale) on one side of the limit: entirely on the "
    "claim's side -> reproduced, entirely on the other -> not reproduced, across it -> inconclusive "
    "('difference within noise at n repetitions'). One repetition gives no spread and so no interval: "
    f"such a finding is inconclusive ('one repetition: no interval', a decision needs >= {MIN_REPETITIONS} "
    "repetitions per side), whatever the ratio says. No figures at all -> not measured.")
"""The one rule every finding in fwlab.published decides by (the seeds printed single figures; fwlab
does not decide on one)."""


def no_interval(n: int) -> str:
    """The reason of an inconclusive verdict whose figures have `n` (< 2) repetitions on a side."""
    return (f"{n} repetition{'s' if n != 1 else ''}: no interval to decide by (a verdict needs >= "
            f"{MIN_REPETITIONS} repetitions per side)")


def within_noise(n: int) -> str:
    return f"difference within noise at {n} repetitions"


def undecided_reason(c) -> str:
    """Why a `change` does not decide: one repetition (no interval), or within the noise."""
    if c is None:
        return "no figures on both sides"
    n = min(c.n_a, c.n_b)
    if n < MIN_REPETITIONS or c.significant is None:
        return no_interval(n) if n < MIN_REPETITIONS else f"no spread to judge the difference by at {n} repetitions"
    return within_noise(n)


def decides(c) -> bool:
    """Whether a `change` may decide a verdict: the difference is significant (Welch's t-test,
    alpha 0.05, `fwlab.stats`). Not when there is no comparison or it cannot be tested (one
    repetition: no interval; see `DECISION_RULE`)."""
    return c is not None and c.significant is True


def ratio_ci(num: list[float], den: list[float]) -> RatioInterval | None:
    """mean(num) / mean(den) with its 95 % Fieller interval (None when a side is empty)."""
    if not num or not den:
        return None
    return ratio_interval(num, den)


def ratio_of_ratios_ci(nums: list[list[float]], dens: list[list[float]]) -> RatioInterval | None:
    """prod(mean(nums)) / prod(mean(dens)) with its 95 % interval (log scale, delta method)."""
    if not all(nums) or not all(dens):
        return None
    return product_ratio_interval(nums, dens)


def _n(iv: RatioInterval) -> int:
    return min(iv.n_num, iv.n_den)


def side(iv: RatioInterval, limit: float, scale: float = 100.0) -> int | None:
    """Where the interval of `iv` (times `scale`, e.g. % ) lies against `limit`: +1 entirely at or
    above it, -1 entirely below, 0 across it, None without an interval (one repetition)."""
    if iv is None or not iv.has_interval:
        return None
    lo, hi = scale * iv.low, scale * iv.high
    if lo >= limit:
        return 1
    if hi < limit:
        return -1
    return 0


def fmt_ci(iv: RatioInterval | None, scale: float = 100.0, digits: int = 1, unit: str = "%") -> str:
    """'48.2 % [44.0, 52.9]' (the interval at 95 %), or '48.2 % (1 repetition, no interval)'."""
    if iv is None:
        return "–"
    v = f"{scale * iv.ratio:.{digits}f}"
    if not iv.has_interval:
        return f"{v} {unit} (no interval: {_n(iv)} repetition{'s' if _n(iv) != 1 else ''})".replace("  ", " ")
    return f"{v} {unit} [{scale * iv.low:.{digits}f}, {scale * iv.high:.{digits}f}]".replace("  ", " ")


def bound_verdict(ivs: list[RatioInterval | None], limit: float, *, at_least: bool,
                  scale: float = 100.0) -> tuple[str, str]:
    """(verdict, reason) on 'every figure is at least `limit`' (`at_least`) or 'every figure is
    below `limit`' from their intervals (times `scale`): reproduced when every interval lies
    entirely on the claim's side, not reproduced when one lies entirely on the other side, else
    inconclusive; no interval at all -> not measured (see `DECISION_RULE`)."""
    ivs = [iv for iv in ivs if iv is not None]
    if not ivs:
        return NOT_MEASURED, "no figures on both sides"
    want = 1 if at_least else -1
    sides = [side(iv, limit, scale) for iv in ivs]
    if any(sd == -want for sd in sides):
        return NOT_REPRODUCED, ""
    if all(sd == want for sd in sides):
        return REPRODUCED, ""
    one = [_n(iv) for iv, sd in zip(ivs, sides, strict=True) if sd is None]
    if one:
        return INCONCLUSIVE, no_interval(min(one))
    n = min(_n(iv) for iv, sd in zip(ivs, sides, strict=True) if sd == 0)
    return INCONCLUSIVE, (f"an interval spans the limit of {limit:g}: {within_noise(n)}")


def range_verdict(ivs: list[RatioInterval | None], low: float, high: float,
                  scale: float = 100.0) -> tuple[str, str]:
    """(verdict, reason) on 'every figure lies in [low, high]': reproduced when every interval
    lies inside, not reproduced when one lies entirely outside, else inconclusive."""
    ivs = [iv for iv in ivs if iv is not None]
    if not ivs:
        return NOT_MEASURED, "no figures on both sides"
    outside = inside = 0
    one, across = [], []
    for iv in ivs:
        if not iv.has_interval:
            one.append(_n(iv))
            continue
        lo, hi = scale * iv.low, scale * iv.high
        if hi < low or lo > high:
            outside += 1
        elif low <= lo and hi <= high:
            inside += 1
        else:
            across.append(_n(iv))
    if outside:
        return NOT_REPRODUCED, ""
    if inside == len(ivs):
        return REPRODUCED, ""
    if one:
        return INCONCLUSIVE, no_interval(min(one))
    return INCONCLUSIVE, f"an interval spans a limit of {low:g}-{high:g}: {within_noise(min(across))}"


def within_verdict(iv: RatioInterval | None, pct: float) -> tuple[str, str]:
    """(verdict, reason) on an equivalence claim 'B is within +-`pct` % of A' from the interval of
    B / A: reproduced when the whole interval of the difference lies inside +-pct %, not
    reproduced when it lies entirely outside, else inconclusive."""
    return range_verdict([iv], 100.0 - pct, 100.0 + pct)


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
    """(verdict, reason) on a 'no effect' finding from (reference, changed) repetitions per point:
    `bound_verdict` on every point's changed / reference interval against `floor_pct` % —
    reproduced when every interval lies at or above the floor, not reproduced when one lies
    entirely below it, inconclusive when one spans it or has one repetition (`DECISION_RULE`);
    not measured without any point."""
    return bound_verdict([ratio_ci(other, ref) for ref, other in pairs], floor_pct, at_least=True)


def direction_verdict(c, b_above: bool) -> tuple[str, str]:
    """(verdict, reason) on a 'B is above A' (or below, `b_above` False) finding from a
    `change(a, b)`: reproduced / not reproduced when the difference is significant; inconclusive
    when it is within the noise or the repetitions give no spread (one repetition: no interval)."""
    if c is None or c.change_pct is None:
        return NOT_MEASURED, "no figures on both sides"
    n = min(c.n_a, c.n_b)
    if c.significant is None:
        return INCONCLUSIVE, undecided_reason(c)
    if not c.significant:
        against = (f"against a threshold of {c.threshold_pct:.1f} %" if c.threshold_pct is not None
                   else f"p = {c.p_value:.2g}")   # the permutation test (no spread) has no threshold
        return INCONCLUSIVE, f"{within_noise(n)} ({c.change_pct:+.1f} % {against})"
    return (REPRODUCED if (c.mean_b > c.mean_a) == b_above else NOT_REPRODUCED), ""
