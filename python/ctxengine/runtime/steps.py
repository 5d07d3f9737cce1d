"""What ``ContextLoop.record_step`` appends, prepared before anything is written (ADR 0011).

A step is the model's response items and the results of its tool calls, plus
the working-state transitions the control tool asked for. Every event is
keyed by the run, the step and its position, so the same step recorded
twice (a retry after a lost acknowledgement or a crash) names the same
events and the store returns them instead of writing new ones:

* ``conversation.item:{run_id}:{step}:{position}`` for the items, and
* ``context.working_state:{run_id}:{step}:{position}`` for the transitions.

Each item is decoded the way the history reader will decode it before it is
written (an item that would not read back is refused here, nothing stored), and
the items' tool pairs are checked after the run's turn (``pairs.check_new_pairs``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..assembly.turn import split_turn
from ..core.canonical import canonical_json
from ..core.decode import decode_stored_items
from ..errors import ModelValidationError
from ..model import Checkpoint, ConversationItem, Principal, RunContext, TrustLevel, WorkingState
from ..model.items import ITEM_TYPES
from ..stores.encoded import EncodedEvent, with_text
from ..stores.events import Event, ItemRow, NewEvent, Visibility, interned
from .pairs import check_new_pairs
from .session import ITEM_APPENDED, item_payload
from .working_state import WORKING_STATE_UPDATED, WorkingStateManager

_ITEM_CLASSES = tuple(ITEM_TYPES.values())


@dataclass(frozen=True, slots=True)
class StateUpdate:
    """One ``context.update_working_state`` input and who wrote it (the model, by default)."""

    update: dict[str, Any]
    source: TrustLevel | str = TrustLevel.EXTERNAL_UNTRUSTED


@dataclass(slots=True)
class PreparedStep:
    """The events of a step (transitions first, then items) and the state after it."""

    events: list[NewEvent]
    state: WorkingState
    #: (index into ``events``, the item as it reads back) for each item, in order.
    items: list[tuple[int, ConversationItem]] = field(default_factory=list)
    #: The stored payload text of each item, in order.
    texts: list[str] = field(default_factory=list)

    def item_row(self, stored: Sequence[Event], i: int, tokens: int | None) -> ItemRow:
        """Item ``i`` as the history reader would read its row back."""
        index, _ = self.items[i]
        event = stored[index]
        return ItemRow(event.sequence, self.texts[i], interned(event.visibility), tokens)

    def appended(self, session_id: str, stored: Sequence[Event]) -> list[ConversationItem]:
        """The items with the sequences the log gave them (and the log's provenance)."""
        out: list[ConversationItem] = []
        for index, item in self.items:
            logged = replace(item, seq=stored[index].sequence)
            object.__setattr__(logged, "_log", session_id)
            out.append(logged)
        return out


def _trust(value: TrustLevel | str) -> TrustLevel:
    try:
        return TrustLevel(value)
    except ValueError:
        raise ModelValidationError("record_step", "source", f"unknown trust level {value!r}") from None


def prepare_step(
    run: RunContext,
    checkpoint: Checkpoint,
    items: Sequence[ConversationItem],
    state_updates: Sequence[StateUpdate],
    manager: WorkingStateManager,
    model_id: str,
    principal: Principal | None,
    visibility: Visibility | None,
) -> PreparedStep:
    """Validate the step and build its events; nothing is written (``ModelValidationError``;
    ``OrphanedToolPair`` for a result without its open call, a second result for one call or
    a call id reused while its call is open)."""
    state = checkpoint.working_state
    events: list[NewEvent] = []
    for position, change in enumerate(state_updates):
        if not isinstance(change, StateUpdate):
            raise ModelValidationError("record_step", f"state_updates[{position}]", "expected a StateUpdate")
        trust = _trust(change.source)
        state = manager.transition(state, change.update, source_trust=trust, model_id=model_id)
        payload = {
            "run_id": run.run_id,
            "base_version": checkpoint.version,
            "source": trust.value,
            "operation": "update",
            "update": dict(change.update),
            "state": state.to_dict(),
        }
        events.append(
            NewEvent(
                session_id=run.session_id,
                type=WORKING_STATE_UPDATED,
                payload=payload,
                derivation_key=f"context.working_state:{run.run_id}:{run.step}:{position}",
                run_id=run.run_id,
                actor="model" if trust is TrustLevel.EXTERNAL_UNTRUSTED else "runtime",
                visibility=Visibility.session()
                if principal is None
                else Visibility.principal(principal.principal_id),
            )
        )
    prepared = PreparedStep(events, state)
    payloads: list[dict[str, Any]] = []
    for position, item in enumerate(items):
        if not isinstance(item, _ITEM_CLASSES):
            raise ModelValidationError(
                "record_step", f"items[{position}]", f"expected a conversation item, got {type(item)}"
            )
        payloads.append(item_payload(item))
    # Pairs by position, after the run's turn (ADR 0019): refused before anything is written.
    conversation = checkpoint.conversation
    check_new_pairs(
        conversation[split_turn(conversation, run.seed_sequence) :], items, "record_step", "items"
    )
    texts = [canonical_json(payload).decode("utf-8") for payload in payloads]
    decoded, index, reason = decode_stored_items(texts, [1] * len(texts))
    if index is not None:
        why = f"would not read back from the log: {reason}"
        raise ModelValidationError("record_step", f"items[{index}]", why)
    prepared.texts = texts
    for position, (payload, item) in enumerate(zip(payloads, decoded, strict=True)):
        prepared.items.append((len(events), item))
        event = EncodedEvent(
            session_id=run.session_id,
            type=ITEM_APPENDED,
            payload=payload,
            derivation_key=f"conversation.item:{run.run_id}:{run.step}:{position}",
            run_id=run.run_id,
            visibility=visibility if visibility is not None else Visibility.session(),
        )
        events.append(with_text(event, texts[position]))  # read back by the item reader above
    return prepared


__all__ = ["PreparedStep", "StateUpdate", "prepare_step"]
