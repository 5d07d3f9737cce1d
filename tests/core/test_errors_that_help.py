"""Issue 40, "errors that help": each trap's error is typed, keeps its structured fields,
and its message names the cause (what is larger than what) and the fix."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from types import ModuleType

import pytest

import ctxengine as ce
from ctxengine.assembly.builder import Pressure
from ctxengine.assembly.overflow import overflow_detail
from ctxengine.cli.turns import AGENT, MODEL, POLICY_VERSION, PRINCIPAL, TOOLS, ScriptedWorker
from ctxengine.core.budget import BudgetPolicy, allocate, check_prefix_class
from ctxengine.errors import ArgumentError, ContextOverflow, IdempotencyConflict, ModelValidationError
from ctxengine.interop import anthropic, langchain, openai_chat, openai_responses
from ctxengine.stores.events import Store

SID = "errors-session"
SMALL = ce.ResolvedModel("acme", "m-8k", 8192, 4096, 4096)


def test_history_floor_says_the_budget_is_below_the_floor_and_names_the_knob(backend: str) -> None:
    with pytest.raises(ContextOverflow) as caught:
        allocate(SMALL, 0)
    err = caught.value
    # body 4096, margin 204, usable 3892, tool results 973, working state 1000 -> history 1919
    assert (err.budget_class, err.tokens, err.cap) == ("history", 1919, 8000)
    assert str(err) == (
        "history: the history budget of 1919 tokens is below its floor of 8000 tokens: the window of "
        "8192 tokens leaves 1919 for history after the output reserve of 4096, the prefix of 0, the "
        "safety margin of 204, the working state of 1000 and the tool results of 973; lower "
        "BudgetPolicy history.floor_tokens (BudgetPolicy.from_dict({'history': {'floor_tokens': N}})) "
        "or use a larger window"
    )
    # The knob named moves it.
    assert (
        allocate(SMALL, 0, BudgetPolicy.from_dict({"history": {"floor_tokens": 1919}})).history_tokens == 1919
    )


def test_prefix_ceiling_and_window_overflows_name_their_knobs(backend: str) -> None:
    with pytest.raises(ContextOverflow) as caught:
        allocate(SMALL, 16_000)
    assert (caught.value.budget_class, caught.value.tokens, caught.value.cap) == ("prefix", 16_000, 15_000)
    assert str(caught.value).startswith(
        "prefix: the prefix of 16000 tokens exceeds the prefix ceiling of 15000 tokens; "
    )
    assert "BudgetPolicy.from_dict({'prefix': {'ceiling_tokens': N}})" in str(caught.value)
    with pytest.raises(ContextOverflow) as caught:
        allocate(SMALL, 5000)
    assert (caught.value.budget_class, caught.value.tokens, caught.value.cap) == (
        "context_window",
        9096,
        8192,
    )
    assert str(caught.value).startswith(
        "context_window: the output reserve of 4096 tokens and the prefix of 5000 tokens take 9096 "
        "tokens, leaving no body in the window of 8192 tokens; lower BudgetPolicy output.reserve_tokens"
    )


def test_both_backends_word_the_overflow_alike() -> None:
    messages = []
    for name in ("rust", "python"):
        previous = ce.backend()
        ce.use_backend(name)
        try:
            with pytest.raises(ContextOverflow) as caught:
                allocate(SMALL, 0)
            messages.append(str(caught.value))
        finally:
            ce.use_backend(previous)
    assert messages[0] == messages[1]


def test_prefix_class_caps_say_what_exceeds_what() -> None:
    policy = BudgetPolicy()
    with pytest.raises(
        ContextOverflow,
        match=r"^tool_definitions: 9000 tokens exceed the cap of 6000 tokens; "
        r"raise BudgetPolicy tool_definitions\.max_tokens",
    ) as caught:
        check_prefix_class(policy, "tool_definitions", 9000)
    assert (caught.value.tokens, caught.value.cap) == (9000, policy.tool_definitions_tokens)
    with pytest.raises(
        ContextOverflow,
        match=r"items exceed the cap of .* items; raise BudgetPolicy "
        r"tool_definitions\.max_items",
    ):
        check_prefix_class(policy, "tool_definitions", 10, items=policy.tool_definitions_items + 1)


def test_a_turn_that_outgrows_the_body_says_it_is_the_turn_not_the_window() -> None:
    """The 43-tool-step trap: ``28752 tokens exceeds cap of 29952`` read as if the request were
    over the window; the message now says the fixed body is larger than the usable body."""
    budget = allocate(ce.ResolvedModel("acme", "m-32k", 32_768, 2816, 2816), 1000)
    p = Pressure(
        fits=False,
        compactable=False,
        reason="fixed_body_exceeds_context_window",
        total_tokens=28_752,
        prefix_tokens=1000,
        body_tokens=27_752,
        reserve_tokens=2816,
        capacity_tokens=29_952,
        history_cut=0,
        history_budget_tokens=0,
    )
    detail = overflow_detail(p, budget, "after 0 compaction(s) this step (no further compaction can help)")
    err = ContextOverflow(p.reason, p.total_tokens, p.capacity_tokens, detail)
    text = str(err)
    assert text.startswith(
        "fixed_body_exceeds_context_window: the body's fixed part (the current turn with its tool steps, "
        "the working state and the skill bodies) is larger than the usable body"
    )
    assert f"the usable body is {budget.usable_body_tokens} tokens (the window of 32768" in text
    assert "this request measures 27752 body tokens, 28752 in all of the 29952" in text
    assert "end the turn in fewer tool steps" in text and "safety.margin_ratio" in text
    assert "exceeds cap" not in text


async def test_a_reused_step_number_says_so_and_how_to_advance_it(store: Store) -> None:
    worker = ScriptedWorker(store)
    await worker.planner.plan(SID, AGENT, PRINCIPAL, MODEL, TOOLS, policy_version=POLICY_VERSION)
    seed = await ce.append_item(store, SID, ce.UserMessage("look it up"), principal=PRINCIPAL)
    assert seed.seq is not None
    run = ce.RunContext("t-1", SID, seed.seq, step=0)
    lease = await store.checkpoints.claim(run.run_id, "w")
    cp = await worker.loop._seed_checkpoint(run, PRINCIPAL, lease=lease)
    cp = await worker.loop.record_step(run, cp, [ce.AssistantMessage("first")], lease=lease)
    with pytest.raises(IdempotencyConflict) as caught:
        await worker.loop.record_step(run, cp, [ce.AssistantMessage("second")], lease=lease)
    text = str(caught.value)
    assert "derivation key 'conversation.item:t-1:0:0'" in text
    assert "step 0 of run 't-1' was already recorded with other items" in text
    assert "dataclasses.replace(run, step=run.step + 1)" in text
    # The fix it names works.
    await worker.loop.record_step(replace(run, step=1), cp, [ce.AssistantMessage("second")], lease=lease)


async def test_other_keys_keep_the_stores_generic_conflict(store: Store) -> None:
    await ce.append_item(store, SID, ce.UserMessage("a"), derivation_key="mine:1")
    with pytest.raises(IdempotencyConflict) as caught:
        await ce.append_item(store, SID, ce.UserMessage("b"), derivation_key="mine:1")
    assert "with a different payload" in str(caught.value) and "step" not in str(caught.value)


async def test_plan_names_a_tool_given_as_a_dict(store: Store) -> None:
    worker = ScriptedWorker(store)
    tool = {"name": "search", "description": "find", "input_schema": {"type": "object"}}
    with pytest.raises(ArgumentError) as caught:
        await worker.planner.plan(SID, AGENT, PRINCIPAL, MODEL, [tool], policy_version=POLICY_VERSION)  # type: ignore[list-item]
    assert (caught.value.function, caught.value.argument) == ("ContextPlanner.plan", "tools[0]")
    assert str(caught.value).startswith(
        "ContextPlanner.plan: tools[0]: expected a ToolSpec (ToolSpec(name, description, input_schema), "
        "or ToolSpec.from_dict(d)), got dict {"
    )
    assert isinstance(caught.value, TypeError)  # what the bare AttributeError never was


async def test_plan_names_a_model_given_by_name(store: Store) -> None:
    worker = ScriptedWorker(store)
    with pytest.raises(ArgumentError) as caught:
        await worker.planner.plan(SID, AGENT, PRINCIPAL, "gpt-4o", TOOLS, policy_version=POLICY_VERSION)  # type: ignore[arg-type]
    assert caught.value.argument == "model"
    assert "expected a ResolvedModel (ResolvedModel(provider, model, context_window" in str(caught.value)
    assert str(caught.value).endswith("not a model name, got str 'gpt-4o'")
    with pytest.raises(ArgumentError, match=r"^ContextPlanner\.plan: tools: expected a sequence of ToolSpec"):
        await worker.planner.plan(SID, AGENT, PRINCIPAL, MODEL, TOOLS[0], policy_version=POLICY_VERSION)  # type: ignore[arg-type]


@pytest.mark.parametrize("module", [openai_chat, anthropic, openai_responses, langchain])
def test_to_items_names_a_trust_given_as_a_level(module: ModuleType) -> None:
    with pytest.raises(ArgumentError) as caught:
        module.to_items([], trust="external_untrusted")
    assert caught.value.argument == "trust"
    text = str(caught.value)
    assert "expected a mapping of message index to trust level ({0: 'external_untrusted'})" in text
    assert "got str 'external_untrusted'" in text and "tool_trust=" in text
    # The accepted shapes still work.
    msgs = [{"role": "user", "content": "hi"}] if module is openai_chat else []
    assert len(openai_chat.to_items(msgs, trust={0: "external_untrusted"})) == len(msgs)


@pytest.mark.parametrize(
    ("make", "type_name", "field"),
    [
        (lambda s: ce.UserMessage(s), "UserMessage", "content"),
        (lambda s: ce.UserMessage("hi", principal_id=s), "UserMessage", "principal_id"),
        (lambda s: ce.AssistantMessage(s), "AssistantMessage", "content"),
        (lambda s: ce.SystemMessage(s), "SystemMessage", "content"),
        (lambda s: ce.ToolCall(s, "search", {}), "ToolCall", "call_id"),
        (lambda s: ce.ToolCall("c1", s, {}), "ToolCall", "name"),
        (lambda s: ce.ToolResult(s, "ok"), "ToolResult", "call_id"),
        (lambda s: ce.ToolResult("c1", s), "ToolResult", "content"),
        (lambda s: ce.UserMessage((ce.TextPart(s),)), "TextPart", "text"),
        (lambda s: ce.ReasoningItem(s, {}), "ReasoningItem", "provider"),
    ],
)
def test_value_types_refuse_a_lone_surrogate_at_construction(
    make: Callable[[str], object], type_name: str, field: str
) -> None:
    with pytest.raises(ModelValidationError) as caught:
        make("caf\u00e9 \ud800 tail")
    assert (caught.value.type_name, caught.value.field) == (type_name, field)
    assert str(caught.value).startswith(
        f"{type_name}.{field}: lone surrogate U+D800 at index 5: the text is not valid UTF-8"
    )
    assert "errors='replace'" in str(caught.value)
    # Valid non-ASCII text (an astral character is a pair in UTF-16, one code point here) passes.
    make("caf\u00e9 \U0001f600")
