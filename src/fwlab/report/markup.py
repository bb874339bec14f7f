"""HTML pieces every report section builds from: escaped text, a number or a dash, a table.

Owns: the markup shared by the report's page and its sections (no page layout, no figures). The
table is the jinja2 macro in ``templates/macros.html.j2`` (autoescape): a cell is escaped unless it
is HTML the caller marked as such (``esc`` text, or a fragment wrapped in ``raw``).
"""

from __future__ import annotations

import html

from markupsafe import Markup

from fwlab.report.templating import macro


class Html(Markup):
    """HTML text (from :func:`esc` or :func:`raw`): printed as is by a template, and plain text
    again when a section joins it into a longer fragment (``esc(a) + "<br>"``), where ``Markup``
    would escape the other side; the longer fragment is marked again with :func:`raw`."""

    __slots__ = ()

    def __add__(self, other):
        return str.__add__(str(self), other) if isinstance(other, str) else NotImplemented

    def __radd__(self, other):
        return str.__add__(other, str(self)) if isinstance(other, str) else NotImplemented


def esc(x) -> Html:
    """``x`` as text safe inside HTML."""
    return Html(html.escape(str(x)))


def raw(fragment: str) -> Html:
    """``fragment``, HTML its caller built from escaped parts, to be shown as is (a table cell
    holding a tooltip or a line break); anything else in a cell is escaped."""
    return Html(fragment)


def fmt(v, digits=1):
    """``v`` with ``digits`` decimals, or a dash when missing."""
    if v is None:
        return "–"
    return f"{v:.{digits}f}"


def table(headers: list[str] | None, rows: list[list], left: int = 1) -> str:
    """An HTML table; ``headers`` None for a key-value table without a header row. Cells and
    headers are escaped unless Markup (:func:`esc`, :func:`raw`); the first ``left`` columns are
    left-aligned."""
    return str(macro("macros.html.j2", "table")(headers, rows, left))
