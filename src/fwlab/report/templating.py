"""The report's jinja2 templates (package data under ``fwlab/report/templates``).

Owns: the one template environment of the report and the trust rule of its pages: every value a
template prints is escaped (autoescape) unless it is ``markupsafe.Markup`` — HTML that a report
module built from escaped parts (an inline SVG plot, a section's fragment, ``markup.esc`` text).
Text from a record (a suite's name, a trial's error, a rule's text) is never Markup by itself.
"""

from __future__ import annotations

from functools import lru_cache

import jinja2
from markupsafe import Markup

__all__ = ["Markup", "environment", "macro", "render"]


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """Autoescaping, strict (an undefined name is an error, not an empty string), and with no
    whitespace of its own: the templates' layout newlines are not in the page."""
    return jinja2.Environment(loader=jinja2.PackageLoader("fwlab.report", "templates"),
                              autoescape=True, undefined=jinja2.StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False)


def render(name: str, **context) -> Markup:
    """Template ``name`` rendered with ``context``, as Markup (it is escaped HTML already)."""
    return Markup(environment().get_template(name).render(**context))


def macro(template: str, name: str):
    """The macro ``name`` of ``template`` (e.g. the shared table), callable from Python."""
    return getattr(environment().get_template(template).module, name)
