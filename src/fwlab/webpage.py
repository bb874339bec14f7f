"""The HTML pages fwlab writes (the report, the trend dashboard): their jinja2 templates and their
interactive plots.

Owns: the template environment of a package's ``templates`` folder (autoescape: a value is
escaped unless it is ``markupsafe.Markup``, HTML its builder made from escaped parts), and the
page markup of an interactive plotly plot: a ``<figure>`` holding the static SVG (print, a browser
without scripts, byte-identical rebuilds), an empty ``div.iplot`` and the figure as JSON, plus the
page's one script that draws them from ``plotly.min.js`` beside the page (copied from the
installed plotly package: no CDN, the page opens without network). Plot ids come from the plot's
name, never at random. Imports nothing of fwlab: the report and the analysis layer, which may not
import each other, both build on it (like fwlab.svgplot).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import jinja2
from markupsafe import Markup

__all__ = ["CONFIG", "PLOTLY_JS", "Markup", "Plots", "environment", "figure_json", "has_plots", "page_script",
           "plot_box", "plotly_js_source", "render", "script", "write_plotly_js"]

#: the file beside a page holding plotly.js (the page loads it by this relative name)
PLOTLY_JS = "plotly.min.js"

#: drawing options of every live plot: no plotly logo; the camera button saves SVG
CONFIG = {"displaylogo": False, "responsive": True, "toImageButtonOptions": {"format": "svg"}}

#: the style of the plot boxes (each page's CSS includes it): the live plot replaces the SVG on
#: screen once drawn; print shows the SVG
PLOT_CSS = ("figure.plot{margin:0}.iplot{display:none;width:100%;height:480px}.live>.iplot{display:block}"
            ".live>.static{display:none}@media print{.live>.iplot{display:none}.live>.static{display:block}}")


@lru_cache(maxsize=None)
def environment(package: str) -> jinja2.Environment:
    """The templates of ``package`` (its ``templates`` folder, package data): autoescaping, strict
    (an undefined name is an error, not an empty string), layout whitespace trimmed."""
    return jinja2.Environment(loader=jinja2.PackageLoader(package, "templates"),
                              autoescape=True, undefined=jinja2.StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False)


def render(package: str, name: str, **context) -> Markup:
    """Template ``name`` of ``package`` rendered with ``context``, as Markup (escaped HTML)."""
    return Markup(environment(package).get_template(name).render(plot_css=Markup(PLOT_CSS), **context))


def plotly_js_source() -> Path:
    """The plotly.min.js the installed plotly package carries (plotly.js, offline)."""
    import plotly

    return Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"


def figure_json(traces: list, layout: dict) -> str:
    """A figure as compact JSON through plotly (validated against its schema), the same text for
    the same data; ``</`` written as ``<\\/`` so it cannot end the page's script element."""
    import plotly.graph_objects as go
    import plotly.io as pio

    fig = go.Figure(data=traces, layout={"template": "none", "hovermode": "closest",
                                         "legend": {"orientation": "h", "y": -0.25},
                                         "margin": {"l": 70, "r": 20, "t": 60, "b": 40}, **layout})
    return pio.to_json(fig, validate=True, pretty=False).replace("</", "<\\/")


def plot_box(svg: str, figure: str | None, ident: str | None = None) -> Markup:
    """One plot's markup: the static ``svg`` (HTML from the plotting code) and, with a ``figure``
    (`figure_json`), the live plot's place (``ident`` its id, if any: the script needs none) and
    the figure's JSON beside it."""
    if not figure:
        return Markup(f"<div class='plot'>{svg}</div>")
    id_attr = f" id='{ident}'" if ident else ""
    data_attr = f" id='{ident}-data'" if ident else ""
    return Markup(f"<figure class='plot iplot-box'><div class='static'>{svg}</div>"
                  f"<div class='iplot'{id_attr}></div>"
                  f"<script type='application/json'{data_attr}>{figure}</script></figure>")


def has_plots(page: str) -> bool:
    """Whether ``page`` holds an interactive plot (and so needs `script` and plotly.min.js)."""
    return "<figure class='plot iplot-box'>" in page


def script() -> Markup:
    """Once per page, after every plot: load plotly.js from beside the page and draw each plot
    box's figure; without it (a page copied alone, scripts off) the static SVGs stay."""
    config = json.dumps(CONFIG, sort_keys=True)
    return Markup(
        f"<script src='{PLOTLY_JS}'></script>\n<script>(function(){{if(!window.Plotly)return;"
        "document.querySelectorAll('figure.iplot-box').forEach(function(b){"
        "var d=b.querySelector('div.iplot'),j=b.querySelector('script[type=\"application/json\"]');"
        "var f=JSON.parse(j.textContent);b.classList.add('live');"
        f"Plotly.newPlot(d,f.data,f.layout,{config});}});}})();</script>")


class Plots:
    """The interactive plots of one page, in page order: each gets an id from its name (``ip-``
    and a slug, numbered on repeats), never a random one."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def figure(self, name: str, svg: str, figure: str | None) -> Markup:
        """The page's markup for one plot: the static ``svg`` (HTML from the plotting code) and,
        with a ``figure`` (`figure_json`), the live plot's place and its JSON."""
        if not figure:
            return plot_box(svg, None)
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "plot"
        ident, k = f"ip-{slug}", 2
        while ident in self.ids:
            ident, k = f"ip-{slug}-{k}", k + 1
        self.ids.append(ident)
        return plot_box(svg, figure, ident)


def page_script(page: str) -> str:
    """`script` when ``page`` (the page's body so far) holds an interactive plot, else nothing."""
    return str(script()) if has_plots(page) else ""


def write_plotly_js(page: str, directory: Path, write) -> Path | None:
    """plotly.min.js into ``directory`` (with ``write(path, bytes, what)``, fwlab.files.write_output)
    when ``page`` has an interactive plot; None when it has none."""
    if not has_plots(page):
        return None
    return write(directory / PLOTLY_JS, plotly_js_source().read_bytes(), "plotly.js")
