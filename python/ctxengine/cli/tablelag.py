"""The loop-lag probe of a process's first exact count (issue 40): a ticker task measures the
longest stretch the event loop could not run while the first ``ContextPlanner.plan`` of a
fresh process counts a prefix exactly (o200k_base), which builds the encoding's tables.

``python -m ctxengine.cli.tablelag`` prints one JSON object: the backend, the first plan's
wall time and the longest loop block, in milliseconds (``benches/bench_loop_lag_tables.py``).
"""

from __future__ import annotations

import asyncio
import json
import time

import ctxengine as ce

#: The ticker's period: a block is a gap between ticks beyond it.
TICK_SECONDS = 0.0005


async def _ticker(stop: asyncio.Event, gaps: list[float]) -> None:
    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(TICK_SECONDS)
        now = time.perf_counter()
        gaps.append(now - last - TICK_SECONDS)
        last = now


async def first_plan_lag() -> dict[str, object]:
    store = await ce.open_store("memory://")
    stop, gaps = asyncio.Event(), list[float]()
    ticker = asyncio.create_task(_ticker(stop, gaps))
    await asyncio.sleep(0.01)
    planner = ce.ContextPlanner(store)  # its default estimator: the active backend's
    agent = ce.AgentSpec("a", "v1", "You answer questions about the user's files.")
    model = ce.ResolvedModel("openai", "gpt-4o", 128_000, 16_384, 8_192)
    started = time.perf_counter()
    await planner.plan("s", agent, ce.Principal("u", "t", frozenset()), model, (), policy_version="v1")
    took = time.perf_counter() - started
    await asyncio.sleep(0.01)
    stop.set()
    await ticker
    await store.close()
    return {
        "backend": ce.backend(),
        "plan_ms": round(took * 1000, 2),
        "max_block_ms": round(max(gaps) * 1000, 2),
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(first_plan_lag())))
