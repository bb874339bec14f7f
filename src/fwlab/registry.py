"""One registry mechanism for every plug-in kind (firewall backends, traffic runners, search
algorithms): name -> object, a one-line error naming the known names for an unknown one.

Owns: lookup by name. Never knows what it holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

from fwlab.errors import FwlabError

T = TypeVar("T")


class Registry(Generic[T]):
    """Plug-ins of one kind by name. ``kind`` names them in errors ("backend", "traffic tool")."""

    def __init__(self, kind: str, error: type[FwlabError] = FwlabError) -> None:
        self.kind = kind
        self.error = error
        self._items: dict[str, T] = {}

    def add(self, name: str, item: T) -> T:
        """Register ``item`` as ``name``; registering a different item under a taken name fails."""
        if name in self._items and self._items[name] is not item:
            raise self.error(f"{self.kind} '{name}' registered twice", fix="give the new one its own name")
        self._items[name] = item
        return item

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise self.error(f"unknown {self.kind} '{name}'", fix=f"use one of: {', '.join(self.names())}") from None

    def __delitem__(self, name: str) -> None:
        """Unregister ``name`` (tests and plug-ins that register temporarily)."""
        del self._items[name]

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)
