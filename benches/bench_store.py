"""Event store throughput on the embedded SQLite store (issue 3, acceptance 8).

``bench_sqlite_append`` appends batches of events to one session through
``SQLiteStore`` (each append its own ``BEGIN IMMEDIATE`` transaction) and
reports events/s in ``extra_info``; ``bench_sqlite_read_10k_cold`` reads a
10,000-event session back through a freshly opened store, the I/O floor
of rebuilding a plan from the log in a new process.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

from ctxengine.stores import SQLiteStore
from ctxengine.stores.events import NewEvent

BATCH = 200
READ_EVENTS = 10_000
# ~300 bytes of payload: a realistic conversation item.
PAYLOAD = {"item": {"type": "user_message", "content": "lorem ipsum dolor sit amet " * 10, "trust": "user"}}


@pytest.mark.parametrize("synchronous", ["FULL", "NORMAL"])
def bench_sqlite_append(
    benchmark: Any, loop: asyncio.AbstractEventLoop, tmp_path: Path, synchronous: str
) -> None:
    store = SQLiteStore(tmp_path / "bench.db", synchronous=synchronous)  # type: ignore[arg-type]
    loop.run_until_complete(store.open())
    rounds = iter(range(1_000_000))
    seconds: list[float] = []

    async def append_batch(batch: int) -> None:
        for i in range(BATCH):
            await store.events.append(
                NewEvent("bench", "conversation.item.appended", PAYLOAD, f"{batch}:{i}")
            )

    def one_round() -> None:
        start = time.perf_counter()
        loop.run_until_complete(append_batch(next(rounds)))
        seconds.append(time.perf_counter() - start)

    benchmark.pedantic(one_round, rounds=5, iterations=1, warmup_rounds=0)
    benchmark.extra_info["events_per_round"] = BATCH
    benchmark.extra_info["events_per_s"] = round(BATCH / statistics.median(seconds))
    benchmark.extra_info["synchronous"] = synchronous
    events = loop.run_until_complete(store.events.read("bench"))
    assert [e.sequence for e in events] == list(range(1, BATCH * len(seconds) + 1))
    loop.run_until_complete(store.close())


def bench_sqlite_read_10k_cold(benchmark: Any, loop: asyncio.AbstractEventLoop, tmp_path: Path) -> None:
    path = tmp_path / "read.db"
    writer = SQLiteStore(path, synchronous="NORMAL")

    async def fill() -> None:
        async with writer.transaction():
            for i in range(READ_EVENTS):
                await writer.events.append(NewEvent("s", "conversation.item.appended", PAYLOAD, f"k{i}"))
        await writer.close()

    loop.run_until_complete(fill())

    async def cold_read() -> int:
        async with SQLiteStore(path) as store:
            return len(await store.events.read("s"))

    count = benchmark.pedantic(lambda: loop.run_until_complete(cold_read()), rounds=5, iterations=1)
    assert count == READ_EVENTS
    benchmark.extra_info["events"] = READ_EVENTS
