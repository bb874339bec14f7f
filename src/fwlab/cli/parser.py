"""The command line's root: the parser (every command's own module adds its subcommands, in the
order 'fwlab --help' lists them), and `main`: signals, and every error as one line and its exit status."""

from __future__ import annotations

import argparse
import functools
import os
import signal
import sys

import fwlab
from fwlab.cli.bench import add_bench
from fwlab.cli.lab import add_clean, add_list, add_rules, add_version
from fwlab.cli.optimize import add_optimize
from fwlab.cli.records import add_baseline, add_compare, add_export, add_report, add_trend
from fwlab.cli.run import add_run
from fwlab.cli.contract import EXIT_INTERRUPTED, EXIT_TABLE, EXIT_USAGE
from fwlab.errors import FwlabError


def _sigterm_as_interrupt(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt


class _HelpFormatter(argparse.HelpFormatter):
    """Help that states every default: an option whose default is a value and whose help does
    not name one gets "(default: X)"; text with line breaks (the exit-status table) is kept as
    written, other text wrapped."""

    def _get_help_string(self, action):
        text = action.help or ""
        if (action.default not in (None, False, argparse.SUPPRESS) and action.option_strings
                and "default" not in text and "%(default)" not in text):
            text += " (default: %(default)s)"
        return text

    def _fill_text(self, text, width, indent):
        if "\n" in text:
            return "\n".join(indent + line for line in text.splitlines())
        return super()._fill_text(text, width, indent)


class _Parser(argparse.ArgumentParser):
    """argparse with fwlab's error line: one line on stderr, exit 2 (subcommands inherit it),
    and `_HelpFormatter`."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        line = " ".join(f"{self.prog}: {message}".splitlines())
        self.exit(EXIT_USAGE, f"fwlab: error: {line} (fix: see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="fwlab",
        description="Firewall performance lab: builds a namespace test bed, loads generated rule "
                    "sets into a firewall, drives real traffic through it and reports.",
        epilog=EXIT_TABLE)
    p.add_argument("--version", action="version", version=f"fwlab {fwlab.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    add_run(sub)
    add_optimize(sub)
    add_report(sub)
    add_list(sub)
    add_rules(sub)
    add_clean(sub)
    add_bench(sub)
    add_version(sub)
    add_baseline(sub)
    add_compare(sub)
    add_trend(sub)
    add_export(sub)
    return p


@functools.cache
def cached_parser() -> argparse.ArgumentParser:
    return build_parser()  # built once per process: parse_args leaves it unchanged


def main(argv: list[str] | None = None) -> int:
    parser = cached_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        print("fwlab: error: no command given (fix: fwlab COMMAND; the commands are listed above)", file=sys.stderr)
        return EXIT_USAGE
    # Install both handlers explicitly: a job started in the background by a non-interactive
    # shell inherits SIGINT as ignored, and Python would then never raise KeyboardInterrupt.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        return args.func(args)
    except BrokenPipeError:
        # the reader went away (`fwlab list | head`): what it wanted was written; say nothing more,
        # and point stdout at /dev/null so the interpreter's final flush does not fail again
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # stdout is not a file (captured in tests)
            pass
        return 0
    except KeyboardInterrupt:
        print("fwlab: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except FwlabError as exc:
        from fwlab.run.executor import Interrupted

        print(f"fwlab: error: {exc.one_line()}", file=sys.stderr)
        if isinstance(exc, Interrupted):
            return EXIT_INTERRUPTED
        return exc.exit_status if getattr(exc, "during_measurement", False) else EXIT_USAGE
