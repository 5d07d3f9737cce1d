"""Session history: conversation items live in the session event log.

``append_item`` writes one ``conversation.item.appended`` event per item and
returns the item with ``seq`` set to that event's sequence.
``session_history`` is the history projection cut at a fixed sequence: the
items strictly below it, in order. Events are append-only and sequences are
never reused, so the same call returns the same items forever.

Derivation keys: the same text may legitimately be sent twice, so the
content cannot name the event. A caller that may retry an append after a
crash (and so must not duplicate it) passes its own stable key, e.g. the
inbound message id or the provider's response item id. Without one,
``append_item`` uses a fresh random key (``conversation.item:<uuid4 hex>``):
every call appends, and a retried call appends again.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from typing import Any

from ..core.canonical import canonical_json
from ..errors import ModelValidationError, StoreCorruption
from ..model import ITEM_TYPES, ConversationItem, Principal, item_from_dict
from ..stores.events import NewEvent, Store, Visibility

ITEM_APPENDED = "conversation.item.appended"


def item_payload(item: ConversationItem) -> dict[str, Any]:
    """The event payload for ``item``: its ``to_dict()`` without ``seq`` (the event assigns it)."""
    data = item.to_dict()
    data.pop("seq", None)
    return {"item": data}


async def append_item(
    store: Store,
    session_id: str,
    item: ConversationItem,
    *,
    run_id: str | None = None,
    principal: Principal | None = None,
    derivation_key: str | None = None,
    visibility: Visibility | None = None,
) -> ConversationItem:
    """Append ``item`` to the session's history; returns it with ``seq`` set.

    ``principal`` (when given) is recorded as the actor, and the item is
    visible to the principal's tenant unless ``visibility`` says otherwise;
    without a principal the actor is ``"runtime"`` and the item is visible
    to the whole session. Repeating a ``derivation_key`` with the same item
    returns the stored item and appends nothing.
    """
    if not isinstance(item, _ITEM_CLASSES):
        raise ModelValidationError("append_item", "item", f"expected a conversation item, got {type(item)}")
    if visibility is None:
        visibility = Visibility.session() if principal is None else Visibility.tenant(principal.tenant_id)
    payload = item_payload(item)
    # Decode the item the way session_history will, before anything is written: an
    # item that would not read back is refused here instead of poisoning the session.
    try:
        stored = json.loads(canonical_json(payload))
        restored = item_from_dict({**stored["item"], "seq": None})
    except ModelValidationError as exc:
        raise ModelValidationError(
            "append_item", "item", f"would not read back from the log: {exc}"
        ) from None
    event = await store.events.append(
        NewEvent(
            session_id=session_id,
            type=ITEM_APPENDED,
            payload=payload,
            derivation_key=derivation_key or f"conversation.item:{uuid.uuid4().hex}",
            run_id=run_id,
            actor="runtime" if principal is None else principal.principal_id,
            visibility=visibility,
        )
    )
    return replace(restored, seq=event.sequence)


async def session_history(store: Store, session_id: str, before_sequence: int) -> list[ConversationItem]:
    """The conversation items with ``seq < before_sequence``, in log order."""
    events = await store.events.read(session_id, 0, (ITEM_APPENDED,), before=before_sequence)
    items: list[ConversationItem] = []
    for event in events:
        data = event.payload.get("item")
        if not isinstance(data, dict):
            raise StoreCorruption(
                session_id, event.sequence, "conversation item payload has no 'item' object"
            )
        try:
            items.append(item_from_dict({**data, "seq": event.sequence}))
        except ModelValidationError as exc:
            raise StoreCorruption(
                session_id, event.sequence, f"conversation item does not decode: {exc}"
            ) from None
    return items


_ITEM_CLASSES = tuple(ITEM_TYPES.values())

__all__ = ["ITEM_APPENDED", "append_item", "item_payload", "session_history"]
