"""A session window that goes (the worker's byte bound) takes everything the worker kept of
that session with it: the rows and items, the seed digest's state, the last reference
snapshots, the render line (ADR 0016). A worker whose windows hold two sessions builds the
same requests and writes the same log as one that keeps them all."""

from __future__ import annotations

import asyncio
from typing import Any

import ctxengine as ce
from ctxengine.assembly.render_cache import RenderCache
from ctxengine.cli.turns import ScriptedWorker
from ctxengine.stores import open_store

SESSIONS = ("s0", "s1", "s2", "s3")


async def _run(max_bytes: int | None) -> tuple[list[bytes], dict[str, list[Any]], list[set[str]]]:
    store = await open_store("memory://")
    worker = ScriptedWorker(store, owner="w")
    worker.builder.renders = RenderCache()  # its own, not the process's (other tests use that)
    loop = worker.loop
    if max_bytes is not None:
        loop.windows.max_bytes = max_bytes
    requests: list[bytes] = []
    build = loop.build_with_pressure

    async def recorded(*args: Any, **kwargs: Any) -> Any:
        request, checkpoint = await build(*args, **kwargs)
        requests.append(ce.canonical_json(request.to_dict()))
        return request, checkpoint

    loop.build_with_pressure = recorded  # type: ignore[method-assign]
    held: list[set[str]] = []
    for turn in range(1, 7):
        for sid in SESSIONS:
            await worker.turn(sid, turn)
            held.append(set(loop.windows._windows))
            assert loop.windows.nbytes <= loop.windows.max_bytes or len(loop.windows) == 1
    logs = {}
    for sid in SESSIONS:
        logs[sid] = [(e.sequence, e.type, e.payload) for e in await store.events.read(sid)]
    await store.close()
    return requests, logs, held


def test_a_dropped_window_changes_nothing_but_what_is_read_again() -> None:
    async def main() -> None:
        # A session's window is some tens of KB by turn 5: two fit in 60 KB.
        small, small_logs, small_held = await _run(60_000)
        whole, whole_logs, whole_held = await _run(None)
        assert small == whole
        assert small_logs == whole_logs
        # The small worker did drop windows, which the unbounded worker kept.
        assert min(len(w) for w in small_held[-8:]) < len(SESSIONS)
        assert whole_held[-1] == set(SESSIONS)

    asyncio.run(main())
