"""When the history reader drops a session's window, the loop lets go of what it keeps by
the identity of that session's items (the seed digest's state, the last full reference
snapshot, the render line): their next seed decodes new objects, so those only held memory.
A worker whose reader keeps two sessions builds the same requests and writes the same log
as one that keeps them all."""

from __future__ import annotations

import asyncio
from typing import Any

import ctxengine as ce
from ctxengine.assembly.render_cache import RenderCache
from ctxengine.cli.turns import ScriptedWorker
from ctxengine.stores import open_store

SESSIONS = ("s0", "s1", "s2", "s3")


async def _run(max_items: int | None) -> tuple[list[bytes], dict[str, list[Any]], dict[str, Any]]:
    store = await open_store("memory://")
    worker = ScriptedWorker(store, owner="w")
    worker.builder.renders = RenderCache()  # its own, not the process's (other tests use that)
    loop = worker.loop
    if max_items is not None:
        loop.history.max_items = max_items
    requests: list[bytes] = []
    build = loop.build_with_pressure

    async def recorded(*args: Any, **kwargs: Any) -> Any:
        request, checkpoint = await build(*args, **kwargs)
        requests.append(ce.canonical_json(request.to_dict()))
        return request, checkpoint

    loop.build_with_pressure = recorded  # type: ignore[method-assign]
    held: dict[str, Any] = {}
    for turn in range(1, 7):
        for sid in SESSIONS:
            await worker.turn(sid, turn)
            windows = set(loop.history._windows)
            held.setdefault("windows", []).append(windows)
            held.setdefault("digests", []).append(set(loop._seed_digest._last))
            held.setdefault("snapshots", []).append(set(loop._refs._full))
            lines = {
                key[0]: len(tables.line.items)
                for key, tables in worker.builder.renders._sessions.items()
                if tables.line.items
            }
            held.setdefault("lines", []).append(set(lines))
    logs = {}
    for sid in SESSIONS:
        logs[sid] = [(e.sequence, e.type, e.payload) for e in await store.events.read(sid)]
    await store.close()
    return requests, logs, held


def test_a_dropped_session_leaves_the_loops_caches_and_nothing_else_changes() -> None:
    async def main() -> None:
        # Each session holds about 3 items a turn: two windows fit in 30 items from turn 5 on.
        small, small_logs, small_held = await _run(30)
        whole, whole_logs, whole_held = await _run(None)
        assert small == whole
        assert small_logs == whole_logs
        # Nothing is kept for a session the reader does not hold...
        for windows, digests, snapshots, lines in zip(
            small_held["windows"],
            small_held["digests"],
            small_held["snapshots"],
            small_held["lines"],
            strict=True,
        ):
            assert digests <= windows and snapshots <= windows and lines <= windows
        # ...and the reader did drop sessions, which the unbounded worker kept.
        assert min(len(w) for w in small_held["windows"][-8:]) < len(SESSIONS)
        assert whole_held["digests"][-1] == set(SESSIONS)

    asyncio.run(main())
