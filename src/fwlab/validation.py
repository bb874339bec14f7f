"""Pydantic validation errors as one line, for every model fwlab validates (suites, hosts files,
firewall descriptions, runner options): ``loc: message`` for the first few problems."""

from __future__ import annotations

from pydantic import ValidationError


def one_line(exc: ValidationError, limit: int = 3) -> str:
    parts = []
    for e in exc.errors()[:limit]:
        loc = ".".join(str(x) for x in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    more = f" (+{exc.error_count() - limit} more)" if exc.error_count() > limit else ""
    return "; ".join(parts) + more
