"""The fwlab command line: parse, load, call the library, print. Nothing else lives here.

One module per group of commands, each holding its commands' options and handlers:
`contract` (exit statuses, --json, text tables), `run` and `dry_run` (fwlab run), `optimize`,
`records` (report, compare, baseline, trend, export), `bench`, `lab` (list, rules, clean,
version) and `parser` (the root parser and `main`).
"""

from fwlab.cli.contract import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from fwlab.cli.parser import build_parser, main
from fwlab.cli.run import quick_variant

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "build_parser", "main", "quick_variant"]
