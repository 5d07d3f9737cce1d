"""Stored conversation items decoded in one batch on the active backend (ADR 0011).

``decode_stored_items`` hands the backend the package's own item classes, so
the native decoder builds the frozen value types directly (no msgspec, no
intermediate dicts) and fills each item's ``_cj`` cache on the way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
    items, index, reason = backends.active().decode_items(
        payloads if isinstance(payloads, list) else list(payloads),
        seqs if isinstance(seqs, list) else list(seqs),
        ITEM_TYPES,
        _PARTS,
        _TRUST,
        dict(extra) if extra else None,
    )
    return items, index, reason


__all__ = ["decode_stored_items"]
