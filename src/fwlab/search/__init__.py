"""Load searches: RFC 2544 binary search and MLRsearch, behind one measurer seam.

Owns: deciding which load to try next and what the trials mean (bounds, throughput, flags).
Never touches: traffic, namespaces, firewalls or files. It calls `Measurer.measure(duration_s,
load_pps)` and nothing else, so every search is unit-tested against `simulated.py` in
milliseconds (the MLRsearch model: manager, controller, measurer).

Entry point: `run_search(name, measurer, max_load_pps, min_load_pps, goals, resume=...,
on_trial=...) -> list[SearchResult]`, with `name` from `ALGORITHMS` ("binary", "mlr", and "csit": CSIT's own MLRsearch, the PyPI reference).
"""

from fwlab.search import binary as _binary  # noqa: F401  (registers "binary")
from fwlab.search import csit as _csit  # noqa: F401  (registers "csit": CSIT's MLRsearch from PyPI)
from fwlab.search import mlr as _mlr  # noqa: F401  (registers "mlr")
from fwlab.search.binary import BinaryGoal
from fwlab.search.measurer import GENERATOR_SHORT_RATIO, Measurer, TrialResult
from fwlab.search.mlr import PRESETS, SearchGoal, preset
from fwlab.search.registry import ALGORITHMS, register, run_search
from fwlab.search.result import IRREGULAR_FLAGS, SearchResult, SearchTrial

__all__ = [
    "ALGORITHMS",
    "GENERATOR_SHORT_RATIO",
    "IRREGULAR_FLAGS",
    "PRESETS",
    "BinaryGoal",
    "Measurer",
    "SearchGoal",
    "SearchResult",
    "SearchTrial",
    "TrialResult",
    "preset",
    "register",
    "run_search",
]
