"""Issue 3, acceptance 8: cold ``current()`` over a session with 10,000 events (SQLite)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ctxengine as ce
from ctxengine.stores import open_store
from ctxengine.stores.events import NewEvent

EVENTS = 10_000


async def _fill(url: str) -> None:
    store = await open_store(url)
    planner = ce.ContextPlanner(
        store, estimator=ce.TokenEstimator(), clock=ce.FixedClock(datetime(2026, 1, 1, tzinfo=UTC))
    )
    model = ce.ResolvedModel("openai", "gpt-x", 128_000, 16_384, 8_192)
    agent = ce.AgentSpec("a", "v1", "Be brief.")
    principal = ce.Principal("p", "t")
    await planner.plan("s", agent, principal, model, (), policy_version="pv1")
    async with store.transaction():
        for i in range(EVENTS - 2):
            await store.events.append(
                NewEvent("s", "conversation.item.appended", {"item": {"n": i}}, f"k{i}")
            )
    await planner.rotate("s", "bench")
    await store.close()


async def _cold_current(url: str) -> int:
    store = await open_store(url)
    plan = await ce.ContextPlanner(store, estimator=ce.TokenEstimator()).current("s")
    await store.close()
    assert plan is not None
    return plan.epoch


def bench_cold_current_10k_events_sqlite(benchmark: Any, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'plans.db'}"
    asyncio.run(_fill(url))
    epoch = benchmark(lambda: asyncio.run(_cold_current(url)))
    assert epoch == 2
    benchmark.extra_info["events"] = EVENTS
