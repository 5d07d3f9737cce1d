"""A session window keeps its rows as columns, not a row object per item (issue 37, finding 9;
ADR 0028): every container a window holds is walked by each full pass of the cyclic collector,
and a row object (``ItemRow``, a tuple subclass) is one the collector never untracks. A window
of 20,000 items held 20,000 of them: a third of what a worker's full passes walked."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest

from ctxengine import use_backend
from ctxengine.assembly.request import RenderedItem
from ctxengine.cli.looplag import PRINCIPAL, imported_session
from ctxengine.cli.turns import ScriptedWorker
from ctxengine.core import backends
from ctxengine.model import RunContext, ToolCall, ToolResult
from ctxengine.runtime.windows import Windows
from ctxengine.stores import open_store

ITEMS = 1_000
#: Tracked objects a window may add per item it holds (its items are untracked: the native
#: decoder makes them so; a row object per item was 1).
PER_ITEM = 0.1


def _tracked() -> int:
    gc.collect()  # what is kept, not garbage a pass would free
    return len(gc.get_objects())


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_a_window_adds_almost_no_tracked_object_per_item(kind: str, tmp_path: Path) -> None:
    url = "memory://" if kind == "memory" else f"sqlite:///{tmp_path / 'w.db'}"

    async def main() -> float:
        store = await open_store(url)
        try:
            seed = await imported_session(store, "s", ITEMS)
            windows = Windows(store)
            span = await windows.span("s", 0, seed, None)
            assert span.end == ITEMS + 1
            held = _tracked()
            windows.forget("s")
            del span
            return (held - _tracked()) / ITEMS  # what the window held
        finally:
            await store.close()

    per_item = asyncio.run(main())
    assert per_item < PER_ITEM, f"{per_item:.3f} tracked objects per item held"


def test_a_picked_up_window_tracks_only_the_renders_that_share_a_dict(tmp_path: Path) -> None:
    # Rust backend: the items, the text renders, the pointer renders and every `_cj` tuple
    # (two bytes) are made untracked; a tool call's render shares the call's arguments (a
    # dict) and stays tracked. The pointers were tracked, and their `_cj` tuples (made with
    # the collector paused, then moved to the oldest generation) until a full pass.
    previous = backends.backend()
    use_backend("rust")

    async def main() -> tuple[int, int]:
        store = await open_store(f"sqlite:///{tmp_path / 'p.db'}")
        try:
            seed = await imported_session(store, "s", ITEMS)
            worker = ScriptedWorker(store, owner="fresh")
            await worker.planner.current("s")
            await worker.loop.pick_up(RunContext("r", "s", seed), PRINCIPAL, owner="fresh")
            window = worker.loop.windows.window("s")
            renders = [*window.line.renders.values(), *window.line.pointers.values()]
            assert len(window.line.pointers) == sum(isinstance(i, ToolResult) for i in window.items)
            caches = [r._cj for r in renders if r._cj is not None]
            tracked = [r for r in [*window.items, *renders, *caches] if gc.is_tracked(r)]
            assert all(isinstance(r, RenderedItem) and r.is_tool_call for r in tracked)
            return len(tracked), sum(isinstance(i, ToolCall) for i in window.items)
        finally:
            await store.close()

    try:
        tracked, calls = asyncio.run(main())
    finally:
        use_backend(previous)
    assert tracked == calls
