"""Pydantic validation errors as one line, for every model fwlab validates (suites, hosts files,
firewall descriptions, runner options): ``loc: message`` for the first few problems."""

from __future__ import annotations

import re

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fwlab.errors import FwlabError


def one_line(exc: ValidationError, limit: int = 3) -> str:
    parts = []
    for e in exc.errors()[:limit]:
        loc = ".".join(str(x)[:40] for x in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    more = f" (+{exc.error_count() - limit} more)" if exc.error_count() > limit else ""
    return "; ".join(parts) + more


def check_only_keys(v: dict, known: tuple[str, ...]) -> dict:
    """An ``only`` table (of a traffic item or a background flood) may name only `known` keys."""
    bad = sorted(set(v) - set(known))
    if bad:
        raise ValueError(f"only: unknown key(s) {', '.join(bad)} (known: {', '.join(known)})")
    empty = sorted(k for k, vals in v.items() if not vals)
    if empty:
        raise ValueError(f"only: empty list for {', '.join(empty)} (it would exclude everything; "
                         "remove the key to allow all)")
    return v


def only_matches(only: dict, have: dict) -> bool:
    """Whether a configuration `have` ({key: value}) lies in every list the ``only`` table gives."""
    return all(have[k] in vals for k, vals in only.items())


def read_text(path: Path, what: str, error: type[FwlabError], fix: str) -> str:
    """The UTF-8 text of a regular file that must exist (fwlab.files.read_text: bounded in size,
    never blocking on a FIFO or device); `error` (one line) if it is missing, a directory, not a
    regular file, too large, unreadable or not text. `fix` says what the file should be."""
    from fwlab.files import read_text as bounded

    return bounded(path, what, error, fix)


def read_toml(path: Path, what: str, error: type[FwlabError]) -> tuple[dict[str, Any], str]:
    """(parsed data, text) of a TOML file that must exist; `error` (one line, with the fix) if not
    (nested too deeply included). `what` names the file in the message, e.g. "suite" or "hosts file"."""
    from fwlab.files import loads_toml

    text = read_text(path, what, error, fix="give a TOML text file")
    return loads_toml(text, f"{what} {path.name}", error), text


#: client/server pairs a namespace bed may hold (suite key ``pairs``; testbed.topology builds them)
MAX_PAIRS = 8

_DELAY_UNITS = {"us": 1.0, "ms": 1e3, "s": 1e6}
#: bounds of an emulated one-way delay [us]: below 10 us the delay line's own relay time (tens of
#: us) is most of it; above 1 s its queue would need to hold more than a trial's worth of frames
DELAY_MIN_US, DELAY_MAX_US = 10.0, 1_000_000.0


def parse_delay_us(text: str) -> float:
    """A one-way delay as tc/netem writes it ("5ms", "500us", "0.25ms", "1s") -> microseconds.
    ValueError (for the caller's one-line message) on anything else."""
    if not isinstance(text, str):
        raise ValueError(f"a delay is a string like \"5ms\" or \"250us\", not {text!r}")
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(us|ms|s)\s*", text.lower())
    if not m:
        raise ValueError(f"'{text}' is not a delay: write it like \"5ms\" or \"250us\"")
    us = float(m[1]) * _DELAY_UNITS[m[2]]
    if not DELAY_MIN_US <= us <= DELAY_MAX_US:
        raise ValueError(f"delay {text} is outside 10us..1s")
    return us
