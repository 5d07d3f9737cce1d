"""The store port's additions for issue 13, on memory, SQLite and PostgreSQL: batched appends,
item rows read undecoded with their token counts, counts stored insert-or-ignore, the
visibility classes of a range, and checkpoint pruning.

Each would fail if an adapter dropped the idempotency of an append in a batch, let a read
of item rows pass over a row it cannot read, overwrote a stored count, or pruned the
version it was told to keep.
"""

from __future__ import annotations

import pytest

import ctxengine as ce
from ctxengine.errors import IdempotencyConflict, ModelValidationError, StoreCorruption, UnsupportedFormat
from ctxengine.runtime.session import ITEM_APPENDED, item_payload
from ctxengine.stores.events import NewEvent, Store, Visibility
from storekit import StoreCase

SID = "batch-session"


SESSION = Visibility.session()


def item_event(text: str, key: str, visibility: Visibility = SESSION) -> NewEvent:
    return NewEvent(SID, ITEM_APPENDED, item_payload(ce.UserMessage(text)), key, visibility=visibility)


async def test_append_all_is_one_idempotent_batch(store: Store) -> None:
    first, written = await store.events.append_all([item_event("a", "k1"), item_event("b", "k2")])
    assert written == 2 and [e.sequence for e in first] == [1, 2]
    # A retry of the batch writes nothing and returns the stored events.
    again, written = await store.events.append_all([item_event("a", "k1"), item_event("b", "k2")])
    assert written == 0 and again == first
    # Known keys repeat, new ones append after; a key twice in one batch is one event.
    mixed, written = await store.events.append_all(
        [item_event("b", "k2"), item_event("c", "k3"), item_event("c", "k3")]
    )
    assert written == 1 and [e.sequence for e in mixed] == [2, 3, 3]
    with pytest.raises(IdempotencyConflict):
        await store.events.append_all([item_event("changed", "k1")])
    assert [e.sequence for e in await store.events.read(SID)] == [1, 2, 3]
    assert await store.events.append_all([]) == ([], 0)


async def test_append_all_refuses_a_bad_batch_before_writing(store: Store) -> None:
    other = NewEvent("other", ITEM_APPENDED, item_payload(ce.UserMessage("x")), "k9")
    with pytest.raises(ModelValidationError, match="one session"):
        await store.events.append_all([item_event("a", "k1"), other])
    with pytest.raises(ModelValidationError, match="would not read back"):
        bad = NewEvent(SID, ITEM_APPENDED, {"x": 2.0**53}, "k2")
        await store.events.append_all([item_event("a", "k1"), bad])
    assert await store.events.read(SID) == []


async def test_append_all_rolls_back_with_its_transaction(store: Store) -> None:
    with pytest.raises(RuntimeError):
        async with store.transaction():
            await store.events.append_all([item_event("a", "k1")])
            raise RuntimeError("abort")
    assert await store.events.read(SID) == []


async def test_read_items_returns_item_rows_with_their_counts(store: Store) -> None:
    tenant = Visibility.tenant("acme")
    await store.events.append_all([item_event("a", "k1"), item_event("b", "k2", tenant)])
    await store.events.append(NewEvent(SID, "context.compacted", {"x": 1}, "not-an-item"))
    await store.events.append_all([item_event("c", "k3")])
    await store.events.put_counts(SID, "heuristic:3:4|history", [(1, 10), (4, 40)])
    await store.events.put_counts(SID, "heuristic:3:4|history", [(1, 99), (2, 20)])  # 1 is kept
    rows = await store.events.read_items(SID, counter="heuristic:3:4|history")
    assert [(r.sequence, r.tokens, r.visibility) for r in rows] == [
        (1, 10, Visibility.session()),
        (2, 20, tenant),
        (4, 40, Visibility.session()),
    ]
    assert [r.sequence for r in await store.events.read_items(SID, 1, before=4)] == [2]
    assert all(r.tokens is None for r in await store.events.read_items(SID, counter="other|history"))
    assert rows[0].payload == ce.canonical_json(item_payload(ce.UserMessage("a"))).decode()


