"""Bodies a provider's prompt cache can serve (issue 39, ADR 0027): plans of builder version 3
render the blocks that change every step after the current turn, mark the end of the stable
part for Anthropic's cache (at most four breakpoints a request), clear a long run's pairs with
hysteresis, compact before truncating history under pressure, and omit empty blocks; plans of
versions 1 and 2 keep rendering as they did.
"""

from __future__ import annotations

import random
from dataclasses import replace
from itertools import pairwise
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxengine as ce
from builder_fixtures import AGENT, ALICE, NOON, make_builder, make_plan, session
from ctxengine.assembly.breakpoints import body_breakpoints
from ctxengine.assembly.clearing import POINTER_TEXT, turn_rules, view_turn
from ctxengine.assembly.regions import TAIL_CLASSES
from ctxengine.assembly.render_cache import RenderCache
from ctxengine.cli.turns import ScriptedWorker
from ctxengine.core import backends
from ctxengine.model import StateEntry, TrustLevel, WorkingState
from ctxengine.plan import BUILDER_V1, BUILDER_V2, BUILDER_VERSION
from ctxengine.providers import check_wire_pairs, to_anthropic_messages, to_openai_chat, to_openai_responses
from ctxengine.stores.memory import MemoryStore

W32 = ce.ResolvedModel("bench", "model-32k", 32_000, 4_096, 4_096)


def _state(fact: str) -> WorkingState:
    return WorkingState(
        objective="fix the parser",
        established_facts=(StateEntry("f1", fact, TrustLevel.EXTERNAL_UNTRUSTED),),
    )


def _run_items(pairs: int, size: int = 400) -> list[Any]:
    items: list[Any] = [ce.UserMessage("fix the parser", seq=1)]
    for n in range(pairs):
        items += [
            ce.ToolCall(f"c{n}", "search", {"q": f"q{n}"}, seq=len(items) + 1),
            ce.ToolResult(f"c{n}", f"output {n} " + "w" * size, seq=len(items) + 2),
        ]
    return items


def _build(items: list[Any], state: WorkingState, version: str | None = None, **kw: Any) -> ce.ModelRequest:
    planner, plan = make_plan(builder_version=version, **kw)
    cp = ce.Checkpoint("r1", conversation=tuple(items), working_state=state)
    run = ce.RunContext("r1", "s1", items[0].seq, step=len(items))
    return make_builder(planner).build(run, cp, AGENT, ALICE, plan=plan)


