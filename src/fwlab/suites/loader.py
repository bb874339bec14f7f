"""Loading suites: built-in names or TOML files, validated into :class:`Suite`.

Owns: the registry of built-in suites (the ``builtin/*.toml`` files) and turning validation
errors into one-line messages. Never runs anything.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from pydantic import ValidationError

from fwlab.validation import one_line, read_toml

from fwlab.errors import SuiteError
from fwlab.suites.schema import Suite


def builtin_dir() -> Path:
    return Path(str(resources.files("fwlab.suites") / "builtin"))


def builtin_names() -> list[str]:
    return sorted(p.stem for p in builtin_dir().glob("*.toml"))


def parse_suite(data: dict, origin: str,
                fix: str = "correct the suite file; 'fwlab list' shows the built-ins to copy from") -> Suite:
    if not isinstance(data, dict):
        raise SuiteError(f"suite {origin} is not a table of settings", fix=fix)
    try:
        return Suite.model_validate(data)
    except ValidationError as exc:
        raise SuiteError(f"suite {origin} is invalid: {one_line(exc)}", fix=fix) from None


def _exists(name: str) -> bool:
    try:
        return Path(name).exists()
    except (OSError, ValueError):  # a name too long for a path, a NUL byte
        return False


def load_suite(name_or_path: str) -> tuple[Suite, str]:
    """Return (suite, TOML text) for a built-in name or a path to a .toml file."""
    if name_or_path.endswith(".toml") or "/" in name_or_path or _exists(name_or_path):
        path = Path(name_or_path)
    elif name_or_path in builtin_names():  # never a path built from the name
        path = builtin_dir() / f"{name_or_path}.toml"
    else:
        raise SuiteError(f"no built-in suite named {name_or_path[:80]!r}",
                         fix=f"use one of {', '.join(builtin_names())} or a path to a .toml file")
    data, text = read_toml(path, "suite file", SuiteError)
    return parse_suite(data, f"'{path.name}'"), text


def describe_builtins() -> list[tuple[str, str]]:
    out = []
    for n in builtin_names():
        suite, _ = load_suite(n)
        out.append((n, suite.description))
    return out
