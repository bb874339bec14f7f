"""Statistics over repetitions: summaries, intervals, significance, quality flags, cost fits.

Owns: pure functions from plain numbers (and plain dicts) to frozen dataclasses with JSON-safe
`to_dict()`. Never touches: run records on disk, the test bed, traffic tools, plots or the CLI;
those layers call in here with numbers they have already loaded.
"""

from fwlab.stats.compare import (
    ALPHA,
    INSUFFICIENT_DATA,
    MIN_REPETITIONS,
    NOT_SIGNIFICANT,
    SIGNIFICANT,
    Comparison,
    compare_figure,
    compare_tables,
    reps_to_detect,
)
from fwlab.stats.compare_table import comparison_rows, comparison_table, render_comparison_table
from fwlab.stats.noise_model import FigureNoise, NoiseModel
from fwlab.stats.fit import CostFit, fit_per_packet_cost, per_packet_cost_ns
from fwlab.stats.quality import (
    Flag,
    flag_cpu_saturated,
    flag_cv,
    flag_generator_short,
    quality_flags,
)
from fwlab.stats.ratio import RATIO_METHOD, RatioInterval, ratio_interval
from fwlab.stats.median_interval import MedianInterval, median_interval
from fwlab.stats.summary import Summary, summarize

__all__ = [
    "Summary", "summarize", "MedianInterval", "median_interval",
    "Comparison", "FigureNoise", "NoiseModel", "compare_figure", "compare_tables",
    "comparison_rows", "comparison_table", "render_comparison_table",
    "SIGNIFICANT", "NOT_SIGNIFICANT", "INSUFFICIENT_DATA", "ALPHA", "MIN_REPETITIONS", "reps_to_detect",
    "Flag", "flag_cv", "flag_generator_short", "flag_cpu_saturated", "quality_flags",
    "CostFit", "fit_per_packet_cost", "per_packet_cost_ns",
    "RatioInterval", "ratio_interval", "RATIO_METHOD",
]
