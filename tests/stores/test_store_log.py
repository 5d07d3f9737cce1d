"""The store contract over memory, SQLite and PostgreSQL: the event log and session history."""

from __future__ import annotations

from datetime import timedelta

import pytest

from contract_events import COMPACTED, PLAN, ROTATED, WS, new
from ctxengine.errors import IdempotencyConflict, ModelValidationError
from ctxengine.model import Principal, ToolCall, ToolResult, UserMessage
from ctxengine.model.clock import FixedClock
from ctxengine.runtime.session import append_item, session_history
from ctxengine.stores.events import NewEvent, Store, Visibility

# --------------------------------------------------------------------------
# append, idempotency, sequences


async def test_sequences_are_gapless_per_session(store: Store, clock: FixedClock) -> None:
    appended = []
    for i in range(6):
        session = "a" if i % 3 else "b"
        appended.append(await store.events.append(new(session, f"key-{i}", run_id="run-1", actor="planner")))
    assert [e.sequence for e in appended if e.session_id == "a"] == [1, 2, 3, 4]
    assert [e.sequence for e in appended if e.session_id == "b"] == [1, 2]
    first = appended[0]
    assert (first.run_id, first.actor, first.visibility) == ("run-1", "planner", Visibility.session())
    assert first.created_at == clock.now() and first.schema_version == 1
    assert await store.events.read("a") == [e for e in appended if e.session_id == "a"]
    assert await store.events.read("nobody") == []


async def test_repeat_returns_the_stored_event_and_writes_nothing(store: Store, clock: FixedClock) -> None:
    original = await store.events.append(new("s", "plan:1", {"b": [1, 2.0], "a": "x"}))
    await store.events.append(new("s", "plan:2"))
    clock.advance(timedelta(hours=1))
    # Same canonical payload, spelled differently: key order and 2.0 vs 2.
    repeat = await store.events.append(new("s", "plan:1", {"a": "x", "b": [1, 2]}))
    assert repeat == original
    assert repeat.created_at == original.created_at
    assert [e.sequence for e in await store.events.read("s")] == [1, 2]


async def test_same_key_with_a_different_payload_raises(store: Store) -> None:
    await store.events.append(new("sess-7", "plan:1", {"epoch": 1}))
    with pytest.raises(IdempotencyConflict) as err:
        await store.events.append(new("sess-7", "plan:1", {"epoch": 2}))
    assert "sess-7" in str(err.value) and "plan:1" in str(err.value)
    with pytest.raises(IdempotencyConflict, match="type"):
        await store.events.append(new("sess-7", "plan:1", {"epoch": 1}, type=ROTATED))
    assert len(await store.events.read("sess-7")) == 1
    # The key is per session: another session may use it.
    assert (await store.events.append(new("sess-8", "plan:1", {"epoch": 2}))).sequence == 1


async def test_unknown_types_and_bad_events_are_refused(store: Store) -> None:
    with pytest.raises(ModelValidationError, match=r"unknown event type 'plan\.made'"):
        NewEvent("s", "plan.made", {}, "k")
    with pytest.raises(ModelValidationError, match="derivation_key"):
        NewEvent("s", PLAN, {}, "")
    with pytest.raises(ModelValidationError, match="payload"):
        NewEvent("s", PLAN, [], "k")  # type: ignore[arg-type]
    with pytest.raises(ModelValidationError, match="unknown event type"):
        await store.events.read("s", types=["nope"])
    with pytest.raises(ModelValidationError, match="unknown event type"):
        await store.events.latest_before("s", 10, "nope")
    assert await store.events.read("s") == []


async def test_read_after_before_and_types(store: Store) -> None:
    types = [PLAN, WS, COMPACTED, WS, ROTATED, WS]
    for i, event_type in enumerate(types):
        await store.events.append(new("s", f"k{i}", type=event_type))
    assert [e.sequence for e in await store.events.read("s", after=3)] == [4, 5, 6]
    assert [e.sequence for e in await store.events.read("s", types=[WS])] == [2, 4, 6]
    assert [e.sequence for e in await store.events.read("s", 2, [WS, PLAN])] == [4, 6]
    assert [e.sequence for e in await store.events.read("s", types=WS)] == [2, 4, 6]
    assert [e.sequence for e in await store.events.read("s", 1, before=5)] == [2, 3, 4]
    assert await store.events.read("s", after=6) == []


async def test_latest_before_honours_the_boundary_and_visibility(store: Store) -> None:
    alice = Principal("alice", "acme")
    bob = Principal("bob", "acme")
    carol = Principal("carol", "globex")
    await store.events.append(new("s", "w1", type=WS, visibility=Visibility.session()))  # 1
    await store.events.append(new("s", "w2", type=WS, visibility=Visibility.tenant("acme")))  # 2
    await store.events.append(new("s", "w3", type=WS, visibility=Visibility.principal("bob")))  # 3
    await store.events.append(new("s", "p4", type=PLAN))  # 4
    await store.events.append(new("s", "w5", type=WS, visibility=Visibility.principal("alice")))  # 5

    async def latest(before: int, principal: Principal | None) -> int | None:
        event = await store.events.latest_before("s", before, WS, principal)
        return None if event is None else event.sequence

    assert await latest(5, None) == 3  # strictly below the boundary
    assert await latest(6, None) == 5
    assert await latest(6, alice) == 5
    assert await latest(5, alice) == 2  # bob's own event is not alice's
    assert await latest(5, bob) == 3
    assert await latest(6, carol) == 1  # another tenant sees session-wide events only
    assert await latest(1, None) is None
    assert await store.events.latest_before("s", 99, COMPACTED) is None
    assert (await store.events.latest_before("s", 99, PLAN, carol)) is not None


# --------------------------------------------------------------------------
# session history


async def test_session_history_is_cut_at_a_fixed_sequence(store: Store) -> None:
    alice = Principal("alice", "acme")
    hello = await append_item(store, "s", UserMessage("hello", principal_id="alice"), principal=alice)
    call = await append_item(store, "s", ToolCall("c1", "search", {"q": "x"}), run_id="run-1")
    await store.events.append(new("s", "plan:1"))  # not a conversation item
    result = await append_item(store, "s", ToolResult("c1", "found"), run_id="run-1")
    again = await append_item(store, "s", UserMessage("hello", principal_id="alice"), principal=alice)
    assert [hello.seq, call.seq, result.seq, again.seq] == [1, 2, 4, 5]  # same text, two events
    cut = await session_history(store, "s", 5)
    assert cut == [hello, call, result]
    assert cut[0] == UserMessage("hello", principal_id="alice", seq=1)
    for i in range(3):
        await append_item(store, "s", UserMessage(f"later {i}"))
    assert await session_history(store, "s", 5) == cut  # the same call, the same items
    assert len(await session_history(store, "s", 100)) == 7
    stored = (await store.events.read("s", before=2))[0]
    assert stored.actor == "alice" and stored.visibility == Visibility.tenant("acme")
    assert "seq" not in stored.payload["item"]


async def test_append_item_is_idempotent_on_an_explicit_key(store: Store) -> None:
    first = await append_item(store, "s", UserMessage("hi"), derivation_key="inbound:42")
    repeat = await append_item(store, "s", UserMessage("hi"), derivation_key="inbound:42")
    assert first == repeat and first.seq == 1
    with pytest.raises(IdempotencyConflict, match="inbound:42"):
        await append_item(store, "s", UserMessage("bye"), derivation_key="inbound:42")
    assert len(await session_history(store, "s", 100)) == 1
