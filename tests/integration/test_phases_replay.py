"""Phase protocol over real stores (issue 6, acceptance 4): the log is the state.

A fresh controller on its own connection rebuilds every instance from the
``phase.*`` events and compiles byte-identical projections, with the same
``projection_sha256``, on SQLite and PostgreSQL alike; concurrent workers
deciding the same transition leave one event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from storekit import StoreCase

from ctxengine.core.canonical import canonical_json
from ctxengine.errors import ProtocolStateError
from ctxengine.model.clock import FixedClock
from ctxengine.phases import PHASE_EVENT_TYPES, Projection, ProtocolController, ProtocolState, body_digest
from ctxengine.phases.transitions import replay
from ctxengine.stores import MemoryStore
from phase_fixtures import PROMPT_V1, REQUEST, SOURCES, full_protocol, text_of

REPLAY_KINDS = ("sqlite", "postgres")


def identity(projection: Projection) -> tuple[bytes, bytes]:
    return projection.request.canonical_bytes(), canonical_json(projection.manifest)


@pytest.mark.parametrize("kind", REPLAY_KINDS)
async def test_a_fresh_controller_compiles_byte_identical_projections_from_the_log(
    kind: str, store_case_factory: Callable[[str], StoreCase], clock: FixedClock
) -> None:
    case = store_case_factory(kind)
    try:
        writer = await case.open(clock)
        state, trace = await full_protocol(ProtocolController(writer))

        reader = await case.open(clock)  # a new worker: its own connection, estimator and controller
        fresh = ProtocolController(reader)
        assert await fresh.state("task-1") == state
        events = await reader.events.read("task-1", types=PHASE_EVENT_TYPES)
        assert len(events) == len(state.history)
        # Every projection compiled along the way, recompiled from the log as it stood then.
        for (operation, original, _), then in zip(trace.steps, trace.states, strict=True):
            rebuilt = replay("task-1", events[: len(then.history)]).state
            assert rebuilt == then
            again = fresh.project(rebuilt, operation)
            assert identity(again) == identity(original), operation
            assert again.manifest["projection_sha256"] == original.manifest["projection_sha256"]
            assert again.manifest["tokens"] == original.manifest["tokens"]
    finally:
        await case.close_all()


class Workers:
    """Each call goes to the next of several controllers on separate connections to one store."""

    def __init__(self, controllers: list[ProtocolController]) -> None:
        self.controllers = controllers
        self.calls = 0

    def _next(self) -> ProtocolController:
        self.calls += 1
        return self.controllers[self.calls % len(self.controllers)]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._next(), name)


async def test_workers_taking_turns_on_sqlite_and_postgres_match_one_worker_in_memory(
    store_case_factory: Callable[[str], StoreCase], clock: FixedClock
) -> None:
    _, baseline = await full_protocol(ProtocolController(MemoryStore(clock=clock)))
    expected = [(op, identity(p)) for op, p, _ in baseline.steps]
    for kind in REPLAY_KINDS:
        case = store_case_factory(kind)
        try:
            stores = [await case.open(clock) for _ in range(3)]
            workers = Workers([ProtocolController(s) for s in stores])
            _, trace = await full_protocol(workers)  # type: ignore[arg-type]
            assert [(op, identity(p)) for op, p, _ in trace.steps] == expected, kind
            for _, projection, retired in trace.steps:
                assert not [m for m in retired if m in text_of(projection)]
        finally:
            await case.close_all()


async def test_concurrent_identical_transitions_leave_one_event(
    store_case: StoreCase, clock: FixedClock
) -> None:
    stores = [await store_case.open(clock) for _ in range(2)]
    try:
        a, b = (ProtocolController(s) for s in stores)
        await a.submit("race", REQUEST, sources=SOURCES)
        results = await asyncio.gather(
            a.record_artifact("race", "prompt", PROMPT_V1), b.record_artifact("race", "prompt", PROMPT_V1)
        )
        assert results[0] == results[1]
        events = await stores[0].events.read("race")
        assert [e.type for e in events] == ["phase.submitted", "phase.artifact.recorded"]
    finally:
        await store_case.close_all()


async def test_concurrent_conflicting_transitions_let_exactly_one_win(
    store_case: StoreCase, clock: FixedClock
) -> None:
    stores = [await store_case.open(clock) for _ in range(2)]
    try:
        a, b = (ProtocolController(s) for s in stores)
        await a.submit("race", REQUEST)
        outcomes = await asyncio.gather(
            a.record_artifact("race", "prompt", "draft from worker A"),
            b.record_artifact("race", "prompt", "draft from worker B"),
            return_exceptions=True,
        )
        winners = [o for o in outcomes if isinstance(o, ProtocolState)]
        losers = [o for o in outcomes if isinstance(o, BaseException)]
        assert len(winners) == 1 and len(losers) == 1
        assert isinstance(losers[0], ProtocolStateError)
        state = await ProtocolController(stores[1]).state("race")
        assert state == winners[0] and state.prompt is not None and state.prompt.version == 1
        assert state.prompt.digest == body_digest(state.prompt.body)
        assert len(await stores[0].events.read("race")) == 2
    finally:
        await store_case.close_all()
