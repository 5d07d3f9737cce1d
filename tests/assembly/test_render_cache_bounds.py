"""The render cache keeps its session tables within ``capacity`` renders and ``max_bytes``
of their estimated memory, least recently built sessions first, with exact accounting; a
builder whose cache keeps too little still builds the same bytes (the fit asks for what is
missing)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.builder_fixtures import AGENT, ALICE, NOON, checkpoint_for, make_plan, run_at, session

import ctxengine as ce
from ctxengine.assembly.builder import ContextBuilder
from ctxengine.assembly.render import digest_of, render_conversation, render_items, render_pointers
from ctxengine.assembly.render_cache import SESSION_OBJECTS, RenderCache
from ctxengine.assembly.request import RenderedItem
from ctxengine.assembly.session_renders import (
    RENDER_OBJECTS,
    TEXTLESS,
    SessionRenders,
    one_render_bytes,
    render_bytes,
)
from ctxengine.core import backends
from ctxengine.errors import ArgumentError
from ctxengine.model import Checkpoint


def _accounted(cache: RenderCache) -> None:
    tables: list[SessionRenders] = list(cache._sessions.values())
    for t in tables:
        assert t.nbytes == render_bytes(t.renders.values()) + render_bytes(t.pointers.values())
    assert cache._held == sum(len(t) for t in tables)
    assert cache._bytes == sum(t.nbytes for t in tables) + SESSION_OBJECTS * len(tables)
    assert cache._held <= cache.capacity
    assert cache._bytes <= max(cache.max_bytes, SESSION_OBJECTS)  # (the session being built stays)


def _tagged(items: list[Any], tag: str) -> list[Any]:
    out = []
    for item in items:
        if isinstance(item, ce.UserMessage):
            item = ce.UserMessage(f"{tag}: {item.content}", seq=item.seq)
        out.append(item)
    return out


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from("abcd"), st.integers(1, 8), st.sampled_from([0, 50, 900])),
        min_size=1,
        max_size=14,
    ),
    max_bytes=st.integers(2_000, 60_000),
    capacity=st.integers(4, 200),
)
def test_tables_stay_within_both_bounds_with_exact_accounting(
    steps: list[tuple[str, int, int]], max_bytes: int, capacity: int
) -> None:
    cache = RenderCache(capacity, max_bytes=max_bytes)
    for key, turns, size in steps:
        history = _tagged(session(turns, result_size=size), key)
        tables = cache.session(key)
        cache.history(tables, history)
        _accounted(cache)
        cache.renders_of(tables, history[-3:])
        _accounted(cache)


def test_least_recently_built_sessions_go_first() -> None:
    histories = {key: _tagged(session(6, result_size=400), key) for key in "abc"}
    one = RenderCache()
    one.history(one.session("a"), histories["a"])
    per_session = one._bytes
    cache = RenderCache(max_bytes=per_session * 5 // 2)
    for key in ("a", "b", "a", "c"):
        cache.history(cache.session(key), histories[key])
        _accounted(cache)
    assert list(cache._sessions) == ["a", "c"]
    roomy = RenderCache()
    for key in "abc":
        roomy.history(roomy.session(key), histories[key])
    assert list(roomy._sessions) == ["a", "b", "c"]


def test_a_cache_that_keeps_too_little_builds_the_same_bytes(backend: str) -> None:
    items = session(30, result_size=600)
    run, cp = run_at(items, len(items) - 4), checkpoint_for(items)
    out = []
    for cache in (RenderCache(), RenderCache(max_bytes=20_000), RenderCache(16)):
        planner, plan = make_plan()
        builder = ContextBuilder(planner, clock=ce.FixedClock(NOON), render_cache=cache)
        requests = [builder.build(run, cp, AGENT, ALICE, plan=plan) for _ in range(2)]
        out.append([ce.canonical_json(r.to_dict()) for r in requests])
        _accounted(cache)
    assert out[0] == out[1] == out[2]


@pytest.mark.parametrize(
    ("name", "value"), [("capacity", -1), ("block_capacity", -1), ("max_bytes", -5), ("max_bytes", 2.0)]
)
def test_bounds_are_non_negative_ints(name: str, value: object) -> None:
    kwargs: dict[str, Any] = {name: value}
    with pytest.raises(ArgumentError, match=name):
        RenderCache(**kwargs)


def test_a_dropped_session_clears_its_line_state() -> None:
    """The native fit keeps what it read of a line in the line's state, with references to
    its items and renders; a session the render cache drops clears it at once (nothing it
    kept holds the session's items alive)."""
    previous = backends.backend()
    ce.use_backend("rust")
    try:
        items = {key: _tagged(session(8, result_size=300), key) for key in "abc"}
        probe = RenderCache()
        probe.history(probe.session("probe"), items["a"])
        planner, plan = make_plan()
        cache = RenderCache(max_bytes=probe._bytes * 5 // 2)  # room for two sessions
        builder = ContextBuilder(planner, clock=ce.FixedClock(NOON), render_cache=cache)
        states: dict[str, Any] = {}
        held: dict[str, int] = {}
        for key in "abc":
            cp = Checkpoint(f"r-{key}", conversation=tuple(items[key]))
            run = ce.RunContext(f"r-{key}", "s1", items[key][-4].seq)  # one line per first item
            builder.build(run, cp, AGENT, ALICE, plan=plan)
            states[key] = list(cache._sessions.values())[-1].line.state
            held[key] = states[key].nbytes
        first = {items[key][0]._cj[1]: key for key in "abc"}
        kept = [first[digest] for _, digest in cache._sessions]
    finally:
        ce.use_backend(previous)
    assert kept == ["b", "c"], kept
    assert all(held[key] > 0 for key in "abc"), held
    assert states["a"].nbytes == 0  # a's went with its session
    assert (states["b"].nbytes, states["c"].nbytes) == (held["b"], held["c"])


def _region_accounted(cache: RenderCache) -> None:
    assert cache._region_bytes == sum(render_bytes(t.values()) for t in cache._tables.values())
    assert cache._region_bytes <= cache.max_bytes // 8
    assert all(len(t) <= cache.capacity for t in cache._tables.values())


@settings(max_examples=30, deadline=None)
@given(
    texts=st.lists(
        st.tuples(st.sampled_from(["current_user", "history"]), st.integers(0, 3_000)), max_size=60
    ),
    max_bytes=st.integers(8_000, 120_000),
    capacity=st.integers(2, 30),
)
def test_region_tables_keep_an_eighth_of_max_bytes(
    texts: list[tuple[str, int]], max_bytes: int, capacity: int
) -> None:
    """Each turn's user message is rendered into the ``current_user`` table and seldom asked
    for again: the tables were bounded only by ``capacity`` (a million) renders each."""
    cache = RenderCache(capacity, max_bytes=max_bytes)
    for n, (region, size) in enumerate(texts):
        item = ce.UserMessage(f"{n} " + "x" * size, seq=n + 1)
        rendered = cache.item(item, region)
        assert rendered == render_conversation(item, region)
        # The render just entered stays whenever it fits on its own: the other tables'
        # renders go first (a table full of one-off renders must not evict every new one).
        limit = cache.max_bytes // 8
        if one_render_bytes(rendered) <= limit - limit // 8:
            assert cache._tables[region].get(digest_of(item)) is rendered
        _region_accounted(cache)
        cache.items([item, item], region)  # the same item again: entered once
        _region_accounted(cache)


def test_a_render_counts_its_text_twice_and_its_objects() -> None:
    items = session(3, result_size=50)
    renders = [
        *render_items(items, "history"),
        *render_pointers([i for i in items if isinstance(i, ce.ToolResult)]),
    ]
    renders += [RenderedItem("history", "user", text=""), RenderedItem("history", "assistant", call_id="c")]
    expected = [RENDER_OBJECTS + (2 * len(r.text) if r.text else TEXTLESS) for r in renders]
    assert [one_render_bytes(r) for r in renders] == expected
    assert render_bytes(renders) == sum(expected)
    assert render_bytes([]) == 0
