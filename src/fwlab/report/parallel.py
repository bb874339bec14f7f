"""The report's independent parts computed side by side in forked worker processes.

Owns: running a list of part functions (each reads the stored record it closes over and returns
its text: a plot's SVG, a section's HTML) in up to ``workers`` processes forked from this one,
and giving their results back in the list's order. Drawing the plots is most of the report's
time and each part uses one CPU; forked workers inherit the imported plotting library and the
record already read, so nothing is read or imported twice. Where forking is unavailable or
only one part or worker is asked for, the parts run here one after the other: the same text
either way (a part must not depend on another part having run in the same process). Never
decides what a part draws or says.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Sequence
from typing import Any

#: the parts of the current call, read by the forked workers (set before the pool forks)
_PARTS: Sequence[Callable[[], Any]] = ()


def default_workers() -> int:
    """The CPUs this process may run on (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _run_part(i: int) -> Any:
    return _PARTS[i]()


def _worker_signals() -> None:
    """A worker ends quietly on SIGTERM (the pool's stop; the CLI's own handler, inherited with
    the fork, would raise KeyboardInterrupt and print a traceback) and leaves Ctrl-C to the
    parent, which stops the pool."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def render_parts(parts: Sequence[Callable[[], Any]], workers: int | None = None) -> list[Any]:
    """``[p() for p in parts]``, computed in up to ``workers`` forked processes (default: the
    CPUs available). A part's exception is raised here."""
    global _PARTS
    n = min(default_workers() if workers is None else workers, len(parts))
    if n <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [p() for p in parts]
    _PARTS = parts
    pool = multiprocessing.get_context("fork").Pool(n, initializer=_worker_signals)
    try:
        out = pool.map(_run_part, range(len(parts)), chunksize=1)
    except BaseException:
        pool.terminate()
        raise
    else:
        pool.close()  # the workers finish on their own
    finally:
        pool.join()
        _PARTS = ()
    return out
