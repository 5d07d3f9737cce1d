"""Bounded tables of the most recent entries (the loop's per-run and per-session caches)."""

from __future__ import annotations

from collections import OrderedDict
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


def remember(table: OrderedDict[K, V], key: K, value: V, capacity: int) -> None:
    """``table[key] = value`` as the most recent entry; the oldest past ``capacity`` go."""
    table[key] = value
    table.move_to_end(key)
    while len(table) > capacity:
        table.popitem(last=False)


__all__ = ["remember"]
