"""The store contract: one suite, run against MemoryStore, SQLiteStore and PostgresStore."""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test
from storekit import STORE_KINDS, StoreCase

from ctxengine.core.canonical import canonical_json
from ctxengine.errors import (
    IdempotencyConflict,
    LeaseLost,
    ModelValidationError,
    StoreCorruption,
    StoreError,
    UnsupportedFormat,
)
from ctxengine.model import Principal, ToolCall, ToolResult, UserMessage
from ctxengine.model.clock import FixedClock
from ctxengine.runtime.session import append_item, session_history
from ctxengine.stores import open_store
from ctxengine.stores.events import EVENT_TYPES, Event, Lease, NewEvent, Store, Visibility

PLAN = "context.plan.created"
ROTATED = "context.epoch.rotated"
WS = "context.working_state.updated"
COMPACTED = "context.compacted"


def new(session: str, key: str, payload: dict[str, Any] | None = None, **kw: Any) -> NewEvent:
    event_type = kw.pop("type", PLAN)
    return NewEvent(session, event_type, {"k": key} if payload is None else payload, key, **kw)


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
# fail closed on corrupt rows

CORRUPTIONS: dict[str, dict[str, Any]] = {
    "bad-json": {"payload": "{not json"},
    "not-an-object": {"payload": "[1, 2]"},
    "unknown-type": {"type": "context.plan.exploded"},
    "newer-schema": {"schema_version": 999},
    "bad-visibility": {"visibility_scope": "galaxy"},
}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
async def test_corrupt_rows_raise_store_corruption(
    store_case: StoreCase, store: Store, corruption: str
) -> None:
    await store.events.append(new("sess-c", "ok"))
    store_case.inject_event_row(session_id="sess-c", sequence=2, **CORRUPTIONS[corruption])
    # A row from a newer writer is not corrupt: it needs an upgrade (ADR 0009).
    expected = UnsupportedFormat if corruption == "newer-schema" else StoreCorruption
    with pytest.raises(expected) as err:
        await store.events.read("sess-c")
    assert "sess-c" in str(err.value) and "sequence 2" in str(err.value)
    if isinstance(err.value, StoreCorruption):
        assert (err.value.session_id, err.value.sequence) == ("sess-c", 2)
    else:
        assert err.value.needed_version == 999 and "version 999" in str(err.value)
    # No read path skips the row: typed reads and latest_before fetch it too.
    with pytest.raises(expected):
        await store.events.read("sess-c", types=[PLAN])
    with pytest.raises(expected):
        await store.events.latest_before("sess-c", 3, PLAN, Principal("p", "t"))
    with pytest.raises(expected):
        await store.events.latest_before("sess-c", 3, PLAN)
    # Rows below the corrupt one still read.
    assert [e.sequence for e in await store.events.read("sess-c", before=2)] == [1]


@pytest.mark.parametrize(
    "bad", [{"payload": "nope"}, {"kind": "partial"}, {"trigger": "lunch"}, {"schema_version": 999}]
)
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_corrupt_checkpoint_rows_raise_store_corruption(
    store_case_factory: Callable[[str], StoreCase], kind: str, bad: dict[str, Any]
) -> None:
    case = store_case_factory(kind)
    store = await case.open()
    lease = await store.checkpoints.claim("run-9", "w")
    await store.checkpoints.write("run-9", {"ok": 1}, trigger="compaction", lease=lease)
    row = {"kind": "delta", "trigger": "tool_completed", "payload": "{}", "schema_version": 1, **bad}
    case.raw_execute(
        "INSERT INTO ctxengine_checkpoints (run_id, version, kind, trigger, payload, lease_epoch, "
        "created_at, schema_version) VALUES ('run-9', 2, ?, ?, ?, 1, ?, ?)",
        (row["kind"], row["trigger"], row["payload"], "2025-01-01T00:00:00+00:00", row["schema_version"]),
    )
    if bad.get("schema_version") == 999:
        with pytest.raises(UnsupportedFormat) as newer:
            await store.checkpoints.latest_raw("run-9")
        assert "run-9" in str(newer.value) and newer.value.needed_version == 999
    else:
        with pytest.raises(StoreCorruption) as err:
            await store.checkpoints.latest_raw("run-9")
        assert "run-9" in str(err.value) and err.value.sequence == 2
    await case.close_all()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_store_schema_newer_than_the_code_is_refused(
    store_case_factory: Callable[[str], StoreCase], kind: str
) -> None:
    case = store_case_factory(kind)
    await (await case.open()).close()
    case.raw_execute("UPDATE ctxengine_schema_version SET version = 999 WHERE component = 'store'")
    with pytest.raises(StoreError, match="schema version 999"):
        await case.open()


