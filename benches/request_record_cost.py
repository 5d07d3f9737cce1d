"""What request records cost a turn (issue 42, ADR 0024), on SQLite or PostgreSQL.

``python benches/request_record_cost.py sqlite|postgres [HISTORY_TURNS] [MEASURED_TURNS]``

Two ``ScriptedWorker``s, one on a store pinned to format 5 (no records), one writing
format 6, take the same turns of their own session, alternating turn by turn (which one
goes first alternates too), after ``HISTORY_TURNS`` turns of history (default 50). Printed:
each side's median turn (wall and process CPU, the store's threads included), the
one-call commits and missed predictions (the same on both sides: the record rides in the
step's write block), the median time to build a record's payload, and its size. A
PostgreSQL run starts a private server (``cli.pgserver``). Not a pytest bench: the two
sides must alternate on one host to be compared at all on a shared machine.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ctxengine as ce
from ctxengine.cli.turns import ScriptedWorker
from ctxengine.runtime import loop_steps
from ctxengine.stores.formats import WritePolicy


async def measure(kind: str, history: int, measured: int) -> None:
    tmp = Path(tempfile.mkdtemp())
    server = None
    if kind == "postgres":
        from ctxengine.cli.pgserver import PostgresServer, postgres_bin

        bin_dir = postgres_bin()
        assert bin_dir is not None, "PostgreSQL server binaries not found"
        server = PostgresServer(bin_dir, tmp)
        server.start()
        urls = [server.dsn, server.dsn]
    else:
        urls = [f"sqlite:///{tmp}/f5.db", f"sqlite:///{tmp}/f6.db"]
    spent: list[float] = []
    keep = loop_steps.StepWrites._record

    def timed(self: Any, run: Any, memo: Any) -> Any:
        started = time.perf_counter()
        try:
            return keep(self, run, memo)
        finally:
            spent.append(time.perf_counter() - started)

    loop_steps.StepWrites._record = timed  # type: ignore[method-assign]
    try:
        stores = [
            await ce.open_store(urls[0], write_policy=WritePolicy(max_version=5)),
            await ce.open_store(urls[1]),
        ]
        workers = [ScriptedWorker(store) for store in stores]
        sessions = ["cost-f5", "cost-f6"]
        for turn in range(1, history + 1):
            for worker, session in zip(workers, sessions, strict=True):
                await worker.turn(session, turn)
        wall: dict[int, list[float]] = {0: [], 1: []}
        cpu: dict[int, list[float]] = {0: [], 1: []}
        spent.clear()
        for turn in range(history + 1, history + measured + 1):
            for side in (0, 1) if turn % 2 else (1, 0):
                timing = await workers[side].turn(sessions[side], turn)
                wall[side].append(timing.turn_s)
                cpu[side].append(timing.cpu_s)
        events = await stores[1].events.read(sessions[1])
        records = [e for e in events if e.type == "context.request.recorded"]
        size = statistics.median(len(ce.canonical_json(e.payload)) for e in records)
        for side, version in ((0, 5), (1, 6)):
            commits = workers[side].loop.commits
            turn_wall, turn_cpu = statistics.median(wall[side]) * 1e3, statistics.median(cpu[side]) * 1e3
            print(
                f"{kind}, {history} turns of history, format {version}: turn {turn_wall:.2f} ms wall, "
                f"{turn_cpu:.2f} ms CPU; one-call commits {commits.one_call}, missed {commits.missed}"
            )
        print(
            f"  a record's payload: {statistics.median(spent) * 1e6:.0f} us median over {len(spent)} "
            f"steps, {size:.0f} bytes"
        )
        for store in stores:
            await store.close()
    finally:
        loop_steps.StepWrites._record = keep  # type: ignore[method-assign]
        if server is not None:
            server.stop()


if __name__ == "__main__":
    args = sys.argv[1:]
    history = int(args[1]) if len(args) > 1 else 50
    asyncio.run(measure(args[0], history, int(args[2]) if len(args) > 2 else 60))
