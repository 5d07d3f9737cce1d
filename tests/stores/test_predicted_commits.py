"""Predicted commits (issue 13, ADR 0013): a worker that knows the session's tail commits a
step in one call (PostgreSQL: one statement; SQLite: one trip to the worker thread); when
a prediction does not hold, nothing of it is written and the same writes take the ordinary
path, with the same outcome.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

import ctxengine as ce
from ctxengine.cli.turns import PRINCIPAL, ScriptedWorker
from ctxengine.errors import StorePredictionMissed, StoreUnavailable
from ctxengine.model.clock import FixedClock
from ctxengine.runtime.checkpoints import latest_checkpoint
from ctxengine.stores import postgres_predicted
from ctxengine.stores.events import NewEvent, Store
from ctxengine.stores.postgres import PostgresStore
from ctxengine.stores.sqlite import SQLiteStore
from sessionkit import SMALL
from storekit import StoreCase

SID = "predicted"
CLOCK = datetime(2026, 11, 30, 9, tzinfo=UTC)


KINDS = ("postgres", "sqlite")


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def _open(factory: Callable[[str], StoreCase], kind: str = "postgres") -> Store:
    return await factory(kind).open(FixedClock(CLOCK))


async def _log(store: Store) -> tuple[list[tuple[Any, ...]], dict[str, list[Any]]]:
    events = await store.events.read(SID)
    head = [(e.sequence, e.type, e.payload, e.derivation_key, e.run_id, e.visibility) for e in events]
    rows = [(*row, e.created_at, e.format_version) for row, e in zip(head, events, strict=True)]
    runs = sorted({e.run_id for e in events if e.run_id})
    checkpoints = {r: [(c["version"], c["kind"], c["payload"]) for c in await store.checkpoints.latest_raw(r)]
                   for r in runs}  # fmt: skip
    return rows, checkpoints


async def test_turns_commit_in_one_call_and_store_what_the_ordinary_path_stores(
    store_case_factory: Callable[[str], StoreCase], kind: str
) -> None:
    predicted, ordinary = await _open(store_case_factory, kind), await _open(store_case_factory, kind)
    try:
        fast = ScriptedWorker(predicted, model=SMALL)
        slow = ScriptedWorker(ordinary, model=SMALL)
        slow.loop.commits._predicted = None  # the ordinary path only
        compactions = 0
        for turn in range(1, 31):
            a = await fast.turn(SID, turn)
            b = await slow.turn(SID, turn)
            assert (a.steps, a.compactions, a.acked) == (b.steps, b.compactions, b.acked)
            compactions += a.compactions
        assert compactions > 0  # the compaction commits were predicted too
        assert await _log(predicted) == await _log(ordinary)
        assert fast.loop.commits.missed == 0 and fast.loop.commits.one_call > 60
        assert slow.loop.commits.one_call == 0
    finally:
        await predicted.close()
        await ordinary.close()


async def test_a_session_another_worker_moved_on_misses_once_then_predicts_again(
    store_case_factory: Callable[[str], StoreCase], kind: str
) -> None:
    case = store_case_factory(kind)
    mine, theirs = await case.open(FixedClock(CLOCK)), await case.open(FixedClock(CLOCK))
    try:
        me, other = ScriptedWorker(mine, model=SMALL), ScriptedWorker(theirs, model=SMALL)
        for turn in range(1, 4):
            await me.turn(SID, turn)
        await other.turn(SID, 4)  # this worker's view of the tail is now stale
        missed, calls = me.loop.commits.missed, me.loop.commits.one_call
        await me.turn(SID, 5)
        assert me.loop.commits.missed == missed + 1
        await me.turn(SID, 6)
        assert me.loop.commits.one_call > calls and me.loop.commits.missed == missed + 1
        events = await mine.events.read(SID)
        assert [e.sequence for e in events] == list(range(1, len(events) + 1))
        keys = [e.derivation_key for e in events]
        assert len(keys) == len(set(keys))
        for turn in range(1, 7):  # each turn's user message and answer stored once
            assert keys.count(f"user:{SID}:{turn}") == 1
            assert sum(k.startswith(f"conversation.item:{SID}-run-{turn}:") for k in keys) == (
                3 if turn % 3 == 0 else 1
            )
    finally:
        await mine.close()
        await theirs.close()


def _event(key: str) -> NewEvent:
    return NewEvent(SID, "conversation.item.appended", {"kind": "user", "text": key}, key)


@pytest.fixture
async def pg(store_case_factory: Callable[[str], StoreCase], kind: str) -> Any:
    """A store that takes predictions (either kind)."""
    store = await _open(store_case_factory, kind)
    assert isinstance(store, (PostgresStore, SQLiteStore))
    try:
        yield store
    finally:
        await store.close()


async def test_a_prediction_that_does_not_hold_writes_nothing(pg: PostgresStore | SQLiteStore) -> None:
    await pg.events.append(_event("first"))
    lease = await pg.checkpoints.claim("r", "w")
    # The session's next sequence is 2, not 5.
    with pytest.raises(StorePredictionMissed, match="moved on"):
        async with pg._predicted(SID, 5, "r", 1):
            await pg.events.append_all([_event("a"), _event("b")])
    # A key stored already (a retried step).
    with pytest.raises(StorePredictionMissed, match="stored already"):
        async with pg._predicted(SID, 2, "r", 1):
            await pg.events.append_all([_event("first")])
    # A lease that is not the run's.
    with pytest.raises(StorePredictionMissed, match="lease and version"):
        async with pg._predicted(SID, 2, "r", 1):
            await pg.events.append_all([_event("c")])
            await pg.checkpoints.write("r", {"x": 1}, trigger="seeded", lease=ce.Lease("w", 9, "r"))
    # A version that is not the next.
    with pytest.raises(StorePredictionMissed, match="lease and version"):
        async with pg._predicted(SID, 2, "r", 3):
            await pg.checkpoints.write("r", {"x": 1}, trigger="seeded", lease=lease)
    # A claim of a run claimed before.
    with pytest.raises(StorePredictionMissed, match="claimed before"):
        async with pg._predicted(SID, 2, "r", 1):
            await pg.checkpoints.claim("r", "other")
    assert [e.derivation_key for e in await pg.events.read(SID)] == ["first"]
    assert await pg.checkpoints.latest_raw("r") == []
    # And when every prediction holds, all of it is written, as predicted.
    async with pg._predicted(SID, 2, "r", 1):
        stored, written = await pg.events.append_all([_event("c"), _event("d")])
        version = await pg.checkpoints.write("r", {"x": 1}, trigger="seeded", lease=lease)
        await pg.events.put_counts(SID, "test/counter", [(2, 7)])
    assert ([e.sequence for e in stored], written, version) == ([2, 3], 2, 1)
    assert [(e.sequence, e.derivation_key, e.created_at) for e in await pg.events.read(SID)][1:] == [
        (e.sequence, e.derivation_key, e.created_at) for e in stored
    ]
    assert [(c["version"], c["payload"]) for c in await pg.checkpoints.latest_raw("r")] == [(1, {"x": 1})]
    rows = await pg.events.read_items(SID, 1, counter="test/counter")
    assert [(r.sequence, r.tokens) for r in rows] == [(2, 7), (3, None)]


async def test_what_needs_an_answer_from_the_store_misses_before_anything_is_sent(
    pg: PostgresStore | SQLiteStore,
) -> None:
    with pytest.raises(StorePredictionMissed, match="needs an answer from the"):
        async with pg._predicted(SID, 1, "r", 1):
            await pg.events.append_all([_event("a")])
            await pg.events.read(SID)
    with pytest.raises(StorePredictionMissed, match="inside a transaction"):
        async with pg.transaction(), pg._predicted(SID, 1, "r", 1):
            pass
    with pytest.raises(StorePredictionMissed, match="transaction inside"):
        async with pg._predicted(SID, 1, "r", 1), pg.transaction():
            pass
    with pytest.raises(StorePredictionMissed, match="another session"):
        async with pg._predicted(SID, 1, "r", 1):
            await pg.events.append_all([NewEvent("elsewhere", "conversation.item.appended", {}, "k")])
    with pytest.raises(StorePredictionMissed, match="repeats"):
        async with pg._predicted(SID, 1, "r", 1):
            await pg.events.append_all([_event("a"), _event("a")])
    assert await pg.events.read(SID) == []
    assert await pg.events.read("elsewhere") == []


async def test_a_fresh_worker_seeds_an_older_seed_in_one_call(
    store_case_factory: Callable[[str], StoreCase], kind: str
) -> None:
    """The item read of a seed also says where the session ends now, so a worker that has
    never written to the session predicts the seeded event's sequence right, even when the
    log moved on past the seed (a run picked up late, a replay)."""
    case = store_case_factory(kind)
    first = await case.open(FixedClock(CLOCK))
    try:
        writer = ScriptedWorker(first, model=SMALL)
        for turn in range(1, 6):
            await writer.turn(SID, turn)
        seed = next(e.sequence for e in await first.events.read(SID) if e.derivation_key == f"user:{SID}:3")
        tail = (await first.events.read(SID))[-1].sequence
    finally:
        await first.close()
    for name, predicting in (("fresh", True), ("ordinary", False)):
        store = await case.open(FixedClock(CLOCK))
        try:
            worker = ScriptedWorker(store, model=SMALL)
            if not predicting:
                worker.loop.commits._predicted = None
            await worker.planner.current(SID)
            run = ce.RunContext(f"late-{name}", SID, seed)
            lease = await store.checkpoints.claim(run.run_id, name)
            checkpoint = await worker.loop._seed_checkpoint(run, PRINCIPAL, lease=lease)
            assert (worker.loop.commits.one_call, worker.loop.commits.missed) == (
                (1, 0) if predicting else (0, 0)
            )
            events = await store.events.read(SID, after=tail)
            assert [e.derivation_key for e in events][-1] == f"run.checkpoint.seeded:late-{name}"
            assert await latest_checkpoint(store, run.run_id) == checkpoint
            tail = events[-1].sequence
            if predicting:
                seeded = checkpoint
            else:
                assert replace(checkpoint, run_id=seeded.run_id) == seeded
        finally:
            await store.close()


async def test_a_call_that_fails_once_sent_raises_and_is_not_run_again(
    store_case_factory: Callable[[str], StoreCase], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lost connection after the call went out may have committed it: the step raises the
    store's retryable error, as a failed ordinary commit does, instead of writing it again."""
    store = await _open(store_case_factory)
    try:
        worker = ScriptedWorker(store, model=SMALL)
        await worker.turn(SID, 1)
        run, lease, checkpoint = await worker.loop.start_run(
            SID, "lost", ce.UserMessage("hi"), PRINCIPAL, owner="w"
        )
        before = await store.events.read(SID)

        async def lost(*_: Any) -> None:
            raise StoreUnavailable("the connection was lost after the call went out")

        monkeypatch.setattr(postgres_predicted, "commit", lost)
        calls = worker.loop.commits.one_call
        with pytest.raises(StoreUnavailable, match="lost after"):
            await worker.loop.record_step(run, checkpoint, [ce.AssistantMessage("done")], lease=lease)
        assert (worker.loop.commits.one_call, worker.loop.commits.missed) == (calls, 0)
        assert await store.events.read(SID) == before  # not written again on the ordinary path
    finally:
        await store.close()


async def test_sent_is_called_once_the_write_set_is_on_its_way(pg: PostgresStore | SQLiteStore) -> None:
    calls: list[int] = []
    lease = await pg.checkpoints.claim("r", "w")
    async with pg._predicted(SID, 1, "r", 1, sent=lambda: calls.append(len(calls))):
        await pg.events.append_all([_event("a")])
        await pg.checkpoints.write("r", {"x": 1}, trigger="seeded", lease=lease)
        assert calls == []  # only queued so far
    assert calls == [0]
    assert [e.derivation_key for e in await pg.events.read(SID)] == ["a"]
    async with pg._predicted(SID, 2, "r", 2, sent=lambda: calls.append(len(calls))):
        pass  # nothing to write: nothing sent
    assert calls == [0]