async def test_open_store_rejects_unknown_urls(tmp_path: Any) -> None:
    with pytest.raises(StoreError, match="unknown store URL scheme 'mysql'"):
        await open_store("mysql://root:secret@db/x")
    with pytest.raises(StoreError, match="sqlite:///absolute/path"):
        await open_store("sqlite://relative.db")
    store = await open_store("sqlite:///:memory:")
    assert (await store.events.append(new("s", "k"))).sequence == 1
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.events.read("s")


async def test_open_store_accepts_the_postgres_scheme_alias(
    store_case_factory: Callable[[str], StoreCase],
) -> None:
    case = store_case_factory("postgres")
    assert case.url.startswith("postgresql://")
    store = await open_store("postgres://" + case.url.split("://", 1)[1])
    try:
        assert (await store.events.append(new("s", "k"))).sequence == 1
    finally:
        await store.close()


# --------------------------------------------------------------------------
# transactions and checkpoints


async def test_transaction_commits_event_and_checkpoint_together(store: Store) -> None:
    lease = await store.checkpoints.claim("run-1", "worker-a")
    async with store.transaction():
        event = await store.events.append(new("s", "compaction:1", type=COMPACTED))
        version = await store.checkpoints.write("run-1", {"v": 1}, trigger="compaction", lease=lease)
        assert [e.sequence for e in await store.events.read("s")] == [1]  # own writes are visible
    assert await store.events.read("s") == [event]
    assert [row["version"] for row in await store.checkpoints.latest_raw("run-1")] == [version] == [1]


async def test_transaction_rolls_back_everything_on_error(store: Store) -> None:
    lease = await store.checkpoints.claim("run-1", "worker-a")
    await store.checkpoints.write("run-1", {"v": 1}, trigger="model_response", lease=lease)
    outside: list[list[Event]] = []

    async def read_outside() -> None:
        outside.append(await store.events.read("s"))

    with pytest.raises(RuntimeError, match="boom"):
        async with store.transaction():
            await store.events.append(new("s", "compaction:1", type=COMPACTED))
            await store.checkpoints.write("run-1", {"v": 2}, trigger="compaction", lease=lease)
            await store.checkpoints.claim("run-1", "worker-b")
            # A task started in a fresh context is outside the transaction
            # (tasks spawned with the current context would join it).
            reader = asyncio.create_task(read_outside(), context=contextvars.Context())
            await asyncio.sleep(0.05)
            raise RuntimeError("boom")
    await reader
    assert outside == [[]]  # never saw the uncommitted event
    assert await store.events.read("s") == []
    assert [row["payload"] for row in await store.checkpoints.latest_raw("run-1")] == [{"v": 1}]
    # The claim inside the transaction was rolled back too: the old lease still writes.
    assert await store.checkpoints.write("run-1", {"v": 2}, trigger="model_response", lease=lease) == 2
    # And the rolled-back sequence is reused: no gap.
    assert (await store.events.append(new("s", "later"))).sequence == 1


async def test_a_lost_lease_inside_a_transaction_rolls_it_back(store: Store) -> None:
    stale = await store.checkpoints.claim("run-1", "worker-a")
    await store.checkpoints.claim("run-1", "worker-b")
    with pytest.raises(LeaseLost):
        async with store.transaction():
            await store.events.append(new("s", "compaction:1", type=COMPACTED))
            await store.checkpoints.write("run-1", {"v": 1}, trigger="compaction", lease=stale)
    assert await store.events.read("s") == []
    assert await store.checkpoints.latest_raw("run-1") == []


async def test_a_cancelled_transaction_leaves_the_store_usable(store: Store) -> None:
    entered = asyncio.Event()

    async def stuck() -> None:
        async with store.transaction():
            await store.events.append(new("s", "never"))
            entered.set()
            await asyncio.sleep(30)

    task = asyncio.create_task(stuck())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await store.events.append(new("s", "after"))).sequence == 1
    assert [e.derivation_key for e in await store.events.read("s")] == ["after"]


async def test_a_nested_transaction_is_a_savepoint(store: Store) -> None:
    lease = await store.checkpoints.claim("run-1", "w")
    async with store.transaction():
        await store.events.append(new("s", "outer"))
        with pytest.raises(RuntimeError):
            async with store.transaction():
                await store.events.append(new("s", "inner"))
                await store.checkpoints.write("run-1", {"inner": True}, trigger="compaction", lease=lease)
                raise RuntimeError("inner fails")
        async with store.transaction():
            await store.events.append(new("s", "inner-ok"))
        with pytest.raises(StoreError, match="inside its own transaction"):
            await store.close()
    assert [(e.sequence, e.derivation_key) for e in await store.events.read("s")] == [
        (1, "outer"),
        (2, "inner-ok"),
    ]
    assert await store.checkpoints.latest_raw("run-1") == []


