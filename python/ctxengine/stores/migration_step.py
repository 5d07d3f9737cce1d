"""One schema migration: an additive change in each dialect's statements (see ``migrations``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Migration:
    """One additive schema change, in each dialect's statements."""

    revision: int
    name: str
    sqlite: tuple[str, ...]
    postgres: tuple[str, ...]


__all__ = ["Migration"]
