"""Phase protocol over real stores (issue 6, acceptance 4; issue 16, acceptance 3): the log is the state.

A fresh controller on its own connection rebuilds every instance from the
``phase.*`` events and compiles byte-identical projections, with the same
``projection_sha256``, on SQLite and PostgreSQL alike; a fresh *process*
does the same for a log that passes through every stage, and for the
format-1 golden logs; concurrent workers deciding the same transition leave
one event.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import ctxengine
from ctxengine.core.canonical import canonical_json
from ctxengine.errors import ProtocolStateError
from ctxengine.model.clock import FixedClock
from ctxengine.phases import (
    PHASE_EVENT_TYPES,
    STAGE_OPERATIONS,
    STAGES,
    Projection,
    ProtocolController,
    ProtocolState,
    body_digest,
)
from ctxengine.phases.transitions import replay
from ctxengine.stores import MemoryStore
from ctxengine.stores.events import NewEvent
from phase_fixtures import PROMPT_V1, REQUEST, SOURCES, every_stage, full_protocol, full_summary, text_of
from storekit import StoreCase

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


# A reader with nothing but the store URL: it rebuilds each instance after every one of its events
# and compiles the projection that stage allows, printing one JSON line per step.
READER = """
import asyncio, json, sys
from ctxengine.core.canonical import canonical_json
from ctxengine.phases import PHASE_EVENT_TYPES, STAGE_OPERATIONS, ProtocolController
from ctxengine.phases.transitions import replay
from ctxengine.stores import open_store
from phase_fixtures import full_summary

async def main() -> None:
    store = await open_store(sys.argv[1])
    ctl = ProtocolController(store)
    for instance in sys.argv[2:]:
        events = await store.events.read(instance, types=PHASE_EVENT_TYPES)
        for n in range(1, len(events) + 1):
            state = replay(instance, events[:n]).state
            line = {"instance": instance, "n": n, "stage": state.stage, "state": full_summary(state)}
            operation = STAGE_OPERATIONS.get(state.stage)
            if operation is not None:
                p = ctl.project(state, operation)
                line["operation"] = operation
                line["request"] = p.request.canonical_bytes().decode("utf-8")
                line["manifest"] = canonical_json(p.manifest).decode("utf-8")
            print(json.dumps(line, sort_keys=True), flush=True)
    await store.close()

asyncio.run(main())
"""


def _read_in_a_fresh_process(url: str, instances: list[str]) -> list[dict[str, Any]]:
    env = dict(os.environ)
    package_root = str(Path(next(iter(ctxengine.__path__))).parent)
    tests = str(Path(__file__).parent.parent)  # phase_fixtures, for the state summary
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, tests, env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-c", READER, url, *instances],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def _step(ctl: ProtocolController, state: ProtocolState, n: int) -> dict[str, Any]:
    line: dict[str, Any] = {"instance": state.instance_id, "n": n, "stage": state.stage}
    line["state"] = full_summary(state)
    operation = STAGE_OPERATIONS.get(state.stage)
    if operation is not None:
        p = ctl.project(state, operation)
        line["operation"] = operation
        line["request"] = p.request.canonical_bytes().decode("utf-8")
        line["manifest"] = canonical_json(p.manifest).decode("utf-8")
    return line


@pytest.mark.parametrize("kind", REPLAY_KINDS)
async def test_a_fresh_process_compiles_every_stage_of_the_log_byte_identically(
    kind: str, store_case_factory: Callable[[str], StoreCase], clock: FixedClock
) -> None:
    case = store_case_factory(kind)
    try:
        writer = ProtocolController(await case.open(clock))
        states = await every_stage(writer)
        assert {s.stage for s in states} == set(STAGES)
        # What the writer saw: the state after each transition, and the projection its stage allows.
        seen: dict[str, int] = {}
        expected = []
        for state in states:
            seen[state.instance_id] = seen.get(state.instance_id, 0) + 1
            expected.append(_step(writer, state, seen[state.instance_id]))
        assert {e.get("operation") for e in expected} - {None} == set(STAGE_OPERATIONS.values())

        rebuilt = _read_in_a_fresh_process(case.url, list(seen))
        assert len(rebuilt) == len(expected)
        for got, want in zip(rebuilt, expected, strict=True):
            where = f"{want['instance']} step {want['n']} ({want['stage']})"
            assert got == want, where
    finally:
        await case.close_all()


@pytest.mark.parametrize("kind", REPLAY_KINDS)
async def test_a_fresh_process_compiles_format_1_logs_to_their_recorded_bytes(
    kind: str, store_case_factory: Callable[[str], StoreCase], clock: FixedClock
) -> None:
    golden = json.loads(
        (Path(__file__).parent.parent / "phases" / "phase_golden_v1.json").read_text(encoding="utf-8")
    )
    case = store_case_factory(kind)
    try:
        store = await case.open(clock)
        for scenario in golden["scenarios"]:
            for e in scenario["events"]:
                await store.events.append(
                    NewEvent(
                        scenario["instance_id"],
                        e["type"],
                        e["payload"],
                        e["derivation_key"],
                        actor=e["actor"],
                    )
                )
        rebuilt = _read_in_a_fresh_process(case.url, [s["instance_id"] for s in golden["scenarios"]])
        recorded = [
            (s["instance_id"], n, entry)
            for s in golden["scenarios"]
            for n, entry in enumerate(s["after_each_event"], 1)
        ]
        assert len(rebuilt) == len(recorded)
        for got, (instance, n, want) in zip(rebuilt, recorded, strict=True):
            where = f"{instance} after event {n}"
            assert (got["instance"], got["n"], got["stage"]) == (instance, n, want["stage"]), where
            assert got.get("operation") == want.get("operation"), where
            if "operation" in want:
                assert got["manifest"] == want["manifest"], where
                assert hashlib.sha256(got["request"].encode("utf-8")).hexdigest() == want["request_sha256"], (
                    where
                )
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
        state = await a.submit("race", REQUEST, sources=SOURCES)
        answered = a.project(state, "draft_prompt").sha256
        results = await asyncio.gather(
            a.record_artifact("race", "prompt", PROMPT_V1, projection_sha256=answered),
            b.record_artifact("race", "prompt", PROMPT_V1, projection_sha256=answered),
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
        state = await a.submit("race", REQUEST)
        answered = a.project(state, "draft_prompt").sha256
        outcomes = await asyncio.gather(
            a.record_artifact("race", "prompt", "draft from worker A", projection_sha256=answered),
            b.record_artifact("race", "prompt", "draft from worker B", projection_sha256=answered),
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