async def test_claim_fences_older_leases(store: Store) -> None:
    first = await store.checkpoints.claim("run-1", "worker-a")
    assert first == Lease("worker-a", 1, "run-1")
    assert await store.checkpoints.write("run-1", {"n": 1}, trigger="model_response", lease=first) == 1
    second = await store.checkpoints.claim("run-1", "worker-b")
    assert second == Lease("worker-b", 2, "run-1")
    with pytest.raises(LeaseLost) as err:
        await store.checkpoints.write("run-1", {"n": 2}, trigger="tool_completed", lease=first)
    assert "run-1" in str(err.value) and "epoch 1" in str(err.value) and "epoch 2" in str(err.value)
    assert [row["payload"] for row in await store.checkpoints.latest_raw("run-1")] == [{"n": 1}]
    assert await store.checkpoints.write("run-1", {"n": 2}, trigger="tool_completed", lease=second) == 2
    with pytest.raises(LeaseLost, match="claimed for run 'run-1'"):
        await store.checkpoints.write("run-2", {}, trigger="tool_completed", lease=second)
    with pytest.raises(LeaseLost, match="never claimed"):
        await store.checkpoints.write("run-2", {}, trigger="tool_completed", lease=Lease("x", 1, "run-2"))
    # Leases are per run.
    assert await store.checkpoints.claim("run-2", "worker-a") == Lease("worker-a", 1, "run-2")


async def test_a_lease_writes_only_the_run_it_was_claimed_for(store: Store) -> None:
    x = await store.checkpoints.claim("run-x", "worker")
    y = await store.checkpoints.claim("run-y", "worker")
    assert (x.owner, x.epoch) == (y.owner, y.epoch)  # same owner and epoch, different runs
    with pytest.raises(LeaseLost, match="claimed for run 'run-x'"):
        await store.checkpoints.write("run-y", {"n": 1}, trigger="model_response", lease=x)
    assert await store.checkpoints.latest_raw("run-y") == []
    assert await store.checkpoints.write("run-y", {"n": 1}, trigger="model_response", lease=y) == 1


async def test_epochs_survive_delete_so_old_leases_stay_fenced(store: Store) -> None:
    old = await store.checkpoints.claim("run-d", "worker-a")
    await store.checkpoints.write("run-d", {"n": 1}, trigger="model_response", lease=old)
    await store.checkpoints.delete("run-d")
    assert await store.checkpoints.latest_raw("run-d") == []
    with pytest.raises(LeaseLost):  # delete fences the current lease too
        await store.checkpoints.write("run-d", {"n": 2}, trigger="model_response", lease=old)
    new = await store.checkpoints.claim("run-d", "worker-a")
    assert new.epoch > old.epoch + 1
    with pytest.raises(LeaseLost):
        await store.checkpoints.write("run-d", {"n": 2}, trigger="model_response", lease=old)
    assert await store.checkpoints.latest_raw("run-d") == []
    assert await store.checkpoints.write("run-d", {"n": 3}, trigger="model_response", lease=new) == 1


async def test_checkpoint_rows_from_the_newest_full_snapshot(store: Store) -> None:
    lease = await store.checkpoints.claim("run-1", "w")
    assert await store.checkpoints.latest_raw("run-1") == []
    with pytest.raises(ModelValidationError, match="no full snapshot"):
        await store.checkpoints.write("run-1", {}, trigger="tool_completed", lease=lease, kind="delta")
    with pytest.raises(ModelValidationError, match="unknown trigger 'lunch'"):
        await store.checkpoints.write("run-1", {}, trigger="lunch", lease=lease)
    with pytest.raises(ModelValidationError, match="unknown kind"):
        await store.checkpoints.write("run-1", {}, trigger="compaction", lease=lease, kind="half")  # type: ignore[arg-type]
    plan = ["full", "delta", "delta", "full", "delta"]
    for i, kind in enumerate(plan):
        trigger = "compaction" if kind == "full" else "tool_completed"
        version = await store.checkpoints.write("run-1", {"i": i}, trigger=trigger, lease=lease, kind=kind)  # type: ignore[arg-type]
        assert version == i + 1
    rows = await store.checkpoints.latest_raw("run-1")
    assert [(r["version"], r["kind"], r["trigger"], r["payload"]) for r in rows] == [
        (4, "full", "compaction", {"i": 3}),
        (5, "delta", "tool_completed", {"i": 4}),
    ]
    await store.checkpoints.delete("run-1")
    assert await store.checkpoints.latest_raw("run-1") == []
    with pytest.raises(LeaseLost):
        await store.checkpoints.write("run-1", {}, trigger="compaction", lease=lease)


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


