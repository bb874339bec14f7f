"""What every command shares: the exit statuses (the contract, printed in 'fwlab --help'), the
--json document, and the width and tables of the human output."""

from __future__ import annotations

import contextlib
import json
import shutil

from fwlab.errors import MeasurementFailed

# -- the contract: exit statuses (docs/cli.md), printed in 'fwlab --help' ------------------------
EXIT_OK = 0
EXIT_FAILED = 1        #: the measurement ran but failed: a failed trial, a mismatched check, a runtime error
EXIT_USAGE = 2         #: bad input: usage, a suite, a file, a missing tool or privilege
EXIT_INTERRUPTED = 130  #: SIGINT or SIGTERM; finished trials are on disk

EXIT_TABLE = """exit status:
  0    success
  1    the measurement ran but failed: a trial failed, a verdict or equivalence check
       mismatched, or the test bed, a backend or a traffic tool failed while running
  2    bad input: usage, a suite or file, a missing tool or privilege (one line on stderr
       naming the problem and the fix)
  130  interrupted (SIGINT/SIGTERM); a run's finished trials are on disk: fwlab run --resume DIR

Commands that print results take --json and then print one JSON document on stdout.
Needs root for 'run', 'clean', 'optimize' and 'bench'. Example: fwlab run quick"""



@contextlib.contextmanager
def measuring():
    """The phase in which traffic runs: a failure of the bed, a backend, a tool or a host raised
    in it (`MeasurementFailed`) exits 1; the same error before it (e.g. an unknown backend
    named on the command line) is bad input, 2."""
    try:
        yield
    except MeasurementFailed as exc:
        exc.during_measurement = True
        raise


def print_json(doc) -> None:
    """One JSON document on stdout (the --json contract)."""
    print(json.dumps(doc, indent=2, default=str))


def text_width() -> int:
    """Text width of the human output: $COLUMNS or the terminal's, at most 100."""
    return min(shutil.get_terminal_size((100, 24)).columns, 100)


def text_table(headers: list[str] | None, rows: list[list], width: int | None = None, indent: str = "") -> str:
    """Columns padded to their widest cell (no header row for ``headers`` None); the last column
    cut with '…' to fit `width`."""
    width = width or text_width()
    cells = [[("" if c is None else str(c)) for c in r] for r in rows]
    ncol = len(headers) if headers else max((len(r) for r in cells), default=0)
    widths = [max([len(headers[i]) if headers else 0] + [len(r[i]) for r in cells]) for i in range(ncol)]
    lead = len(indent) + sum(w + 2 for w in widths[:-1])
    room = max(width - lead, 12)
    out = []
    for r in ([headers] if headers else []) + cells:
        last = r[-1] if len(r[-1]) <= room else r[-1][:room - 1] + "…"
        out.append(indent + "".join(c.ljust(w + 2) for c, w in zip(r[:-1], widths, strict=False)) + last)
    return "\n".join(line.rstrip() for line in out) + "\n"