def _anthropic_marks(body: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = list(body["system"])
    for message in body["messages"]:
        blocks += message["content"]
    return [b for b in blocks if "cache_control" in b]


# -- placement ---------------------------------------------------------------------------


def test_version_3_renders_the_tail_after_the_current_turn(backend: str) -> None:
    items = _run_items(3)
    request = _build(items, _state("the lexer is fine"))
    classes = [i.region_class for i in request.body]
    # The run in the order it happened, the user message first; then the tail.
    assert classes[0] == "current_user"
    assert classes[-2:] == ["working_state", "runtime_metadata"]
    turn = [i for i in request.body if i.region_class in ("current_user", "current_turn")]
    assert [i.call_id for i in turn[1:]] == ["c0", "c0", "c1", "c1", "c2", "c2"]
    for wire, render in (
        ("openai_chat", to_openai_chat),
        ("openai_responses", to_openai_responses),
        ("anthropic_messages", to_anthropic_messages),
    ):
        check_wire_pairs(render(request, model="m"), wire)


def test_one_working_state_update_changes_only_the_tail(backend: str) -> None:
    items = _run_items(6)
    before, after = _build(items, _state("one")), _build(items, _state("two"))
    tail = len([i for i in before.body if i.region_class in TAIL_CLASSES])
    assert before.body[:-tail] == after.body[:-tail] and before.body != after.body
    # Under version 2 the update changes the body in front of the run's steps.
    old_before = _build(items, _state("one"), BUILDER_V2)
    old_after = _build(items, _state("two"), BUILDER_V2)
    first = next(n for n, (a, b) in enumerate(zip(old_before.body, old_after.body, strict=True)) if a != b)
    assert first < len([i for i in old_before.body if i.region_class == "history"]) + 1


def test_stored_v1_and_v2_plans_render_as_before(backend: str) -> None:
    items = _run_items(2)
    for version in (BUILDER_V1, BUILDER_V2):
        request = _build(items, WorkingState(), version)
        classes = [i.region_class for i in request.body]
        # The table's order: working state and metadata before the current user message.
        assert (
            classes.index("working_state") < classes.index("runtime_metadata") < classes.index("current_user")
        )
        assert "body_cache_breakpoints" not in request.metadata
        assert [i.region_class for i in request.prefix] == [
            "platform_policy",
            "agent_instructions",
            "skill_catalog",
            "memory_snapshot",
        ]
        assert request.cache_breakpoints == (1, 3)
        marks = _anthropic_marks(to_anthropic_messages(request, model="m"))
        assert len(marks) == 2  # the prefix's only


# -- what the engine adds ------------------------------------------------------------------


def test_version_3_omits_empty_blocks_and_keeps_full_ones(backend: str) -> None:
    items = _run_items(1)
    request = _build(items, WorkingState())
    assert [i.region_class for i in request.prefix] == ["platform_policy", "agent_instructions"]
    assert request.cache_breakpoints == (1,)
    assert "working_state" not in [i.region_class for i in request.body]
    full = _build(items, _state("x"), memory="the user prefers tabs")
    assert [i.region_class for i in full.prefix] == [
        "platform_policy",
        "agent_instructions",
        "memory_snapshot",
    ]
    assert full.cache_breakpoints == (1, 2)
    memory = full.prefix[-1].text or ""
    assert memory.startswith('Memory at session start:\n<untrusted trust="memory"')
    assert "working_state" in [i.region_class for i in full.body]


def test_the_plan_counts_the_prefix_it_renders() -> None:
    # The exact count of a version-3 plan is the count of the messages it renders (smaller).
    model = ce.ResolvedModel("openai", "gpt-4o-mini", 128_000, 4_096, 4_096)
    planner = ce.ContextPlanner(None, estimator=ce.TokenEstimator(), clock=ce.FixedClock(NOON))
    v2, v3 = (
        planner.draft("s1", 1, AGENT, model, (), policy_version="p", builder_version=version)
        for version in (BUILDER_V2, BUILDER_VERSION)
    )
    assert v3.counting != "heuristic"
    assert v3.prefix_tokens < v2.prefix_tokens and v3.prefix_sha256 == v2.prefix_sha256


# -- cache controls ------------------------------------------------------------------------


def test_anthropic_marks_the_end_of_the_run_and_of_the_history(backend: str) -> None:
    history = session(3)
    items = history + [replace(i, seq=len(history) + i.seq) for i in _run_items(2)]
    planner, plan = make_plan()
    cp = ce.Checkpoint("r1", conversation=tuple(items), working_state=_state("x"))
    run = ce.RunContext("r1", "s1", len(history) + 1, step=4)
    request = make_builder(planner).build(run, cp, AGENT, ALICE, plan=plan)
    body = request.body
    marked = request.metadata["body_cache_breakpoints"]
    users = [n for n, i in enumerate(body) if i.region_class == "current_user"]
    last_turn = max(n for n, i in enumerate(body) if i.region_class in ("current_user", "current_turn"))
    assert marked == [users[0] - 1, last_turn]
    wire = to_anthropic_messages(request, model="m")
    marks = _anthropic_marks(wire)
    assert request.cache_breakpoints == (1,)  # no skills, no memory: two prefix messages
    assert len(marks) == 1 + 2
    # The last mark is on the run's newest result, before the tail's text blocks.
    last_user = wire["messages"][-1]["content"]
    assert last_user[0]["type"] == "tool_result" and "cache_control" in last_user[0]
    assert all("cache_control" not in b for b in last_user[1:])
    # The OpenAI wire carries no marker; a prompt cache key only when asked.
    assert "prompt_cache_key" not in to_openai_chat(request, model="m")
    assert to_openai_chat(request, model="m", prompt_cache_key="s1")["prompt_cache_key"] == "s1"
    assert to_openai_responses(request, model="m", prompt_cache_key="s1")["prompt_cache_key"] == "s1"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    turns=st.integers(0, 4),
    pairs=st.integers(0, 30),
    size=st.integers(10, 12_000),
    memory=st.sampled_from(("", "likes tabs")),
    window=st.sampled_from((24_000, 32_000, 128_000)),
)
def test_at_most_four_breakpoints_and_the_same_bytes_on_both_backends(
    turns: int, pairs: int, size: int, memory: str, window: int
) -> None:
    history = session(turns)
    items = history + [replace(i, seq=len(history) + i.seq) for i in _run_items(pairs, size)]
    cp = ce.Checkpoint("r1", conversation=tuple(items), working_state=_state("x"))
    run = ce.RunContext("r1", "s1", len(history) + 1, step=pairs)
    shas = set()
    previous = backends.backend()
    try:
        for name in backends.BACKENDS:
            ce.use_backend(name)
            planner, plan = make_plan(window, memory=memory)
            request = make_builder(planner, ce.FixedClock(NOON)).build(run, cp, AGENT, ALICE, plan=plan)
            shas.add(request.canonical_bytes())
            wire = to_anthropic_messages(request, model="m")
            check_wire_pairs(wire, "anthropic_messages")
            assert 1 <= len(_anthropic_marks(wire)) <= 4
            marked = request.metadata["body_cache_breakpoints"]
            assert marked == list(body_breakpoints(request.body)) and len(marked) <= 2
            assert all(request.body[n].region_class not in TAIL_CLASSES for n in marked)
    finally:
        ce.use_backend(previous)
    assert len(shas) == 1