# --------------------------------------------------------------------------
# stateful: the log replays to a plain model after every step

T = TypeVar("T")
SESSIONS = ("s1", "s2", "s3")
KEYS = ("k1", "k2", "k3", "k4")
SIMPLE_TYPES = sorted(EVENT_TYPES - {PLAN, ROTATED})
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)
payloads = st.dictionaries(st.sampled_from(["a", "b", "é", "z"]), json_values, max_size=3)


class StoreLogMachine(RuleBasedStateMachine):
    """Appends, repeats keys, rotates plan epochs and reopens the store."""

    @staticmethod
    def new_case() -> StoreCase:
        raise NotImplementedError("subclasses name the store kind")

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.case = self.new_case()
        self.store: Store = self.run(self.case.open())
        # session -> [(derivation_key, type, canonical payload)] in sequence order
        self.model: dict[str, list[tuple[str, str, dict[str, Any]]]] = {s: [] for s in SESSIONS}
        self.epochs = dict.fromkeys(SESSIONS, 0)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def _expect_append(self, event: NewEvent) -> None:
        log = self.model[event.session_id]
        canonical = json.loads(canonical_json(event.payload))
        known = [i for i, (key, _, _) in enumerate(log) if key == event.derivation_key]
        if known and log[known[0]][1:] != (event.type, canonical):
            with pytest.raises(IdempotencyConflict):
                self.run(self.store.events.append(event))
            return
        stored = self.run(self.store.events.append(event))
        if known:
            assert stored.sequence == known[0] + 1
        else:
            log.append((event.derivation_key, event.type, canonical))
            assert stored.sequence == len(log)
        assert (stored.type, stored.payload) == (event.type, canonical)

    @initialize()
    def start(self) -> None:
        pass

    @rule(
        session=st.sampled_from(SESSIONS),
        key=st.sampled_from(KEYS),
        event_type=st.sampled_from(SIMPLE_TYPES),
        payload=payloads,
    )
    def append(self, session: str, key: str, event_type: str, payload: dict[str, Any]) -> None:
        self._expect_append(NewEvent(session, event_type, payload, key))

    @rule(session=st.sampled_from(SESSIONS), data=st.data())
    def repeat_a_key(self, session: str, data: st.DataObject) -> None:
        log = self.model[session]
        if not log:
            return
        key, event_type, payload = data.draw(st.sampled_from(log))
        self._expect_append(NewEvent(session, event_type, payload, key))

    @rule(session=st.sampled_from(SESSIONS), model_name=st.sampled_from(["m1", "m2"]))
    def rotate_epoch(self, session: str, model_name: str) -> None:
        epoch = self.epochs[session] + 1
        event_type = PLAN if epoch == 1 else ROTATED
        key = f"context.plan:{session}:{epoch}"
        self._expect_append(NewEvent(session, event_type, {"epoch": epoch, "model": model_name}, key))
        self.epochs[session] = epoch

    @rule(session=st.sampled_from(SESSIONS))
    def replan_the_current_epoch(self, session: str) -> None:
        """A concurrent planner repeating the newest epoch event writes nothing."""
        epoch = self.epochs[session]
        if epoch:
            key = f"context.plan:{session}:{epoch}"
            stored = next(entry for entry in self.model[session] if entry[0] == key)
            self._expect_append(NewEvent(session, stored[1], stored[2], key))

    @rule()
    def reopen(self) -> None:
        if self.case.kind != "memory":
            self.run(self.store.close())
            self.store = self.run(self.case.open())

    @invariant()
    def replay_matches_the_model(self) -> None:
        for session in SESSIONS:
            events = self.run(self.store.events.read(session))
            got = [(e.sequence, e.derivation_key, e.type, e.payload) for e in events]
            want = [(i + 1, *entry) for i, entry in enumerate(self.model[session])]
            assert got == want
            epoch = self.epochs[session]
            if epoch:
                latest = max((e for e in events if e.type in (PLAN, ROTATED)), key=lambda e: e.sequence)
                assert latest.payload["epoch"] == epoch

    def teardown(self) -> None:
        try:
            self.run(self.store.close())
            self.run(self.case.close_all())
        finally:
            self.loop.close()


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_stateful_replay_matches_a_plain_model(
    store_case_factory: Callable[[str], StoreCase], kind: str
) -> None:
    if kind == "postgres":
        store_case_factory("postgres")  # start the server (or skip) before hypothesis runs
    machine = type(
        f"{kind.title()}LogMachine",
        (StoreLogMachine,),
        {"new_case": staticmethod(lambda: store_case_factory(kind))},
    )
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=25,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
