"""Issue 14 acceptance 1 and 4: on an OpenAI model the engine's estimate of a request is
its exact count (within 5%, never below), and the history is cut only when the
window is really full.

"Exact" is ADR 0012's definition, computed here independently of the estimator from
the OpenAI Chat Completions payload the request renders to: the encoding (OpenAI's
``tiktoken`` over the shipped ranks) of every message field, 3 tokens per message,
3 priming the reply, and each tool's canonical JSON plus 4.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

import ctxengine as ce
from ctxengine.assembly.builder import ContextBuilder
from ctxengine.cli.bench_counting import CLASSES, CORPUS
from ctxengine.model import Checkpoint
from ctxengine.plan import ContextPlanner
from ctxengine.providers import to_openai_chat
from ctxengine.reference import tokenize

AGENT = ce.AgentSpec("agent-1", "v1", "You are a careful research assistant. Cite the tools you used.")
ALICE = ce.Principal("alice", "acme", frozenset({"files.read", "web.search"}))
TOOLS = (
    ce.ToolSpec("search", "Search the web.", {"type": "object", "properties": {"q": {"type": "string"}}}),
    ce.ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}),
)
CLOCK = ce.FixedClock(datetime(2026, 11, 29, 12, 0, tzinfo=UTC))


def pieces(name: str, size: int = 1500) -> list[str]:
    """A corpus file cut into items of about ``size`` bytes, on line ends."""
    out: list[str] = []
    current = ""
    for line in (CORPUS / CLASSES[name]).read_text(encoding="utf-8").splitlines(keepends=True):
        current += line
        if len(current.encode()) >= size:
            out.append(current)
            current = ""
    if current:
        out.append(current)
    return out


def corpus_turns(classes: list[str], turns: int, *, parallel: bool = False) -> list[Any]:
    """Turns of user question (prose), a tool call (two in parallel when ``parallel``),
    its result (``classes`` in rotation) and an answer (prose)."""
    prose = pieces("prose", 400)
    results = {name: pieces(name) for name in classes}
    items: list[Any] = []
    for t in range(turns):
        name = classes[t % len(classes)]
        calls = [f"call_{t:03d}a", f"call_{t:03d}b"] if parallel else [f"call_{t:03d}"]
        items.append(ce.UserMessage(prose[t % len(prose)], seq=len(items) + 1))
        for i, call_id in enumerate(calls):
            args = {"path": f"{name}/{t}-{i}.txt"}
            items.append(ce.ToolCall(call_id, "read_file", args, seq=len(items) + 1))
        for i, call_id in enumerate(calls):
            text = results[name][(t + i) % len(results[name])]
            items.append(ce.ToolResult(call_id, text, seq=len(items) + 1))
        items.append(ce.AssistantMessage(prose[(t + 3) % len(prose)][:600], seq=len(items) + 1))
    return items


def exact_count(request: ce.ModelRequest, encoding: str) -> int:
    """ADR 0012's exact count of a request, from its OpenAI Chat Completions payload."""

    def count(text: str) -> int:
        return tokenize.count_tokens(encoding, text)

    total = 3  # the reply priming
    for message in to_openai_chat(request, model="m")["messages"]:
        total += 3 + count(message["role"])
        if message.get("content"):
            total += count(message["content"])
        if message["role"] == "tool":
            total += count(message["tool_call_id"])
        for call in message.get("tool_calls", []):
            total += (
                count(call["id"]) + count(call["function"]["name"]) + count(call["function"]["arguments"])
            )
    for tool in request.tools:
        total += 4 + count(ce.canonical_json(tool).decode())
    return total


def exact_body(request: ce.ModelRequest, encoding: str) -> int:
    bare = ce.ModelRequest((), request.body, (), 1, (), {})
    return exact_count(bare, encoding) - 3


def setup(model: ce.ResolvedModel, estimator: Any) -> tuple[ContextPlanner, ContextBuilder, ce.ContextPlan]:
    planner = ContextPlanner(None, estimator=estimator, clock=CLOCK)
    plan = planner.draft("s1", 1, AGENT, model, TOOLS, policy_version="pv1", memory_snapshot="likes tea")
    return planner, ContextBuilder(planner, clock=CLOCK), plan


def assemble(builder: ContextBuilder, plan: ce.ContextPlan, items: list[Any]) -> ce.Assembly:
    seed = max(i for i, it in enumerate(items) if isinstance(it, ce.UserMessage))
    run = ce.RunContext("r1", "s1", items[seed].seq)
    return builder.assemble(run, Checkpoint("r1", conversation=tuple(items)), AGENT, ALICE, plan=plan)


@pytest.mark.parametrize(
    ("model_name", "encoding"), [("gpt-4o", "o200k_base"), ("gpt-4-turbo", "cl100k_base")]
)
def test_estimate_over_exact_per_request_is_within_five_percent(
    backend: str, model_name: str, encoding: str
) -> None:
    model = ce.ResolvedModel("openai", model_name, 1_000_000, 16_384, 8_192)
    _, builder, plan = setup(model, ce.TokenEstimator())
    assert plan.counting == encoding
    for classes in [[name] for name in CLASSES] + [list(CLASSES)]:
        for parallel in (False, True):
            items = corpus_turns(classes, 12, parallel=parallel)
            turn = 6 if parallel else 4
            for end in (turn, 5 * turn, len(items)):
                request = assemble(builder, plan, items[:end]).request
                ratio = request.metadata["total_tokens"] / exact_count(request, encoding)
                assert 1.0 <= ratio <= 1.05, (classes, parallel, end, ratio)
                assert request.metadata["counting"] == encoding


def test_no_single_item_is_under_counted(backend: str) -> None:
    est = ce.TokenEstimator()
    model = ce.ResolvedModel("openai", "gpt-4o", 1_000_000, 16_384, 8_192)
    _, builder, plan = setup(model, est)
    request = assemble(builder, plan, corpus_turns(list(CLASSES), 24)).request
    for item in request.body:
        one = ce.ModelRequest((), (item,), (), 1, (), {})
        assert est.raw(item, plan.counting_key) >= exact_count(one, "o200k_base") - 3, item
    # and the prefix, measured once at plan time, is its exact count
    prefix_only = ce.ModelRequest(request.prefix, (), request.tools, 1, (), {})
    assert plan.prefix_tokens == exact_count(prefix_only, "o200k_base")


def test_the_first_cut_comes_when_the_window_is_full(backend: str) -> None:
    """Acceptance 4: at the first history cut the request's exact count is >= 90% of the
    usable body budget (with the byte heuristic it is about 70%)."""
    model = ce.ResolvedModel("openai", "gpt-4o-mini", 32_000, 4_096, 4_096)
    fill = {}
    for method in ("o200k_base", "heuristic"):
        est = ce.TokenEstimator(encodings={"openai:gpt-4o-mini": method})
        _, builder, plan = setup(model, est)
        items = corpus_turns(list(CLASSES), 80)
        for end in range(4, len(items) + 1, 4):
            assembly = assemble(builder, plan, items[:end])
            if assembly.pressure.history_cut > 0:
                fill[method] = exact_body(assembly.request, "o200k_base") / plan.budget.usable_body_tokens
                break
    assert fill["o200k_base"] >= 0.90, fill
    assert fill["heuristic"] < 0.80, fill
