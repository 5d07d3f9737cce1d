"""The runtime port (issue 5, acceptance 6): compaction of a 10,000-item history, and
``latest_checkpoint`` through a full snapshot plus a 7-delta chain.

``bench_compaction_10k`` runs once per backend, warm (items already
canonicalized and rendered, the estimate memo filled: a worker compacting a
checkpoint it has been building) and cold (fresh items, fresh estimator: a
new worker compacting a checkpoint it just seeded from the log).
``bench_latest_through_7_deltas`` reads a 1,000-item run back through its
newest full snapshot and seven deltas, on the memory and SQLite stores.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import ctxengine as ce
from ctxengine.cli.synthetic import synthetic_session
from ctxengine.core import backends
from ctxengine.core.budget import allocate
from ctxengine.model import Checkpoint, ResolvedModel, UserMessage, WorkingState
from ctxengine.runtime.checkpoints import latest_checkpoint, write_checkpoint
from ctxengine.runtime.compaction import StructuredCompactor
from ctxengine.stores import MemoryStore, SQLiteStore
from ctxengine.stores.events import Store

MODEL = ResolvedModel("bench", "model-200k", 200_000, 16_384, 8_192)
HISTORY_ITEMS = 10_000
CHAIN_BASE_ITEMS = 1_000


@pytest.fixture
def use(request: pytest.FixtureRequest) -> Iterator[str]:
    previous = backends.backend()
    ce.use_backend(request.param)
    try:
        yield request.param
    finally:
        ce.use_backend(previous)


def _checkpoint(tag: str) -> tuple[Checkpoint, int]:
    items = synthetic_session(HISTORY_ITEMS, tag=tag)
    seed = HISTORY_ITEMS + 1
    conversation = (*items, UserMessage("and now?", seq=seed))
    return Checkpoint("bench", conversation=conversation, working_state=WorkingState(objective="o")), seed


@pytest.mark.parametrize("use", backends.BACKENDS, indirect=True)
def bench_compaction_10k_warm(benchmark: Any, use: str) -> None:
    cp, seed = _checkpoint(f"compact-warm-{use}")
    compactor = StructuredCompactor(ce.TokenEstimator())
    budget = allocate(MODEL, 2_000)

    def run() -> Any:
        return compactor.compact(
            cp, budget, "history_requires_compaction", model_id=MODEL.model_id, seed_sequence=seed
        )

    new, result = benchmark(run)
    assert result.replaced_items > HISTORY_ITEMS // 2 and new.summary_depth == 1
    benchmark.extra_info.update(replaced=result.replaced_items, elided=len(result.elided))


@pytest.mark.parametrize("use", backends.BACKENDS, indirect=True)
def bench_compaction_10k_cold(benchmark: Any, use: str) -> None:
    budget = allocate(MODEL, 2_000)
    rounds = 0

    def fresh() -> tuple[tuple[Any, ...], dict[str, Any]]:
        nonlocal rounds
        rounds += 1
        cp, seed = _checkpoint(f"compact-cold-{use}-{rounds}")
        compactor = StructuredCompactor(ce.TokenEstimator())
        return (compactor, cp, seed), {}

    def run(compactor: StructuredCompactor, cp: Checkpoint, seed: int) -> Any:
        return compactor.compact(
            cp, budget, "history_requires_compaction", model_id=MODEL.model_id, seed_sequence=seed
        )

    _, result = benchmark.pedantic(run, setup=fresh, rounds=5)
    assert result.replaced_items > HISTORY_ITEMS // 2


# -- latest() through a 7-delta chain --------------------------------------------------


async def _chain(store: Store) -> Checkpoint:
    """Version 9 (full) then versions 10..16 (deltas): a turn growing four items a step."""
    lease = await store.checkpoints.claim("bench", "w")
    items = synthetic_session(CHAIN_BASE_ITEMS + 8 * 4, tag="chain")
    cp = Checkpoint("bench")
    for version in range(1, 17):
        cp = replace(
            cp, conversation=tuple(items[: CHAIN_BASE_ITEMS + 4 * (version - 8)]) if version > 8 else ()
        )
        cp = replace(cp, working_state=WorkingState(next_action=f"step {version}"))
        assert await write_checkpoint(store, "bench", cp, trigger="tool_completed", lease=lease) == version
    rows = await store.checkpoints.latest_raw("bench")
    assert [r["kind"] for r in rows] == ["full"] + ["delta"] * 7
    return replace(cp, version=16)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def bench_latest_through_7_deltas(
    benchmark: Any, loop: asyncio.AbstractEventLoop, tmp_path: Path, kind: str
) -> None:
    store: Store = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "chain.db")
    expected = loop.run_until_complete(_chain(store))
    latest = benchmark(lambda: loop.run_until_complete(latest_checkpoint(store, "bench")))
    assert latest == expected
    benchmark.extra_info["items"] = len(expected.conversation)
    loop.run_until_complete(store.close())


# -- issue 13: what a runtime sees ----------------------------------------------------


@pytest.mark.parametrize("use", backends.BACKENDS, indirect=True)
def bench_decode_stored_items(benchmark: Any, use: str) -> None:
    """Acceptance 3: stored item payloads to items (with their canonical cache), per backend."""
    from ctxengine.cli.bench_first import history_items
    from ctxengine.core.canonical import canonical_json
    from ctxengine.core.decode import decode_stored_items
    from ctxengine.runtime.session import item_payload

    n = 20_000 if use == "rust" else 2_000
    payloads = [canonical_json(item_payload(i)).decode() for i in history_items(n, f"bench-{use}")]
    seqs = list(range(1, n + 1))
    items, index, _ = benchmark(lambda: decode_stored_items(payloads, seqs))
    assert index is None and len(items) == n
    benchmark.extra_info["items"] = n


@pytest.fixture(scope="module")
def first_1k(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from ctxengine.cli.bench_first import build_fixture

    path = tmp_path_factory.mktemp("first") / "first.db"
    return asyncio.run(build_fixture(f"sqlite:///{path}", "first-1k", 1_000))


def bench_first_request_new_worker_1k(benchmark: Any, first_1k: Any) -> None:
    """Acceptance 1 in process: a worker that has never seen the session (new store, planner,
    loop: cold caches) opens it and builds a new run's first request (1,000 events, SQLite).
    ``ctxengine bench --runtime-only`` measures the same in fresh processes."""
    from ctxengine.cli.turns import AGENT, PRINCIPAL, ScriptedWorker

    runs = iter(range(1_000_000))

    async def first() -> int:
        store = await ce.open_store(first_1k.url)
        try:
            worker = ScriptedWorker(store, owner="bench")
            await worker.planner.current(first_1k.session_id)
            run = ce.RunContext(f"bench-{next(runs)}", first_1k.session_id, first_1k.seed_sequence)
            run, lease, cp = await worker.loop.pick_up(run, PRINCIPAL, owner="bench")
            request, _ = await worker.loop.build_with_pressure(run, cp, AGENT, PRINCIPAL, lease=lease)
            return len(request.body)
        finally:
            await store.close()

    body = benchmark.pedantic(lambda: asyncio.run(first()), rounds=5)
    assert body > 900


def bench_warm_turn_sqlite(benchmark: Any, tmp_path: Path) -> None:
    """A warm worker's whole turn (start the run, build, record; a tool round trip every third)."""
    from ctxengine.cli.turns import ScriptedWorker

    loop = asyncio.new_event_loop()
    store = loop.run_until_complete(ce.open_store(f"sqlite:///{tmp_path / 'turns.db'}"))
    worker = ScriptedWorker(store)
    turns = iter(range(1, 1_000_000))
    for _ in range(20):
        loop.run_until_complete(worker.turn("warm", next(turns)))
    timing = benchmark(lambda: loop.run_until_complete(worker.turn("warm", next(turns))))
    assert timing.steps >= 1
    loop.run_until_complete(store.close())
    loop.close()