# -- hysteresis ----------------------------------------------------------------------------


def _cleared_counts(version: str, steps: int = 80) -> list[int]:
    """The run's cleared count at each step, views built step by step (the loop's way)."""
    _, plan = make_plan(64_000, builder_version=version)
    rules = turn_rules(plan, ce.BudgetPolicy())
    assert rules is not None
    cache, est = RenderCache(), ce.TokenEstimator()
    rng = random.Random(7)
    items: list[Any] = [ce.UserMessage("fix the parser", seq=1)]
    view = None
    counts = []
    for n in range(steps):
        size = rng.randint(3_000, 18_000)
        items += [
            ce.ToolCall(f"c{n}", "search", {"q": str(n)}, seq=len(items) + 1),
            ce.ToolResult(f"c{n}", "w" * size, seq=len(items) + 2),
        ]
        view = view_turn(items, rules, cache, est, view)
        fresh = view_turn(items, rules, cache, est)  # at once: the same decision
        assert (fresh.cleared, fresh.folded) == (view.cleared, view.folded)
        counts.append(view.cleared + view.folded)
    return counts


def test_version_3_clears_in_fewer_larger_steps_than_version_2() -> None:
    old, new = _cleared_counts(BUILDER_V2), _cleared_counts(BUILDER_VERSION)
    for counts in (old, new):
        assert counts == sorted(counts)  # only grows
    changed_old, changed_new = (sum(1 for a, b in pairwise(c) if b != a) for c in (old, new))
    assert changed_new < changed_old * 0.75, (changed_new, changed_old)


async def _session(version: str, turns: int) -> tuple[list[ce.ModelRequest], MemoryStore]:
    """Scripted turns on a 32k window, a tool round trip every third: every request built."""
    store = MemoryStore()
    worker = ScriptedWorker(store, model=W32)
    worker.planner.builder_version = version
    requests: list[ce.ModelRequest] = []
    original = worker.loop.build_with_pressure

    async def keep(*args: Any, **kw: Any) -> Any:
        request, cp = await original(*args, **kw)
        requests.append(request)
        return request, cp

    worker.loop.build_with_pressure = keep  # type: ignore[method-assign]
    for turn in range(1, turns + 1):
        await worker.turn("s", turn)
    return requests, store


async def test_version_3_compacts_instead_of_truncating_history_under_pressure() -> None:
    # Version 2 truncates the oldest history result under pressure, one more nearly every
    # turn, before it compacts; version 3 compacts at once (the history's start moves by half
    # its budget), so no request shows a history result as a pointer.
    old, _ = await _session(BUILDER_V2, 130)
    new, store = await _session(BUILDER_VERSION, 130)

    def pointers(requests: list[ce.ModelRequest]) -> int:
        return sum(
            1
            for r in requests
            for i in r.body
            if i.region_class == "history" and (i.text or "").startswith(POINTER_TEXT)
        )

    assert pointers(old) > 0
    assert pointers(new) == 0
    assert await store.events.read("s", types=["context.compacted"])
    for r in new:
        assert r.metadata["total_tokens"] <= r.metadata["capacity_tokens"]


def test_early_compaction_only_for_version_3_under_pressure_below_the_depth_limit() -> None:
    from ctxengine.assembly.builder import Pressure
    from ctxengine.runtime.loop_pressure import compacts_early

    _, v3 = make_plan()
    _, v2 = make_plan(builder_version=BUILDER_V2)

    def pressure(*steps: str) -> Pressure:
        return Pressure(True, False, "fits", 10, 1, 9, 1, 100, 0, 50, steps)

    shallow, deep = ce.Checkpoint("r1", summary_depth=1), ce.Checkpoint("r1", summary_depth=2)
    truncated = pressure("tool_results_over_cap:1", "tool_results_truncated:2")
    assert compacts_early(v3, truncated, shallow, 2)
    assert not compacts_early(v2, truncated, shallow, 2)  # version 2 truncates as before
    assert not compacts_early(v3, truncated, deep, 2)  # at the depth limit: sent as it fits
    assert not compacts_early(v3, pressure("tool_results_over_cap:3"), shallow, 2)  # the cap is not pressure
