"""Session history: conversation items live in the session event log.

``append_item`` writes one ``conversation.item.appended`` event per item and
returns the item with ``seq`` set to that event's sequence.
``session_history`` is the history projection cut at a fixed sequence: the
items strictly below it, in order (with a principal: only those it may see).
Events are append-only and sequences are never reused, so the same call
returns the same items forever. Stored payloads are decoded in one native
batch (``core.decode``, ADR 0011); every item read from the log, or appended
to it, records the session in its ``_log`` slot.

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
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..assembly.render_cache import render_item
from ..core.canonical import canonical_json
from ..core.decode import decode_stored_items
from ..core.estimator import Estimator
from ..core.slices import Steps, batches, collector_paused, finish_async
from ..errors import ModelValidationError, StoreCorruption
from ..model import ITEM_TYPES, ConversationItem, Principal, item_from_dict
from ..stores.events import ItemRow, NewEvent, Store, Visibility

ITEM_APPENDED = "conversation.item.appended"


def item_payload(item: ConversationItem) -> dict[str, Any]:
    """The event payload for ``item``: its ``to_dict()`` without ``seq`` (the event assigns it)."""
    data = item.to_dict()
    data.pop("seq", None)
    return {"item": data}


def item_event(
    session_id: str,
    item: ConversationItem,
    *,
    run_id: str | None = None,
    principal: Principal | None = None,
    derivation_key: str | None = None,
    visibility: Visibility | None = None,
) -> tuple[NewEvent, ConversationItem]:
    """The event that appends ``item`` (see ``append_item``) and the item as it will read back.

    The item is decoded the way ``session_history`` will, before anything is written:
    an item that would not read back is refused here instead of poisoning the session.
    """
    if not isinstance(item, _ITEM_CLASSES):
        raise ModelValidationError("append_item", "item", f"expected a conversation item, got {type(item)}")
    if visibility is None:
        visibility = Visibility.session() if principal is None else Visibility.tenant(principal.tenant_id)
    payload = item_payload(item)
    try:
        stored = json.loads(canonical_json(payload))
        restored = item_from_dict({**stored["item"], "seq": None})
    except ModelValidationError as exc:
        raise ModelValidationError(
            "append_item", "item", f"would not read back from the log: {exc}"
        ) from None
    new = NewEvent(
        session_id=session_id,
        type=ITEM_APPENDED,
        payload=payload,
        derivation_key=derivation_key or f"conversation.item:{uuid.uuid4().hex}",
        run_id=run_id,
        actor="runtime" if principal is None else principal.principal_id,
        visibility=visibility,
    )
    return new, restored


async def append_item(
    store: Store,
    session_id: str,
    item: ConversationItem,
    *,
    run_id: str | None = None,
    principal: Principal | None = None,
    derivation_key: str | None = None,
    visibility: Visibility | None = None,
    estimator: Estimator | None = None,
    model_id: str | None = None,
) -> ConversationItem:
    """Append ``item`` to the session's history; returns it with ``seq`` set.

    ``principal`` (when given) is recorded as the actor, and the item is
    visible to the principal's tenant unless ``visibility`` says otherwise;
    without a principal the actor is ``"runtime"`` and the item is visible
    to the whole session. Repeating a ``derivation_key`` with the same item
    returns the stored item and appends nothing. With an ``estimator`` and a
    ``model_id`` the item's raw token count (as later runs render it in
    their history) is stored with it, in the same transaction (ADR 0011).
    """
    new, restored = item_event(
        session_id,
        item,
        run_id=run_id,
        principal=principal,
        derivation_key=derivation_key,
        visibility=visibility,
    )
    if estimator is None or model_id is None:
        event = await store.events.append(new)
        return logged(restored, session_id, event.sequence)
    async with store.transaction():
        event = await store.events.append(new)
        appended = logged(restored, session_id, event.sequence)
        rendered = render_item(appended, HISTORY_REGION)
        count = estimator.raw(rendered, model_id)
        await store.events.put_counts(
            session_id, estimator.counter_id(model_id, HISTORY_REGION), [(event.sequence, count)]
        )
    return appended


#: The region class an item renders as in a later run's history: the kind of its stored count.
HISTORY_REGION = "history"


def logged(item: ConversationItem, session_id: str, sequence: int) -> ConversationItem:
    """``item`` as event ``sequence`` of ``session_id`` holds it (with its log provenance)."""
    appended = replace(item, seq=sequence)
    object.__setattr__(appended, "_log", session_id)
    return appended


async def session_history(
    store: Store, session_id: str, before_sequence: int, *, principal: Principal | None = None
) -> list[ConversationItem]:
    """The conversation items with ``seq < before_sequence``, in log order; with a
    ``principal``, only the items it may see (``Visibility.allows``)."""
    # One read (``before_sequence`` need not be an event's: the range may still grow), its
    # rows decoded in slices.
    rows = _visible(await store.events.read_items(session_id, 0, before=before_sequence), principal)
    return await finish_async(decode_steps(session_id, rows))


#: Sequences one read of item rows covers: a longer range is read a page at a time, each
#: decoded in slices, so that the event loop runs between them (``core.slices``).
PAGE = 2048


async def read_item_window(
    store: Store,
    session_id: str,
    after: int,
    before: int,
    counter: str | None,
    principal: Principal | None = None,
) -> tuple[list[ItemRow], list[ConversationItem]]:
    """The item rows with ``after < sequence < before`` (with a ``principal``: those it may
    see) and their items. ``before - 1`` must be an existing event's sequence (a seed): the
    range then never changes, and a long one is read a ``PAGE`` of sequences at a time,
    decoded in slices (the same rows and items)."""
    if before - after <= PAGE + 1:
        rows = _visible(
            await store.events.read_items(session_id, after, before=before, counter=counter), principal
        )
        return rows, await finish_async(decode_steps(session_id, rows))
    rows, items = [], []
    with collector_paused():
        for start in range(after, before - 1, PAGE):
            end = min(start + PAGE + 1, before)
            page = await store.events.read_items(session_id, start, before=end, counter=counter)
            page = _visible(page, principal)
            rows.extend(page)
            items.extend(await finish_async(decode_steps(session_id, page)))
    return rows, items


def _visible(rows: list[ItemRow], principal: Principal | None) -> list[ItemRow]:
    if principal is None:
        return rows
    return [row for row in rows if row.visibility.allows(principal)]


def decode_steps(session_id: str, rows: Sequence[ItemRow]) -> Steps[list[ConversationItem]]:
    """``decode_rows`` in slices (``core.slices.batches``)."""
    return batches(lambda part: decode_rows(session_id, part), rows)


def decode_rows(session_id: str, rows: Sequence[ItemRow]) -> list[ConversationItem]:
    """The items of stored item rows, decoded in one batch; ``StoreCorruption`` names the
    first row that does not decode."""
    items, index, reason = decode_stored_items(
        [row.payload for row in rows], [row.sequence for row in rows], extra={"_log": session_id}
    )
    if index is not None:
        raise StoreCorruption(session_id, rows[index].sequence, reason or "does not decode")
    return items


_ITEM_CLASSES = tuple(ITEM_TYPES.values())

__all__ = [
    "HISTORY_REGION",
    "ITEM_APPENDED",
    "append_item",
    "decode_rows",
    "item_event",
    "item_payload",
    "logged",
    "PAGE",
    "decode_steps",
    "read_item_window",
    "session_history",
]
