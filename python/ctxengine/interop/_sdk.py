"""Plain data out of SDK objects: the official SDKs' response types are pydantic models."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def plain(value: Any) -> Any:
    """``value`` as plain dicts and lists: a pydantic model becomes its dump without
    unset (``None``) fields, so an SDK response object reads like the request dict it stands for."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, Mapping):
        return dump(exclude_none=True, by_alias=True, mode="python")
    return value


def without_nulls(message: Mapping[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    """A copy of ``message`` without ``keys`` whose value is ``None`` (the API reads null as absent)."""
    return {k: v for k, v in message.items() if not (v is None and k in keys)}


__all__ = ["plain", "without_nulls"]
