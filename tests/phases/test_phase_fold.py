"""The controller folds an instance's log once and then only the events appended since (issue 37, finding 7).

Every call used to read and replay the whole log, re-deciding and re-hashing
every event and copying every tuple of the state per event: quadratic in the
number of events, and a 50 MB draft cost half a second on every later call.
Now a controller keeps the fold of each instance it used last (a bounded
number of them) and reads only the tail after it, which it checks exactly as
a replay would; inside a transaction that may roll back it keeps nothing.
These tests watch what the controller reads and hashes, not the clock
(``benches/bench_phase_state.py`` times it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxengine.phases.controller as controller_module
import ctxengine.phases.decide as decide_module
from ctxengine.errors import ModelValidationError, ProtocolStateError, StoreCorruption
from ctxengine.phases import STAGE_OPERATIONS, ProtocolController, ProtocolState
from ctxengine.phases.transitions import replay
from ctxengine.stores import MemoryStore, SQLiteStore
from ctxengine.stores.events import Event, NewEvent, Store

INSTANCE = "fold"


class Reads:
    """Records each read of ``store`` that asks for the phase event types (the controller's; the
    tests' own replays read every type): the session, ``after`` and how many events came back."""

    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, int, int]] = []
        real = store.events.read

        async def read(
            session_id: str, after: int = 0, types: Iterable[str] | None = None, **kw: Any
        ) -> list[Event]:
            events = await real(session_id, after, types, **kw)
            if types is not None:
                self.calls.append((session_id, after, len(events)))
            return events

        monkeypatch.setattr(store.events, "read", read)

    def take(self) -> list[tuple[str, int, int]]:
        calls, self.calls = self.calls, []
        return calls


def answered(ctl: ProtocolController, state: ProtocolState) -> str:
    return ctl.project(state, STAGE_OPERATIONS[state.stage]).sha256


async def drafted(ctl: ProtocolController, instance_id: str = INSTANCE, revisions: int = 1) -> ProtocolState:
    """An instance whose prompt was drafted and revised ``revisions`` times: 2 + 2 * revisions events."""
    s = await ctl.submit(instance_id, "Summarize the report.")
    s = await ctl.record_artifact(instance_id, "prompt", "GOAL: draft 0", projection_sha256=answered(ctl, s))
    for n in range(1, revisions + 1):
        s = await ctl.revise(instance_id, "prompt", f"shorter {n}", displayed_version=n)
        s = await ctl.record_artifact(
            instance_id, "prompt", f"GOAL: draft {n}", projection_sha256=answered(ctl, s)
        )
    return s


async def replayed(store: Store, instance_id: str = INSTANCE) -> ProtocolState | None:
    return replay(instance_id, await store.events.read(instance_id)).state


