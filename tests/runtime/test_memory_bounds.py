"""Issue 37, finding 2: memory bounded by bytes, set in one place.

The ``trim_messages`` drop-in's memo keeps no dropped message alive and its
entries stay within ``MemoryLimits.trim_bytes``; a worker's caches (render
cache, session windows) stay within their byte bounds;
``set_memory_limits`` sets every bound and refuses a bad value with an
``ArgumentError`` naming the field.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxengine
from ctxengine.assembly.render_cache import RENDERS, RenderCache
from ctxengine.core.memory import DEFAULT_LIMITS, MemoryLimits, memory_limits, set_memory_limits
from ctxengine.errors import ArgumentError
from ctxengine.model import UserMessage
from ctxengine.reference import interop as reference
from ctxengine.runtime.window import MEMO_OBJECTS, SessionWindow, memo_bytes
from ctxengine.runtime.windows import Windows
from ctxengine.stores import MemoryStore

lc = pytest.importorskip("langchain_core.messages")
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage  # noqa: E402


@pytest.fixture(autouse=True)
def limits() -> Iterator[MemoryLimits]:
    """The process's bounds, restored after each test."""
    previous = memory_limits()
    try:
        yield previous
    finally:
        set_memory_limits(previous)


def _counter(backend: str, max_bytes: int) -> Any:
    classes = reference.LangChainClasses(lc)
    if backend == "rust":
        from ctxengine._core import LangChainCounter

        return LangChainCounter(classes, max_bytes)
    return reference.LangChainCounter(classes, max_bytes)


def _trim(backend: str) -> Any:
    if backend == "rust":
        from ctxengine._core import langchain_trim

        return langchain_trim
    return reference.trim


def _session(i: int, size: int, tools: bool = False) -> list[Any]:
    messages: list[Any] = [SystemMessage(f"session {i} " + "s" * size)]
    for k in range(6):
        messages.append(HumanMessage(f"{i}:{k} " + "x" * size))
        if tools and k % 2:
            call = {"name": "search", "args": {"q": str(k)}, "id": f"c{i}-{k}", "type": "tool_call"}
            messages.append(AIMessage("", tool_calls=[call]))
            messages.append(ToolMessage("r" * size, tool_call_id=f"c{i}-{k}"))
        else:
            messages.append(AIMessage(f"{i}:{k} " + "y" * size))
    return messages


def _run(backend: str, counter: Any, messages: list[Any]) -> tuple[bool, int, int] | None:
    result: tuple[bool, int, int] | None = _trim(backend)(
        counter, messages, 4_000, "last", False, True, None, None
    )
    return result


# -- the trim memo -------------------------------------------------------------------------


def test_the_trim_memo_keeps_no_dropped_message_alive(backend: str) -> None:
    counter = _counter(backend, 64 << 20)
    refs = []
    for i in range(50):
        messages = _session(i, 2_000, tools=True)
        assert _run(backend, counter, messages) is not None
        refs.extend(weakref.ref(m) for m in messages)
        del messages
    assert all(r() is None for r in refs)  # without a collection: nothing holds them
    assert len(counter) == 0
    assert counter.nbytes == 0


def test_the_trim_memo_still_counts_each_live_message_once(backend: str) -> None:
    counter = _counter(backend, 64 << 20)
    messages = _session(1, 100)
    first = _run(backend, counter, messages)
    held = counter.nbytes
    assert len(counter) == len(messages) and held > 0
    assert _run(backend, counter, messages) == first
    assert counter.nbytes == held  # the same entries, found again


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None, max_examples=25)
@given(
    sizes=st.lists(st.integers(0, 30_000), min_size=1, max_size=40),
    max_bytes=st.integers(0, 400_000),
)
def test_the_trim_memo_stays_within_its_bytes(backend: str, sizes: list[int], max_bytes: int) -> None:
    """Sessions kept alive (the memo cannot let them go): its accounted bytes never exceed the
    bound, and both backends account the same bytes."""
    counter = _counter(backend, max_bytes)
    twin = _counter("python", max_bytes)
    alive = []
    for i, size in enumerate(sizes):
        messages = _session(i, size, tools=i % 3 == 0)
        alive.append(messages)
        assert _run(backend, counter, messages) == _run("python", twin, messages)
        assert counter.nbytes <= max_bytes
        assert counter.nbytes == twin.nbytes


def test_trim_messages_follows_the_process_bound(backend: str) -> None:
    from langchain_core.messages.utils import count_tokens_approximately

    from ctxengine.integrations import langchain

    set_memory_limits(trim_bytes=100_000)
    alive = []
    for i in range(30):
        messages = _session(i, 3_000)
        alive.append(messages)
        langchain.trim_messages(messages, max_tokens=2_000, token_counter=count_tokens_approximately)
    counter = langchain._counter(backend)
    assert counter.max_bytes == 100_000
    assert 0 < counter.nbytes <= 100_000
    set_memory_limits(trim_bytes=1_000)
    assert counter.max_bytes == 1_000 and counter.nbytes <= 1_000


