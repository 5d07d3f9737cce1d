"""Assembly (issue 4): determinism, prefix stability, pairs, budget, order. Both backends."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxengine as ce
from builder_fixtures import (
    AGENT,
    ALICE,
    NOON,
    checkpoint_for,
    checkpoints,
    make_builder,
    make_plan,
    run_at,
    session,
)
from ctxengine.assembly.builder import ContextBuilder
from ctxengine.assembly.regions import ORDER
from ctxengine.assembly.render import digest_of
from ctxengine.assembly.request import ModelRequest
from ctxengine.core import backends
from ctxengine.model import KnowledgePassage, SkillBody, StateEntry, WorkingState
from ctxengine.plan import BUILDER_V1, BUILDER_V2
from ctxengine.providers import check_wire_pairs, to_anthropic_messages, to_openai_chat, to_openai_responses

FORMATS = (
    (to_openai_chat, "openai_chat"),
    (to_openai_responses, "openai_responses"),
    (to_anthropic_messages, "anthropic_messages"),
)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _bytes(request: ModelRequest) -> bytes:
    return request.canonical_bytes()


def _fresh(items: list[Any]) -> list[Any]:
    """Equal items without caches (a new worker reading the same log)."""
    return [ce.item_from_dict(item.to_dict()) for item in items]


@SETTINGS
@given(case=checkpoints())
def test_assembly_is_byte_identical_twice_and_across_backends(case: Any) -> None:
    items, cp, seed_index = case
    out = {}
    previous = backends.backend()
    try:
        for name in backends.BACKENDS:
            ce.use_backend(name)
            planner, plan = make_plan()
            fresh_cp = checkpoint_for(
                _fresh(items), knowledge=cp.knowledge, recall=cp.recall, working_state=cp.working_state
            )
            builder = make_builder(planner)
            first = builder.assemble(run_at(items, seed_index), fresh_cp, AGENT, ALICE, plan=plan)
            second = builder.assemble(run_at(items, seed_index), fresh_cp, AGENT, ALICE, plan=plan)
            assert _bytes(first.request) == _bytes(second.request)
            assert first.pressure == second.pressure
            out[name] = (_bytes(first.request), first.pressure)
    finally:
        ce.use_backend(previous)
    assert out["rust"] == out["python"]


def test_midnight_scope_revocation_and_recall_change_the_body_never_the_prefix(backend: str) -> None:
    planner, plan = make_plan()
    clock = ce.FixedClock(ce.FixedClock(plan.created_at).now().replace(hour=23, minute=58))
    builder = make_builder(planner, clock)
    items = session(6)
    run = run_at(items, len(items) - 4)
    cp = checkpoint_for(items)
    base = builder.build(run, cp, AGENT, ALICE, plan=plan)
    clock.advance(timedelta(minutes=5))
    after_midnight = builder.build(run, cp, AGENT, ALICE, plan=plan)
    revoked = ce.Principal("alice", "acme", frozenset({"files.read"}))
    after_revoke = builder.build(run, cp, AGENT, revoked, plan=plan)
    with_recall = builder.build(
        run, checkpoint_for(items, recall=("user prefers metric units",)), AGENT, revoked, plan=plan
    )
    requests = [base, after_midnight, after_revoke, with_recall]
    assert len({r.metadata["prefix_sha256"] for r in requests}) == 1
    assert len({r.metadata["body_sha256"] for r in requests}) == 4
    assert [t.name for t in after_revoke.tools] == [t.name for t in base.tools]


def test_body_follows_the_region_order_and_chronology(backend: str) -> None:
    # The region table's order is builder version 2's (and 1's); version 3 moves the tail
    # classes last (tests/assembly/test_stable_bodies.py).
    planner, plan = make_plan(builder_version=BUILDER_V2)
    items = session(4)
    seed_index = len(items) - 4
    cp = checkpoint_for(
        items,
        recall=("r1",),
        knowledge=(KnowledgePassage("k1", "a passage", 1.0),),
        loaded_skills=(SkillBody("pdf", "how to read pdfs"),),
        corrections=("the user's name is Ana, not Anna",),
        working_state=WorkingState(objective="x"),
    )
    request = make_builder(planner).build(run_at(items, seed_index), cp, AGENT, ALICE, plan=plan)
    classes = [item.region_class for item in request.body]
    ranks = [ORDER[c] for c in classes]
    assert ranks == sorted(ranks)
    # Metadata and working state precede the current user message; the turn's pair follows it in order.
    assert classes.index("working_state") < classes.index("runtime_metadata") < classes.index("current_user")
    tail = request.body[classes.index("current_user") :]
    assert [i.role for i in tail] == ["user", "assistant", "tool", "assistant"]
    assert [i.seq for i in tail] == sorted(i.seq for i in tail)  # type: ignore[type-var]


def test_reasoning_replays_before_its_tool_call(backend: str) -> None:
    planner, plan = make_plan()
    items = session(2)
    seed_index = 4
    # The reasoning item shares the user message's position: it replays after
    # the user message and before the tool call that followed it.
    reasoning = ce.ReasoningItem(
        "openai", {"type": "reasoning", "id": "rs_1", "summary": []}, seq=items[4].seq
    )
    cp = checkpoint_for(items, reasoning=(reasoning,))
    request = make_builder(planner).build(run_at(items, seed_index), cp, AGENT, ALICE, plan=plan)
    roles = [
        (i.region_class, i.reasoning is not None, i.call_id)
        for i in request.body
        if i.region_class.startswith("current")
    ]
    assert roles[1] == ("current_turn", True, None) and roles[2][2] == "c1"
    body = to_openai_responses(request, model="m")
    kinds = [(x.get("type"), x.get("call_id")) for x in body["input"]]
    assert kinds.index(("reasoning", None)) == kinds.index(("function_call", "c1")) - 1


@SETTINGS
@given(case=checkpoints(), window=st.sampled_from([20_000, 24_000, 32_000, 64_000]))
def test_pairs_survive_every_yield_path_in_every_format(case: Any, window: int) -> None:
    items, cp, seed_index = case
    try:
        planner, plan = make_plan(window)
    except ce.ContextOverflow:
        return
    assembly = make_builder(planner).assemble(run_at(items, seed_index), cp, AGENT, ALICE, plan=plan)
    request = assembly.request
    p = assembly.pressure
    assert p.total_tokens <= p.capacity_tokens or not p.fits
    if p.fits:
        assert p.total_tokens <= plan.budget.total_tokens - plan.budget.reserve_output_tokens
        assert request.max_output_tokens <= plan.budget.reserve_output_tokens
    for render, fmt in FORMATS:
        check_wire_pairs(render(request, model="m"), fmt)


def _measure(builder: ContextBuilder, items: list[Any], seed_index: int, plan: Any, **cp_kw: Any) -> Any:
    return builder.assemble(
        run_at(items, seed_index), checkpoint_for(items, **cp_kw), AGENT, ALICE, plan=plan
    )


def _turns_to_fill(builder: ContextBuilder, plan: Any, result_size: int, room: int) -> list[Any]:
    """The longest session whose plain body leaves at most ``room`` tokens free, yet fits."""
    usable = plan.budget.usable_body_tokens
    turns = 1
    while True:
        items = session(turns + 1, result_size=result_size)
        p = _measure(builder, items, len(items) - 4, plan).pressure
        if not p.fits or p.yield_steps:
            items = session(turns, result_size=result_size)
            return items
        turns += 1
        if usable - p.body_tokens <= room:
            return items


def test_knowledge_then_recall_yield_in_order_and_no_more_than_needed(backend: str) -> None:
    # A tool-result share large enough that its class cap never binds here.
    policy = ce.BudgetPolicy.from_dict({"tool_results": {"ratio": 0.45}})
    planner, plan = make_plan(40_000, policy=policy)
    builder = make_builder(planner)
    usable = plan.budget.usable_body_tokens
    items = _turns_to_fill(builder, plan, 60, room=1_300)
    seed_index = len(items) - 4
    plain = _measure(builder, items, seed_index, plan).pressure
    room = usable - plain.body_tokens
    assert plain.fits and plain.yield_steps == () and 200 < room <= 1_300, room
    # Knowledge worth 1.2x the room, recall worth 1.5x: all knowledge must go, then some recall.
    passage_words = int(room * 0.4 * 3 / 5)
    knowledge = tuple(KnowledgePassage(f"k{i}", "fact " * passage_words, score=float(i)) for i in range(3))
    recall = tuple(f"line {i} " + "x" * int(room * 0.25 * 3) for i in range(6))
    loaded = _measure(builder, items, seed_index, plan, knowledge=knowledge, recall=recall)
    p = loaded.pressure
    kinds = [s.split(":")[0] for s in p.yield_steps]
    assert p.fits and p.body_tokens <= usable
    # Every passage went (lowest score first) before any recall line did, and no further rung was taken.
    assert [s for s in p.yield_steps if s.startswith("knowledge")] == [
        f"knowledge_dropped:k{i}" for i in range(3)
    ]
    assert kinds == ["knowledge_dropped"] * 3 + ["recall_lines_dropped"], p.yield_steps
    dropped = int(p.yield_steps[-1].split(":")[1])
    assert 0 < dropped < len(recall)
    # No more than needed: keeping one more recall line would not have fitted.
    one_more = _measure(builder, items, seed_index, plan, recall=recall[: len(recall) - dropped + 1]).pressure
    assert one_more.yield_steps == ("recall_lines_dropped:1",)


def test_tool_results_truncate_oldest_first_before_any_cut(backend: str) -> None:
    policy = ce.BudgetPolicy.from_dict({"tool_results": {"ratio": 0.6}})
    planner, plan = make_plan(40_000, policy=policy)
    builder = make_builder(planner)
    usable = plan.budget.usable_body_tokens
    items = _turns_to_fill(builder, plan, 900, room=400)
    # Two more big turns: the body is over; truncating old results must absorb it.
    items = session(len(items) // 4 + 2, result_size=900)
    seed_index = len(items) - 4
    assembly = _measure(builder, items, seed_index, plan)
    p = assembly.pressure
    kinds = [s.split(":")[0] for s in p.yield_steps]
    assert "tool_results_truncated" in kinds and "history_cut" not in kinds, p.yield_steps
    assert p.fits and p.body_tokens <= usable
    pointers = [
        i
        for i in assembly.request.body
        if i.role == "tool" and (i.text or "").startswith("[tool result elided")
    ]
    n = len(pointers)
    # Oldest first: the truncated results are exactly the first n history results.
    history_results = [i for i in assembly.request.body if i.role == "tool" and i.region_class == "history"]
    assert history_results[:n] == pointers
    # The pair stays whole in every wire format.
    for render, fmt in FORMATS:
        check_wire_pairs(render(assembly.request, model="m"), fmt)


def test_history_cut_requests_compaction_and_build_refuses(backend: str) -> None:
    planner, plan = make_plan(24_000)
    builder = make_builder(planner)
    items = session(60, result_size=600)
    seed_index = len(items) - 4
    assembly = _measure(builder, items, seed_index, plan)
    p = assembly.pressure
    assert not p.fits and p.compactable and p.reason == "history_requires_compaction" and p.history_cut > 0
    # The cut never splits a pair and leaves the current turn whole.
    ce.validate_tool_pairs([i for i in items[p.history_cut : seed_index]])
    with pytest.raises(ce.ContextOverflow, match="compact before building"):
        builder.build(run_at(items, seed_index), checkpoint_for(items), AGENT, ALICE, plan=plan)


def test_fixed_body_that_cannot_fit_is_reported_not_truncated(backend: str) -> None:
    # Builder version 1 (a plan stored before ADR 0021): shown whole, however large.
    planner, plan = make_plan(24_000, builder_version=BUILDER_V1)
    builder = make_builder(planner)
    huge_user = ce.UserMessage("please read this: " + "z" * 60_000, seq=1)
    items = [huge_user]
    assembly = builder.assemble(ce.RunContext("r1", "s1", 1), checkpoint_for(items), AGENT, ALICE, plan=plan)
    assert assembly.pressure.reason == "fixed_body_exceeds_context_window"
    assert not assembly.pressure.fits and not assembly.pressure.compactable
    # Nothing was cut out of the user's message.
    assert assembly.request.body[-1].text is not None and assembly.request.body[-1].text.count("z") == 60_000
    with pytest.raises(ce.ContextOverflow) as info:
        builder.build(ce.RunContext("r1", "s1", 1), checkpoint_for(items), AGENT, ALICE, plan=plan)
    assert info.value.budget_class == "fixed_body_exceeds_context_window"
    # The error compares what was compared: the body against the usable body.
    assert info.value.cap == plan.budget.usable_body_tokens and info.value.tokens > info.value.cap


def test_working_state_over_cap_is_reported(backend: str) -> None:
    planner, plan = make_plan()
    facts = tuple(StateEntry(f"f{i}", "an established fact " * 20, ce.TrustLevel.USER) for i in range(40))
    items = session(1)
    p = _measure(
        make_builder(planner), items, 0, plan, working_state=WorkingState(established_facts=facts)
    ).pressure
    assert p.reason == "working_state_exceeds_cap" and not p.fits and not p.compactable


def test_skill_bodies_over_cap_are_reported(backend: str) -> None:
    planner, plan = make_plan()
    skills = tuple(SkillBody(f"s{i}", "step " * 10) for i in range(3))
    p = _measure(make_builder(planner), session(1), 0, plan, loaded_skills=skills).pressure
    assert p.reason == "skill_bodies_exceed_cap" and not p.fits


def test_orphaned_current_turn_pair_is_rejected(backend: str) -> None:
    planner, plan = make_plan()
    items = [ce.UserMessage("hi", seq=1), ce.ToolCall("c1", "search", {}, seq=2)]
    with pytest.raises(ce.OrphanedToolPair):
        make_builder(planner).build(
            ce.RunContext("r1", "s1", 1), checkpoint_for(items), AGENT, ALICE, plan=plan
        )


def test_an_undeclared_region_class_fails_assembly() -> None:
    from ctxengine.assembly.regions import UndeclaredRegionClass, order_of

    with pytest.raises(UndeclaredRegionClass):
        order_of("surprise_block")


def test_build_needs_a_plan() -> None:
    planner, _ = make_plan()
    with pytest.raises(ce.ContextError):
        make_builder(planner).build(ce.RunContext("r1", "s1", 1), checkpoint_for([]), AGENT, ALICE)


def test_whether_a_summary_can_be_compacted_again_follows_the_configured_depth_limit(backend: str) -> None:
    planner, plan = make_plan(24_000)
    items = session(2)
    run = run_at(items, len(items) - 4)

    def pressure(builder: ContextBuilder, depth: int) -> Any:
        cp = checkpoint_for(items, compacted_summary="earlier work. " * 5_000, summary_depth=depth)
        return builder.assemble(run, cp, AGENT, ALICE, plan=plan).pressure

    default = make_builder(planner)
    deeper = ContextBuilder(planner, clock=ce.FixedClock(NOON), max_compaction_depth=3)
    assert default.max_compaction_depth == 2
    for p in (pressure(default, 1), pressure(default, 2), pressure(deeper, 2)):
        assert p.reason == "body_exceeds_context_window" and not p.fits
    assert pressure(default, 1).compactable and not pressure(default, 2).compactable
    assert pressure(deeper, 2).compactable and not pressure(deeper, 3).compactable
    for bad in (0, True, "2"):
        with pytest.raises(ce.ModelValidationError, match="max_compaction_depth"):
            ContextBuilder(planner, max_compaction_depth=bad)  # type: ignore[arg-type]


def test_a_rebuild_reuses_blocks_only_while_its_inputs_are_the_same(backend: str) -> None:
    """The builder keeps a line's last blocks for the same checkpoint fields,
    turn, principal and clock minute: each of those changing shows in the body,
    exactly as a fresh builder renders it."""
    planner, plan = make_plan()
    clock = ce.FixedClock(ce.FixedClock(plan.created_at).now().replace(hour=12, minute=0, second=59))
    builder = make_builder(planner, clock)
    items = session(6)
    run = run_at(items, len(items) - 4)
    cp = checkpoint_for(items, working_state=WorkingState(objective="a"))
    first = builder.build(run, cp, AGENT, ALICE, plan=plan)
    assert _bytes(builder.build(run, cp, AGENT, ALICE, plan=plan)) == _bytes(first)
    changed = [
        builder.build(run, replace(cp, working_state=WorkingState(objective="b")), AGENT, ALICE, plan=plan),
        builder.build(run, replace(cp, notes=("n",)), AGENT, ALICE, plan=plan),
        builder.build(run, cp, AGENT, ce.Principal("bob", "acme", frozenset()), plan=plan),
    ]
    assert _bytes(builder.build(run, cp, AGENT, ALICE, plan=plan)) == _bytes(first)
    clock.advance(timedelta(seconds=1))  # the next minute
    changed.append(builder.build(run, cp, AGENT, ALICE, plan=plan))
    shas = {r.metadata["body_sha256"] for r in [first, *changed]}
    assert len(shas) == 5
    fresh = make_builder(planner, clock).build(run, cp, AGENT, ALICE, plan=plan)
    assert _bytes(changed[-1]) == _bytes(fresh)


def test_a_growing_history_builds_its_render_line_and_the_bytes_of_a_fresh_builder(backend: str) -> None:
    """Build by build the session's render line follows the history (the fit reads
    renders from it); every request is the one a builder without that line makes,
    through growth, a shorter history (another seed) and a line that stopped matching."""
    planner, plan = make_plan()
    builder = make_builder(planner)
    items = session(8)
    for end, seed in ((12, 8), (16, 12), (32, 28), (12, 4), (32, 24)):
        shown = items[:end]
        run, cp = run_at(shown, seed), checkpoint_for(shown)
        got = builder.assemble(run, cp, AGENT, ALICE, plan=plan)
        line = builder._tables(run.session_id, shown[:seed]).line
        assert len(line.items) == seed and all(a is b for a, b in zip(line.items, shown, strict=False))
        assert all(r is not None for r in line.renders)
        # (A builder sharing the process's render cache: the line starts again, on equal copies.)
        want = make_builder(planner).assemble(
            run_at(_fresh(shown), seed), checkpoint_for(_fresh(shown)), AGENT, ALICE, plan=plan
        )
        assert _bytes(got.request) == _bytes(want.request)
        assert got.pressure == want.pressure


def test_a_line_seen_first_fills_its_tables_as_a_growing_line_does(backend: str) -> None:
    """A fresh worker renders a whole history into empty tables in one go; the tables hold
    what rendering it item by item, as it grew, leaves (equal copies rendered once)."""
    planner, _ = make_plan()
    items = session(8)
    history = (*items, *_fresh(items[-4:]))  # equal copies of the last items (one render each)
    fresh, grown = make_builder(planner), make_builder(planner)
    fresh.prerender(fresh._tables("first-seen", history), history, history)
    grown.prerender(grown._tables("grown", history), history[:1], history[:1])
    grown.prerender(grown._tables("grown", history), history[:9], history[:9])
    grown.prerender(grown._tables("grown", history), history, history)
    a, b = fresh._tables("first-seen", history), grown._tables("grown", history)
    assert list(a.renders.items()) == list(b.renders.items())
    assert list(a.pointers.items()) == list(b.pointers.items())
    assert len(a.renders) == len(items) and len(a.pointers) == sum(
        isinstance(item, ce.ToolResult) for item in items
    )


def test_a_line_seen_first_starts_the_fit_line_with_its_renders(backend: str) -> None:
    """Rendering a whole history into empty tables starts the fit's line with it at once
    (the renders and pointers the tables just took, item for item: what ``line_of`` would
    read back); with equal items among it the line waits for the build, as before. The
    request built on it is the one a builder that never had that line makes."""
    planner, plan = make_plan()
    items = session(8)
    seed = 28  # the last turn's user message
    for tag, extra in (("seen twice", 1), ("seen first", 0)):
        # (A first message of its own: tables of their own in the process's render cache.)
        own = [ce.UserMessage(f"{tag} ({backend}): {items[0].content}", seq=items[0].seq), *items[1:]]
        history = (*own[:seed], *_fresh(own[:extra]))
        builder = make_builder(planner)
        renders = builder.prerender(builder._tables("s1", history), history, history)
        tables = builder._tables("s1", history)
        line = tables.line
        assert all(r is tables.renders[digest_of(item)] for r, item in zip(renders, history, strict=True))
        if extra:
            assert not line.items
            continue
        assert len(line.items) == len(history)
        assert all(a is b for a, b in zip(line.items, history, strict=True))
        # The seed's renders of its last items come off the line; of others, from the tables.
        assert tables.line_tail(history[-3:]) == line.renders[-3:]
        assert tables.line_tail(history[:3]) is None and tables.line_tail(()) is None
        assert builder.prerender(builder._tables("s1", history), history, history[:3]) == line.renders[:3]
        for item, render, pointer in zip(line.items, line.renders, line.pointers, strict=True):
            assert render is tables.renders[digest_of(item)]
            assert pointer is (tables.pointers[digest_of(item)] if isinstance(item, ce.ToolResult) else None)
        shown = [*history, *own[seed:]]
        got = builder.assemble(run_at(shown, seed), checkpoint_for(shown), AGENT, ALICE, plan=plan)
        assert tables.line.items[:seed] == list(history)  # the build went on from the line
        fresh = _fresh(shown)
        want = make_builder(planner).assemble(
            run_at(fresh, seed), checkpoint_for(fresh), AGENT, ALICE, plan=plan
        )
        assert _bytes(got.request) == _bytes(want.request)