async def test_a_later_call_reads_only_the_events_after_those_it_folded(
    store: MemoryStore, ctl: ProtocolController, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = await drafted(ctl)
    reads = Reads(store, monkeypatch)
    assert await ctl.state(INSTANCE) == state
    assert await ctl.state(INSTANCE) == state
    assert reads.take() == [(INSTANCE, 4, 0), (INSTANCE, 4, 0)]

    # Another worker moves the instance on: the next call reads just that event.
    other = ProtocolController(store)
    moved = await other.revise(INSTANCE, "prompt", "even shorter", displayed_version=2)
    reads.take()
    assert await ctl.state(INSTANCE) == moved
    assert reads.take() == [(INSTANCE, 4, 1)]
    # A transition reads the tail too, and then nothing more.
    after = await ctl.record_artifact(
        INSTANCE, "prompt", "GOAL: draft 3", projection_sha256=answered(ctl, moved)
    )
    assert reads.take() == [(INSTANCE, 5, 0)]
    assert await ctl.state(INSTANCE) == after
    assert reads.take() == [(INSTANCE, 6, 0)]
    assert (
        after == await replayed(store)
        and moved == replay(INSTANCE, (await store.events.read(INSTANCE))[:5]).state
    )


async def test_bodies_and_payloads_are_hashed_once_not_on_every_call(
    store: MemoryStore, ctl: ProtocolController, monkeypatch: pytest.MonkeyPatch
) -> None:
    await drafted(ctl, revisions=3)
    hashed: list[str] = []
    real = decide_module.body_digest

    def counting(body: str) -> str:
        hashed.append(body)
        return real(body)

    monkeypatch.setattr(decide_module, "body_digest", counting)
    for _ in range(3):
        await ctl.state(INSTANCE)
    assert hashed == []  # no draft re-hashed, rejected or not
    state = await ctl.revise(INSTANCE, "prompt", "again", displayed_version=4)
    assert hashed == []
    await ctl.record_artifact(INSTANCE, "prompt", "GOAL: final", projection_sha256=answered(ctl, state))
    assert hashed == ["GOAL: final"]  # the new draft, once, when it is recorded
    # A fresh controller (a new process) folds the log once, checking each draft once.
    hashed.clear()
    fresh = ProtocolController(store)
    await fresh.state(INSTANCE)
    await fresh.state(INSTANCE)
    assert sorted(hashed) == sorted(["GOAL: final", *(f"GOAL: draft {n}" for n in range(4))])


async def test_folding_a_log_builds_no_state_per_event(
    store: MemoryStore, ctl: ProtocolController, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rebuilding a frozen state per event copied every tuple per event: quadratic. The fold
    builds the frozen value once per call (and the state before the last event)."""
    state = await drafted(ctl, revisions=40)
    built: list[int] = []
    real_init = ProtocolState.__init__

    def counting_init(self: ProtocolState, *args: Any, **kwargs: Any) -> None:
        built.append(1)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(ProtocolState, "__init__", counting_init)
    assert await ProtocolController(store).state(INSTANCE) == state
    assert len(state.history) == 82 and len(built) <= 2
    assert replay(INSTANCE, await store.events.read(INSTANCE)).state == state
    assert len(built) <= 4


async def test_the_controller_keeps_a_bounded_number_of_instances(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (
        ProtocolController(store).max_cached_instances
        == controller_module.DEFAULT_MAX_CACHED_INSTANCES
        == 256
    )
    ctl = ProtocolController(store, max_cached_instances=2)
    for name in "abc":
        await drafted(ctl, name, revisions=0)
    reads = Reads(store, monkeypatch)
    await ctl.state("b")
    await ctl.state("c")
    await ctl.state("a")  # evicted by c: folded from the start; this evicts b
    await ctl.state("c")
    await ctl.state("b")
    assert reads.take() == [("b", 2, 0), ("c", 2, 0), ("a", 0, 2), ("c", 2, 0), ("b", 0, 2)]

    uncached = ProtocolController(store, max_cached_instances=0)
    await uncached.state("a")
    await uncached.state("a")
    assert reads.take() == [("a", 0, 2), ("a", 0, 2)]
    for bad in (-1, True, 1.5, "8"):
        with pytest.raises(ModelValidationError, match="max_cached_instances"):
            ProtocolController(store, max_cached_instances=bad)  # type: ignore[arg-type]


async def test_a_cached_fold_checks_the_new_tail_like_a_replay(
    store: MemoryStore, ctl: ProtocolController, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = await drafted(ctl)
    assert state.displayed is not None
    # A forged event: it claims a confirmation of a version that is not displayed.
    forged = {"kind": "prompt", "version": 9, "digest": state.displayed.digest, "output_mode": None}
    await store.events.append(NewEvent(INSTANCE, "phase.confirmed", forged, "phase:fold:5"))
    reads = Reads(store, monkeypatch)
    with pytest.raises(StoreCorruption) as first:
        await ctl.state(INSTANCE)
    assert first.value.sequence == 5 and reads.take() == [(INSTANCE, 4, 1)]
    # The fold that failed is not kept: the next call starts over and fails closed again.
    with pytest.raises(StoreCorruption):
        await ctl.state(INSTANCE)
    assert reads.take() == [(INSTANCE, 0, 5)]
    with pytest.raises(StoreCorruption):
        await ctl.revise(INSTANCE, "prompt", "x", displayed_version=2)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_rolled_back_transition_leaves_the_kept_fold_as_it_was(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store: Any = MemoryStore() if kind == "memory" else await SQLiteStore(tmp_path / "phase.db").open()
    try:
        ctl = ProtocolController(store)
        state = await drafted(ctl)

        class Boom(Exception):
            pass

        with pytest.raises(Boom):
            async with store.transaction():
                inside = await ctl.revise(INSTANCE, "prompt", "rolled back", displayed_version=2)
                assert inside.stage == "prompt_revising" and await ctl.state(INSTANCE) == inside
                raise Boom
        reads = Reads(store, monkeypatch)
        assert await ctl.state(INSTANCE) == state == await replayed(store)
        assert reads.take() == [(INSTANCE, 4, 0)]  # the kept fold never saw the rolled-back event
        # The same sequence now holds another decision; the controller folds that one.
        moved = await ProtocolController(store).revise(INSTANCE, "prompt", "kept", displayed_version=2)
        assert await ctl.state(INSTANCE) == moved
        assert moved.pending_feedback is not None and moved.pending_feedback.text == "kept"
    finally:
        await store.close()


def _moves(ctl: ProtocolController, s: ProtocolState, n: int) -> list[Callable[[], Awaitable[ProtocolState]]]:
    """The calls that move ``s`` on (each as a thunk), by stage."""
    i, shown = s.instance_id, s.displayed
    reply = (lambda: answered(ctl, s)) if s.stage in STAGE_OPERATIONS else (lambda: "")
    if s.stage in ("prompt_drafting", "prompt_revising", "plan_drafting", "plan_revising"):
        kind = s.stage.split("_")[0]
        return [lambda: ctl.record_artifact(i, kind, f"{kind} body {n}", projection_sha256=reply())]
    if shown is not None:
        k, v, d = shown.kind, shown.version, shown.digest
        moves = [
            lambda: ctl.revise(i, k, f"feedback {n}", displayed_version=v),
            lambda: ctl.confirm(i, k, version=v, digest=d),
        ]
        if k == "plan":
            moves += [
                lambda: ctl.change_request(i, f"change {n}", displayed_version=v, digest=d),
                lambda: ctl.review(i, f"review {n}", displayed_version=v, digest=d),
            ]
        return moves
    if s.stage == "review_interpreting":
        return [
            lambda verdict=verdict: ctl.interpret_review(i, verdict, projection_sha256=reply())
            for verdict in ("task_change", "approach_change")
        ]
    if s.stage == "executing":
        return [
            lambda: ctl.request_input(i, f"question {n}", projection_sha256=reply()),
            lambda: ctl.complete(i, f"result {n}", projection_sha256=reply()),
            lambda: ctl.stop(i, reason=f"stopped {n}"),
        ]
    if s.stage == "waiting_input":
        pending = s.pending_input
        assert pending is not None
        return [
            lambda: ctl.provide_input(i, f"answer {n}", request_number=pending.number),
            lambda: ctl.fail(i, f"failed {n}"),
        ]
    return []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), sizes=st.tuples(st.sampled_from([0, 1, 256]), st.sampled_from([0, 1, 256])))
def test_controllers_taking_turns_on_one_store_hold_what_a_replay_holds(
    data: st.DataObject, sizes: tuple[int, int]
) -> None:
    """Two controllers (two workers) with any cache sizes drive one instance, now one, now the
    other, each also driving an instance of its own (evicting with a cache of one), and
    repeating the other's last call now and then (a retry: nothing is written): every state
    either returns is the log's replay."""

    async def scenario() -> None:
        store = MemoryStore()
        workers = [ProtocolController(store, max_cached_instances=size) for size in sizes]
        await workers[0].submit(INSTANCE, "Summarize the report.")
        last: Callable[[ProtocolController], Awaitable[ProtocolState]] | None = None
        for n in range(data.draw(st.integers(1, 40), label="steps")):
            w = data.draw(st.sampled_from([0, 1]), label="worker")
            ctl = workers[w]
            if data.draw(st.booleans(), label="own instance"):
                own = f"own-{w}"
                try:
                    await ctl.state(own)
                except ProtocolStateError:
                    await ctl.submit(own, "Another task.")
            if last is not None and data.draw(st.integers(0, 4), label="retry") == 0:
                written = len(await store.events.read(INSTANCE))
                assert await last(ctl) == await replayed(store)
                assert len(await store.events.read(INSTANCE)) == written
            s = await ctl.state(INSTANCE)
            moves = _moves(ctl, s, n)
            if not moves:
                break
            move = data.draw(st.sampled_from(range(len(moves))), label="move")
            state = await moves[move]()
            assert state == await replayed(store)
            for each in workers:
                assert await each.state(INSTANCE) == state

            def again(c: ProtocolController, s: ProtocolState = s, move: int = move, n: int = n) -> Any:
                return _moves(c, s, n)[move]()

            last = again

    asyncio.run(scenario())
