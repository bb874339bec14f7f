"""Matplotlib figures as inline SVG text that comes out the same bytes from the same data.

Owns: the Agg backend, the fixed SVG id salt (matplotlib's default is a random salt per process,
which made two builds of one page differ) and leaving out the creation date. Shared by the
report's plots (fwlab.report.plots) and the trend page (fwlab.analysis.trend_page), which may
not import each other; it imports nothing of fwlab, so it sits at the shared bottom of the layers.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

#: SVG element ids are hashes salted with this (by default a random salt per process)
SVG_HASH_SALT = "fwlab"

__all__ = ["SVG_HASH_SALT", "figure_svg", "plt"]


def figure_svg(fig) -> str:
    """`fig` as SVG text from its ``<svg`` element on (no XML prologue), the same bytes for the
    same figure; the figure is closed."""
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": SVG_HASH_SALT}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.find("<svg"):]
