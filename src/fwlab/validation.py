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


def check_only_keys(v: dict, known: tuple[str, ...]) -> dict:
    """An ``only`` table (of a traffic item or a background flood) may name only `known` keys."""
    bad = sorted(set(v) - set(known))
    if bad:
        raise ValueError(f"only: unknown key(s) {', '.join(bad)} (known: {', '.join(known)})")
    return v
