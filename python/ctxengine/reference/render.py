"""Conversation items rendered for one region class in one call: the twin of
``_core.render_items`` (ADR 0011).

The rendering rules live in ``ctxengine.assembly.render`` (envelopes, roles,
pointers); the caller passes its ``render_item`` as ``render``, and this twin
is exactly a loop over it (which reads and fills each item's ``_rc`` cache).
The Rust backend renders messages and tool results natively, byte for byte
the same, and calls ``render`` for the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


def render_items(
    items: Iterable[Any], region_class: str, rendered_cls: type[Any], render: Callable[[Any, str], Any]
) -> list[Any]:
    """Each item's rendered form for ``region_class`` (``rendered_cls`` is ``RenderedItem``)."""
    return [render(item, region_class) for item in items]


__all__ = ["render_items"]
