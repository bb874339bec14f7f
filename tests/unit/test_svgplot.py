"""One SVG helper for the report's plots and the trend page (fwlab.svgplot): the same bytes from
the same figure, and no second copy of it in the package. No root."""

from __future__ import annotations

from pathlib import Path

from fwlab.svgplot import figure_svg, plt

SRC = Path(__file__).resolve().parents[2] / "src" / "fwlab"


def drawn() -> str:
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1, 2], [1, 3, 2], "o-", label="x")
    ax.legend()
    return figure_svg(fig)


def test_the_same_figure_gives_the_same_bytes():
    a, b = drawn(), drawn()
    assert a == b and a.startswith("<svg") and "<dc:date>" not in a


def test_one_copy_serves_the_report_and_the_trend_page():
    from fwlab.analysis import trend_page
    from fwlab.report import plots

    assert trend_page.figure_svg is figure_svg and plots.svg is figure_svg
    salted = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if "svg.hashsalt" in p.read_text())
    assert salted == ["svgplot.py"]
