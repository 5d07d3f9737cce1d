"""Values made from a tuple, found again by the tuple's identity (ADR 0011).

A seeded run's elided spans are its carry's, the very tuple run after run (the loop's carry
cache decodes a carry once per worker). A cache keyed by the tuple itself hashes and compares
every span on each lookup, and spans are frozen dataclasses whose ``__hash__`` and ``__eq__``
run in Python; keyed by identity, a lookup is one dict probe and one ``is``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class ByIdentity(Generic[V]):
    """Up to ``capacity`` values, each made from an exact tuple (and an equal ``also``) and
    found again while that same tuple object is passed. An entry holds its tuple, so no other
    object takes the identity while it is kept; the oldest entry goes first. Anything but an
    exact tuple (a list may change in place) is made anew each time."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._kept: dict[int, tuple[tuple[Any, ...], Hashable, V]] = {}

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, source: object, make: Callable[[], V], also: Hashable = None) -> V:
        """``make()``, or what it made for this ``source`` tuple and an equal ``also``."""
        if type(source) is not tuple:
            return make()
        kept = self._kept.get(id(source))
        if kept is not None and kept[0] is source and kept[1] == also:
            return kept[2]
        value = make()
        self._kept[id(source)] = (source, also, value)
        if len(self._kept) > self.capacity:
            del self._kept[next(iter(self._kept))]
        return value

    def held(self) -> list[tuple[Any, ...]]:
        """The tuples kept, oldest first (for tests)."""
        return [entry[0] for entry in self._kept.values()]


__all__ = ["ByIdentity"]
