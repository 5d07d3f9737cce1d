"""Stored conversation items decoded in one batch on the active backend (ADR 0011).

``decode_stored_items`` hands the backend the package's own item classes, so
the native decoder builds the frozen value types directly (no msgspec, no
intermediate dicts) and fills each item's ``_cj`` cache on the way.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ..model import FileRef, TextPart, TrustLevel
from ..model.items import ITEM_TYPES, ConversationItem
from . import backends

_PARTS = (TextPart, FileRef)
_TRUST = tuple(TrustLevel)


def decode_stored_items(
    payloads: Sequence[object], seqs: Sequence[int], *, extra: Mapping[str, object] | None = None
) -> tuple[list[ConversationItem], int | None, str | None]:
    """Items of events ``seqs`` from their stored ``{"item": ...}`` payload texts.

    Returns ``(items, None, None)``, or at the first payload that does not
    decode ``(the items before it, its index, the reason)``. ``extra`` sets
    item slots the decoder leaves empty (e.g. the log provenance).
    """
    items: list[Any]
    with paused_gc():
        items, index, reason = backends.active().decode_items(
            payloads if isinstance(payloads, list) else list(payloads),
            seqs if isinstance(seqs, list) else list(seqs),
            ITEM_TYPES,
            _PARTS,
            _TRUST,
            dict(extra) if extra else None,
        )
    return items, index, reason


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic collector paused while a batch builds many small, acyclic objects.

    Every few hundred allocations would otherwise start a collection that finds
    nothing to free, and the older generations' passes walk the whole heap; the
    objects a batch builds (items, parts, rendered items, their caches) hold no
    reference cycles. The collector runs again as soon as the batch returns.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


__all__ = ["decode_stored_items", "paused_gc"]
