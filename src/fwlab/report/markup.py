"""HTML pieces every report section builds from: escaped text, a number or a dash, a table.

Owns: the markup shared by the report's page and its sections (no page layout, no figures).
"""

from __future__ import annotations

import html


def esc(x) -> str:
    """``x`` as text safe inside HTML."""
    return html.escape(str(x))


def fmt(v, digits=1):
    """``v`` with ``digits`` decimals, or a dash when missing."""
    if v is None:
        return "–"
    return f"{v:.{digits}f}"


def table(headers: list[str] | None, rows: list[list], left: int = 1) -> str:
    """An HTML table; ``headers`` None for a key-value table without a header row."""
    out = ["<div class='scroll'><table>"]
    if headers:
        out.append("<tr>")
        out += [f"<th class='l'>{esc(h)}</th>" if i < left else f"<th>{esc(h)}</th>" for i, h in enumerate(headers)]
        out.append("</tr>")
    for r in rows:
        out.append("<tr>" + "".join(f"<td class='l'>{c}</td>" if i < left else f"<td>{c}</td>"
                                    for i, c in enumerate(r)) + "</tr>")
    out.append("</table></div>")
    return "".join(out)
