"""A noise baseline: one suite run several times, read back as the spread of each figure.

Owns: running the suite ``runs`` times through :func:`fwlab.run.start.start` and handing the
records to :func:`fwlab.analysis.baseline.baseline_from_runs`. Never computes a figure itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from fwlab.analysis.baseline import Baseline, baseline_from_runs
from fwlab.errors import FwlabError
from fwlab.run.start import start
from fwlab.suites import load_suite


def measure_baseline(suite_name_or_path: str, runs: int, out_root: Path | str, *, quiet: bool = False,
                     start_run: Callable | None = None) -> Baseline:
    """Run the suite `runs` times (needs root and real traffic), then build the baseline.

    `start_run` defaults to :func:`fwlab.run.start.start` (suite, text, out_root, quiet=...); the records are
    read back by `fwlab.analysis.baseline.baseline_from_runs`.
    """
    if runs < 2:
        raise FwlabError(f"a noise baseline needs at least 2 runs, got {runs}",
                         fix="use --runs 2 or more (seed 002 used ten)")
    start_run = start_run or start
    suite, text = load_suite(suite_name_or_path)
    dirs = [start_run(suite, text, Path(out_root), quiet=quiet).path for _ in range(runs)]
    return baseline_from_runs(dirs)
