"""The report's jinja2 templates (package data under ``fwlab/report/templates``).

Owns: nothing but the name of the report's template package; the environment and its trust rule
(every value escaped unless ``markupsafe.Markup``: HTML that a report module built from escaped
parts, such as an inline SVG plot, a section's fragment or ``markup.esc`` text) are
fwlab.webpage's. Text from a record (a suite's name, a trial's error, a rule's text) is never
Markup by itself.
"""

from __future__ import annotations

from markupsafe import Markup

from fwlab import webpage

__all__ = ["Markup", "macro", "render"]


def render(name: str, **context) -> Markup:
    """Template ``name`` rendered with ``context``, as Markup (it is escaped HTML already)."""
    return webpage.render("fwlab.report", name, **context)


def macro(template: str, name: str):
    """The macro ``name`` of ``template`` (e.g. the shared table), callable from Python."""
    return getattr(webpage.environment("fwlab.report").get_template(template).module, name)