async def test_read_items_fails_closed_on_an_unknown_or_newer_row(
    store_case: StoreCase, store: Store
) -> None:
    await store.events.append_all([item_event("a", "k1")])
    store_case.inject_event_row(session_id=SID, sequence=2, type="context.future", schema_version=99)
    with pytest.raises(UnsupportedFormat) as err:
        await store.events.read_items(SID)
    assert err.value.sequence == 2
    assert [r.sequence for r in await store.events.read_items(SID, before=2)] == [1]


async def test_read_items_fails_closed_on_a_bad_column(store_case: StoreCase, store: Store) -> None:
    store_case.inject_event_row(
        session_id=SID, sequence=1, type=ITEM_APPENDED, payload="{}", visibility_scope="galaxy"
    )
    with pytest.raises(StoreCorruption) as err:
        await store.events.read_items(SID)
    assert (err.value.session_id, err.value.sequence) == (SID, 1)


async def test_counts_commit_and_roll_back_with_the_transaction_that_put_them(store: Store) -> None:
    """On PostgreSQL counts put in a transaction travel with its next checkpoint write or
    statement: they must still be there for a read in the transaction, reach the commit when
    nothing follows them, and never outlive a savepoint that rolled back."""
    await store.events.append_all([item_event(t, f"k{i}") for i, t in enumerate("abcd")])
    counter = "heuristic:3:4|history"
    await store.checkpoints.claim("run", "me")
    lease = await store.checkpoints.claim("run", "me")
    async with store.transaction():
        await store.events.put_counts(SID, counter, [(1, 10)])
        with pytest.raises(RuntimeError):
            async with store.transaction():
                await store.events.put_counts(SID, counter, [(2, 20)])
                raise RuntimeError("undo the savepoint")
        assert [r.tokens for r in await store.events.read_items(SID, counter=counter)] == [
            10,
            None,
            None,
            None,
        ]
        await store.events.put_counts(SID, counter, [(3, 30)])
        await store.checkpoints.write("run", {"checkpoint": 1}, trigger="seeded", lease=lease)
        await store.events.put_counts(SID, counter, [(4, 40)])  # nothing follows it but the commit
    assert [r.tokens for r in await store.events.read_items(SID, counter=counter)] == [10, None, 30, 40]
    with pytest.raises(RuntimeError):
        async with store.transaction():
            await store.events.put_counts(SID, counter, [(2, 21)])
            raise RuntimeError("undo it all")
    assert [r.tokens for r in await store.events.read_items(SID, counter=counter)] == [10, None, 30, 40]


async def test_put_counts_checks_its_input(store: Store) -> None:
    with pytest.raises(ModelValidationError, match="count"):
        await store.events.put_counts(SID, "c|history", [(1, -1)])
    with pytest.raises(ModelValidationError, match="counter"):
        await store.events.put_counts(SID, "", [(1, 1)])


async def test_visibilities_are_the_classes_of_a_range(store: Store) -> None:
    await store.events.append_all(
        [
            item_event("a", "k1"),
            item_event("b", "k2", Visibility.tenant("acme")),
            item_event("c", "k3", Visibility.principal("dana")),
        ]
    )
    assert await store.events.visibilities(SID, ITEM_APPENDED, 0, 2) == {
        Visibility.session(),
        Visibility.tenant("acme"),
    }
    assert await store.events.visibilities(SID, ITEM_APPENDED, 2, 3) == {Visibility.principal("dana")}
    assert await store.events.visibilities(SID, "context.compacted", 0, 3) == frozenset()


async def test_prune_keeps_the_versions_asked_for(store: Store) -> None:
    lease = await store.checkpoints.claim("run", "w")
    for version in range(1, 5):
        payload = {"format": "checkpoint.full/1", "checkpoint": {"run_id": "run", "version": version}}
        assert await store.checkpoints.write("run", payload, trigger="compaction", lease=lease) == version
    assert await store.checkpoints.prune("run", 4) == 3
    rows = await store.checkpoints.latest_raw("run")
    assert [r["version"] for r in rows] == [4]
    payload = {"format": "checkpoint.full/1", "checkpoint": {"run_id": "run", "version": 5}}
    assert await store.checkpoints.write("run", payload, trigger="compaction", lease=lease) == 5
    assert await store.checkpoints.prune("run", 1) == 0


