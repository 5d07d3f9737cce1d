"""Shared builders of plans, checkpoints and sessions for the assembly tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

import ctxengine as ce
from ctxengine.assembly.builder import ContextBuilder
from ctxengine.model import Checkpoint, KnowledgePassage, StateEntry, WorkingState
from ctxengine.plan import ContextPlan, ContextPlanner

AGENT = ce.AgentSpec("agent-1", "v1", "You are a careful research assistant.")
ALICE = ce.Principal("alice", "acme", frozenset({"files.read", "web.search"}))
TOOLS = (
    ce.ToolSpec("search", "Search the web.", {"type": "object", "properties": {"q": {"type": "string"}}}),
    ce.ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}),
)
NOON = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def make_plan(
    window: int = 128_000,
    *,
    policy: ce.BudgetPolicy | None = None,
    memory: str = "",
    builder_version: str | None = None,
) -> tuple[ContextPlanner, ContextPlan]:
    model = ce.ResolvedModel("openai", "gpt-x", window, 16_384, 8_192)
    planner = ContextPlanner(None, estimator=ce.TokenEstimator(), clock=ce.FixedClock(NOON), policy=policy)
    plan = planner.draft(
        "s1",
        1,
        AGENT,
        model,
        TOOLS,
        policy_version="pv1",
        memory_snapshot=memory,
        builder_version=builder_version,
    )
    return planner, plan


def make_builder(planner: ContextPlanner, clock: ce.FixedClock | None = None) -> ContextBuilder:
    return ContextBuilder(planner, clock=clock or ce.FixedClock(NOON))


def turn_items(
    turn: int, first_seq: int, *, result_text: str = "result text", parallel: bool = False
) -> list[Any]:
    """One user turn: user, call(s), result(s), assistant — seqs from ``first_seq``."""
    seq = first_seq
    out: list[Any] = [ce.UserMessage(f"question {turn}", seq=seq)]
    calls = [f"c{turn}a", f"c{turn}b"] if parallel else [f"c{turn}"]
    for call_id in calls:
        seq += 1
        out.append(ce.ToolCall(call_id, "search", {"q": f"q{turn}"}, seq=seq))
    for call_id in calls:
        seq += 1
        out.append(ce.ToolResult(call_id, f"{result_text} {turn}", seq=seq))
    seq += 1
    out.append(ce.AssistantMessage(f"answer {turn}", seq=seq))
    return out


def session(turns: int, *, result_size: int = 20, parallel_every: int = 0) -> list[Any]:
    items: list[Any] = []
    for t in range(turns):
        parallel = parallel_every > 0 and t % parallel_every == 0
        items.extend(turn_items(t, len(items) + 1, result_text="r" * result_size, parallel=parallel))
    return items


def checkpoint_for(items: list[Any], **kw: Any) -> Checkpoint:
    return Checkpoint("r1", conversation=tuple(items), **kw)


def run_at(items: list[Any], seed_index: int, step: int = 0) -> ce.RunContext:
    return ce.RunContext("r1", "s1", items[seed_index].seq, step=step)


@st.composite
def checkpoints(draw: Any) -> tuple[list[Any], Checkpoint, int]:
    """A session with a current turn, plus optional knowledge, recall and working state."""
    turns = draw(st.integers(1, 12))
    size = draw(st.integers(1, 400))
    items = session(turns, result_size=size, parallel_every=draw(st.integers(0, 3)))
    # The current turn starts at the last user message.
    seed_index = max(i for i, it in enumerate(items) if isinstance(it, ce.UserMessage))
    knowledge = tuple(
        KnowledgePassage(f"k{i}", "passage " * draw(st.integers(1, 50)), score=float(draw(st.integers(0, 9))))
        for i in range(draw(st.integers(0, 4)))
    )
    recall = tuple(f"memory line {i}" for i in range(draw(st.integers(0, 5))))
    state = WorkingState(
        objective="answer the questions",
        constraints=(StateEntry("k1", "never email the customer", ce.TrustLevel.USER),),
    )
    cp = checkpoint_for(items, knowledge=knowledge, recall=recall, working_state=state)
    return items, cp, seed_index
