"""Report sections for trial kinds other than plain streams, one registry.

Owns: the mapping trial kind -> a function that renders that kind's trials as an HTML fragment
(headline tables and plots). A new test kind (search, connections, http, ...) registers its
section in its own module (``fwlab.report.section_<kind>``) and imports nothing from the others.
Sections read the record only, never a live run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fwlab.errors import RecordError
from fwlab.registry import Registry
from fwlab.results.trial import TrialRecord, as_records


@dataclass(frozen=True)
class Section:
    """``render(run, trials)`` gets run.json and this kind's trials; returns HTML or None."""

    kind: str
    title: str
    render: Callable[[dict, list[dict]], str | None]
    order: int = 50  #: position on the page among sections (lower first)
    run_level: bool = False  #: gets every trial and renders near the top (after the overview), whatever the kinds


SECTIONS: Registry[Section] = Registry("report section", RecordError)


def register(section: Section) -> Section:
    return SECTIONS.add(section.kind, section)


def render_sections(run: dict, trials: list[TrialRecord], run_level: bool = False) -> list[str]:
    """The HTML of every registered section whose kind occurs in ``trials``, in order; with
    ``run_level`` the run-level sections instead (each gets all trials)."""
    trials = as_records(trials)
    _load_builtin()
    kinds = {t.kind for t in trials}
    out = []
    for s in sorted((SECTIONS.get(n) for n in SECTIONS.names()), key=lambda s: (s.order, s.kind)):
        if s.run_level != run_level or (not run_level and s.kind not in kinds):
            continue
        html = s.render(run, trials if run_level else [t for t in trials if t.kind == s.kind])
        if html:
            out.append(html)
    return out


def _load_builtin() -> None:
    """Import the section modules shipped with fwlab (each registers itself)."""
    import importlib
    import pkgutil

    import fwlab.report as pkg

    for m in pkgutil.iter_modules(pkg.__path__):
        if m.name.startswith("section_"):
            importlib.import_module(f"fwlab.report.{m.name}")