@pytest.mark.parametrize(
    ("row", "counts", "reason"),
    [
        ((1, ITEM_APPENDED, "{}", "session", None), None, "item row has 5 columns"),
        ((0, ITEM_APPENDED, "{}", "session", None, 1), None, "bad sequence 0"),
        (("1", ITEM_APPENDED, "{}", "session", None, 1), None, "bad sequence '1'"),
        ((1, ITEM_APPENDED, b"{}", "session", None, 1), None, "payload is bytes, not text"),
        ((1, ITEM_APPENDED, "{}", "session", None, 1), {1: -3}, "bad token count -3"),
        ((1, ITEM_APPENDED, "{}", "session", None, 1), {1: 2.5}, "bad token count 2.5"),
        ((1, ITEM_APPENDED, "{}", "galaxy", None, 1), None, "bad visibility"),
        ((1, ITEM_APPENDED, "{}", "session", None, 0), None, "bad format version 0"),
    ],
)
def test_item_rows_name_what_is_wrong_with_a_row(
    row: tuple[object, ...], counts: dict[object, object] | None, reason: str
) -> None:
    """The columns an item read fetches are checked, each failure naming the row and why."""
    from ctxengine.stores import _batch_rows

    with pytest.raises(StoreCorruption, match=reason) as err:
        _batch_rows.item_rows(SID, [row], counts)
    assert err.value.session_id == SID


def test_item_rows_pass_sound_rows_with_their_counts() -> None:
    from ctxengine.stores import _batch_rows

    rows = [(1, ITEM_APPENDED, "{}", "session", None, 1, 7), (2, ITEM_APPENDED, "{}", "session", None, 2, 7)]
    out = _batch_rows.item_rows(SID, rows, {1: 40})
    assert [(r.sequence, r.payload, r.tokens) for r in out] == [(1, "{}", 40), (2, "{}", None)]


async def test_read_covering_answers_the_typed_read_and_where_the_session_ends(store: Store) -> None:
    """``read_covering`` is ``read`` of some types plus the session's last sequence when it
    ran: a poller for rare events starts its next read there (the planner does, every turn)."""
    plan = "context.plan.created"
    assert await store.events.read_covering(SID, 0, [plan]) == ([], 0)
    await store.events.append_all([item_event(t, f"k{i}") for i, t in enumerate("abc")])
    first = await store.events.append(NewEvent(SID, plan, {"plan": {}}, "plan-1"))
    await store.events.append_all([item_event(t, f"m{i}") for i, t in enumerate("de")])
    events, through = await store.events.read_covering(SID, 0, [plan])
    assert ([e.sequence for e in events], through) == ([first.sequence], 6)
    assert await store.events.read_covering(SID, through, [plan]) == ([], 6)
    later = await store.events.append(NewEvent(SID, plan, {"plan": {}}, "plan-2"))
    events, through = await store.events.read_covering(SID, 6, [plan])
    assert ([e.sequence for e in events], through) == ([later.sequence], 7)
    assert await store.events.read_covering(SID, 9, [plan]) == ([], 9)  # never behind ``after``
    with pytest.raises(ModelValidationError):
        await store.events.read_covering(SID, 0, None)  # type: ignore[arg-type]


async def test_read_covering_fails_closed_on_an_unknown_row_in_its_range(
    store_case: StoreCase, store: Store
) -> None:
    await store.events.append_all([item_event("a", "k1")])
    store_case.inject_event_row(session_id=SID, sequence=2, type="context.future", schema_version=99)
    with pytest.raises(UnsupportedFormat):
        await store.events.read_covering(SID, 0, ["context.plan.created"])


async def test_the_planner_reads_plans_from_where_its_last_read_ended(store: Store) -> None:
    """A warm planner's read covers only what was appended since its last one, and a plan
    another worker writes later is still found."""
    model = ce.ResolvedModel("acme", "m", 64_000, 4_096, 4_096)
    agent, principal = ce.AgentSpec("a", "1", "Be brief."), ce.Principal("p", "t", frozenset())
    mine, theirs = ce.ContextPlanner(store), ce.ContextPlanner(store)
    first = await mine.plan(SID, agent, principal, model, (), policy_version="p1")
    await store.events.append_all([item_event(t, f"k{i}") for i, t in enumerate("abcd")])
    assert await mine.current(SID) == first
    assert mine._cache[SID][1] == 5  # the session's end, not the plan's sequence
    second = await theirs.plan(SID, agent, principal, model, (), policy_version="p2")
    assert second is not None and second.epoch > first.epoch
    assert await mine.current(SID) == second
