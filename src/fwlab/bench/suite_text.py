"""A bench's generated suite as TOML text: the text a bench's record keeps as its suite, parsed
back with :func:`fwlab.suites.parse_suite` so that a bench runs exactly the suite it stores.

Own writer (no TOML writer in the standard library; tomli-w would be a dependency for ~20 lines):
scalars, lists, inline tables, and ``traffic`` as ``[[traffic]]`` tables.
"""

from __future__ import annotations

from typing import Any


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"no TOML for {v!r}")


def suite_toml(data: dict) -> str:
    """``data`` as suite TOML (scalars, lists, inline tables; ``traffic`` as [[traffic]])."""
    lines = [f"{k} = {_toml_value(v)}" for k, v in data.items() if k != "traffic"]
    for item in data.get("traffic", []):
        lines += ["", "[[traffic]]"] + [f"{k} = {_toml_value(v)}" for k, v in item.items()]
    return "\n".join(lines) + "\n"
