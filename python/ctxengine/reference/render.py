"""Conversation items rendered for one region class in one call: the twin of
``_core.render_items`` (ADR 0011).

The contract: each entry is ``None`` (the caller renders that item with
``ctxengine.assembly.render.render_conversation``) or exactly what that
function returns. The rendering rules live in ``ctxengine.assembly.render``;
the Rust backend renders conversation items natively, byte for byte the same,
and this twin renders none, so the caller's result is the same either way.
The same holds for ``render_pointers`` and ``render_pointer``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def render_items(items: Iterable[Any], region_class: str, rendered_cls: type[Any]) -> list[Any]:
    """``None`` for each item: the caller renders them all (``rendered_cls`` is ``RenderedItem``)."""
    return [None for _ in items]


def render_pointers(items: Iterable[Any], rendered_cls: type[Any]) -> list[Any]:
    """``None`` for each tool result: the caller makes every pointer (``render_pointer``)."""
    return [None for _ in items]


__all__ = ["render_items", "render_pointers"]
