"""``ProtocolController.state()`` of a long phase instance with a huge draft (issue 37, finding 7).

The instance holds 1,600 ``phase.*`` events (a prompt drafted and revised
about 800 times) and one 50 MB draft among them. The controller keeps the
fold of each instance it has seen and reads only the events after the last
one it folded, so every call after the first costs a tail read, not a
replay: the target is under 5 ms a call. ``extra_info`` holds the first
(cold) call and the median of the later ones.

The log is written directly (``decide`` + ``evolve`` + the compiler for the
projection hashes), not through the controller, so building it costs the
same whatever the controller does.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

from ctxengine.phases import ProjectionCompiler, ProtocolController, ProtocolState
from ctxengine.phases.commands import Record, Revise, Submit, payload_format
from ctxengine.phases.controller import derivation_key
from ctxengine.phases.decide import decide
from ctxengine.phases.transitions import evolve
from ctxengine.stores import MemoryStore, SQLiteStore
from ctxengine.stores.events import NewEvent, Store

EVENTS = 1_600
BIG_DRAFT_BYTES = 50 * 1024 * 1024
INSTANCE = "long-instance"


async def build_instance(
    store: Store, instance_id: str = INSTANCE, events: int = EVENTS, big_bytes: int = BIG_DRAFT_BYTES
) -> ProtocolState:
    """Append ``events`` phase events: submit, then drafts and revisions of the prompt in turn;
    the draft recorded halfway holds ``big_bytes`` bytes."""
    compiler = ProjectionCompiler()
    state: ProtocolState | None = None
    big_pending = True
    for n in range(1, events + 1):
        if state is None:
            command: Any = Submit("Summarize the report for the board.")
        elif state.stage in ("prompt_drafting", "prompt_revising"):
            operation = "draft_prompt" if state.stage == "prompt_drafting" else "revise_prompt"
            big = big_pending and n >= events // 2
            big_pending = big_pending and not big
            body = "x" * big_bytes if big else f"GOAL: draft {n}"
            command = Record("prompt", body, compiler.compile(state, operation).sha256)
        else:
            assert state.displayed is not None
            command = Revise("prompt", f"Revision {n}: be shorter.", state.displayed.version)
        event_type, payload = decide(state, command)
        stored = await store.events.append(
            NewEvent(
                instance_id,
                event_type,
                payload,
                derivation_key(instance_id, n),
                actor="bench",
                format_version=payload_format(event_type, payload),
            )
        )
        state = evolve(state, instance_id, stored.type, stored.payload, stored.sequence)
    assert state is not None
    return state


async def _open(kind: str, tmp_path: Path) -> Store:
    if kind == "memory":
        return MemoryStore()
    return await SQLiteStore(tmp_path / "phase.db", synchronous="NORMAL").open()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def bench_phase_state_after_the_first_call(
    benchmark: Any, loop: asyncio.AbstractEventLoop, tmp_path: Path, kind: str
) -> None:
    store = loop.run_until_complete(_open(kind, tmp_path))
    built = loop.run_until_complete(build_instance(store))
    assert sum(len(a.body) >= BIG_DRAFT_BYTES for a in built.versions) == 1
    controller = ProtocolController(store)

    start = time.perf_counter()
    first = loop.run_until_complete(controller.state(INSTANCE))
    first_seconds = time.perf_counter() - start
    assert first == built and len(first.history) == EVENTS

    seconds: list[float] = []

    def one_call() -> ProtocolState:
        start = time.perf_counter()
        state = loop.run_until_complete(controller.state(INSTANCE))
        seconds.append(time.perf_counter() - start)
        return state

    state = benchmark.pedantic(one_call, rounds=20, iterations=1, warmup_rounds=1)
    assert state == built
    benchmark.extra_info["events"] = EVENTS
    benchmark.extra_info["big_draft_bytes"] = BIG_DRAFT_BYTES
    benchmark.extra_info["first_call_ms"] = round(first_seconds * 1000, 1)
    benchmark.extra_info["median_ms"] = round(statistics.median(seconds) * 1000, 3)
    loop.run_until_complete(store.close())