# -- the worker's caches ---------------------------------------------------------------------


def test_caches_made_without_a_bound_follow_the_process_limits() -> None:
    store = MemoryStore()
    cache, windows = RenderCache(), Windows(store)
    set_memory_limits(render_bytes=111, window_bytes=222)
    assert (cache.max_bytes, windows.max_bytes) == (111, 222)
    assert RENDERS.max_bytes == 111
    # An explicit bound stays the cache's own.
    assert RenderCache(max_bytes=5).max_bytes == 5
    assert Windows(store, max_bytes=6).max_bytes == 6


@settings(deadline=None, max_examples=30)
@given(steps=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 30), st.integers(0, 3_000)), max_size=20))
def test_a_windows_reference_snapshots_are_counted_as_they_grow(steps: list[tuple[int, int, int]]) -> None:
    window = SessionWindow("s")
    conversations: dict[int, tuple[Any, ...]] = {}
    for run, grow, size in steps:
        known = conversations.get(run, ())
        new = tuple(UserMessage("u" * size, seq=len(known) + k + 1) for k in range(grow))
        conversation = conversations[run] = known + new
        window.full_refs("s", conversation)
        window.ref_wrote(f"r{run}", {}, {}, conversation)  # type: ignore[arg-type]
        # Counted as if made from scratch (grown or started again).
        assert window.full_bytes == MEMO_OBJECTS + memo_bytes(conversation)
        assert window.runs[f"r{run}"].ref_bytes == MEMO_OBJECTS + memo_bytes(conversation)
    assert window.nbytes >= sum(m.ref_bytes for m in window.runs.values()) + window.full_bytes


def test_a_worker_keeps_its_caches_within_their_bytes(backend: str) -> None:
    """A worker taking turns of many sessions: every cache within its bound (set small here)."""
    from ctxengine.cli.turns import ScriptedWorker

    set_memory_limits(render_bytes=60_000, window_bytes=100_000)

    async def run() -> ScriptedWorker:
        store = MemoryStore()
        worker = ScriptedWorker(store, tool_every=2)
        renders = worker.builder.renders = RenderCache()  # (the process's holds other tests')
        for i in range(40):
            for turn in (1, 2):
                await worker.turn(f"bounds-{backend}-{i}", turn)
                windows = worker.loop.windows
                assert windows.nbytes <= 100_000 or len(windows) == 1  # (the window in use stays)
                assert renders._bytes <= 60_000 and renders._region_bytes <= 60_000 // 8
        return worker

    worker = asyncio.run(run())
    assert len(worker.loop.windows) < 40  # the bound, not the count, let sessions go
    gc.collect()


# -- setting the bounds --------------------------------------------------------------------


def test_set_memory_limits_sets_and_returns_the_bounds() -> None:
    new = ctxengine.set_memory_limits(render_bytes=1 << 20, trim_bytes=0)
    assert (
        new
        == memory_limits()
        == MemoryLimits(
            render_bytes=1 << 20,
            window_bytes=DEFAULT_LIMITS.window_bytes,
            trim_bytes=0,
        )
    )
    assert ctxengine.set_memory_limits(DEFAULT_LIMITS) == DEFAULT_LIMITS


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"render_bytes": -1}, "render_bytes"),
        ({"window_bytes": 1.5}, "window_bytes"),
        ({"render_bytes": True}, "render_bytes"),
        ({"line_bytes": 1}, "line_bytes"),  # (gone: a line's state is its owner's memory)
        ({"trim_bytes": "16MB"}, "trim_bytes"),
        ({"history_bytes": 1}, "history_bytes"),
        ({"cache_bytes": 1}, "cache_bytes"),
    ],
)
def test_a_bad_bound_is_an_argument_error_naming_it(changes: dict[str, Any], field: str) -> None:
    before = memory_limits()
    with pytest.raises(ArgumentError) as raised:
        set_memory_limits(**changes)
    assert raised.value.argument == field
    assert memory_limits() == before  # nothing changed


def test_limits_that_are_not_memory_limits_are_refused() -> None:
    with pytest.raises(ArgumentError) as raised:
        set_memory_limits({"render_bytes": 1})  # type: ignore[arg-type]
    assert raised.value.argument == "limits"


def test_the_defaults_are_tens_of_megabytes() -> None:
    total = sum(getattr(DEFAULT_LIMITS, name) for name in MemoryLimits.__dataclass_fields__)
    assert total <= 128 << 20
