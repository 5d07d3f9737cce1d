"""The Agents SDK driven by a scripted model, for the ``ContextSession`` tests.

``ScriptModel`` implements the SDK's ``Model``: asked after the user spoke, it calls the
``lookup`` tool (twice in parallel on even turns); given the tool's results, it answers in
text. Every input it is given is kept (``inputs``), with the instructions, so that a test
can check what each model call carried. Ids are a function of the call count, so two runs
that make the same calls get the same items.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, FunctionTool, RunConfig, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

import ctxengine as ce
from ctxengine.assembly.render_cache import render_item
from ctxengine.assembly.request import RenderedItem
from ctxengine.interop import openai_responses

set_tracing_disabled(True)  # nothing leaves the machine
INSTRUCTIONS = "You answer questions with the lookup tool."
POINTER = "[tool result elided under context pressure] "
SMALL = ce.ResolvedModel("openai", "gpt-4o-mini", 16_000, 2_048, 2_048)


@function_tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"Notes on {topic}: " + " ".join(f"fact {i} about {topic}." for i in range(60))


def engine_tools(tool: FunctionTool = lookup) -> list[dict[str, Any]]:
    return [{"name": tool.name, "description": tool.description, "parameters": tool.params_json_schema}]


def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [])


class ScriptModel(Model):
    def __init__(self, first_id: int = 0) -> None:
        #: Ids count on from here (a call id is unique for the session's lifetime).
        self.calls = first_id
        self.inputs: list[tuple[str | None, list[dict[str, Any]]]] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        self.inputs.append((system_instructions, json.loads(json.dumps(items))))
        self.calls += 1
        n = self.calls
        last = items[-1]
        output: list[Any]
        if last.get("role") == "user":
            topic = _text(last)[:40]
            count = 2 if len(topic) % 2 == 0 else 1
            output = [
                ResponseFunctionToolCall(
                    id=f"fc_{n}_{k}",
                    call_id=f"call_{n}_{k}",
                    name="lookup",
                    arguments=json.dumps({"topic": f"{topic} {k}"}),
                    type="function_call",
                    status="completed",
                )
                for k in range(count)
            ]
        else:
            text = f"Answer {n}: " + str(last.get("output", ""))[:80]
            output = [
                ResponseOutputMessage(
                    id=f"msg_{n}",
                    content=[ResponseOutputText(text=text, type="output_text", annotations=[])],
                    role="assistant",
                    status="completed",
                    type="message",
                )
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def agent(model: ScriptModel) -> Agent[Any]:
    return Agent(name="assistant", instructions=INSTRUCTIONS, model=model, tools=[lookup])


def question(n: int) -> str:
    return f"Question {n}: what about topic number {n}{'?' * (n % 3)}"


async def run_turns(session: Any, model: ScriptModel, first: int, last: int, config: RunConfig) -> None:
    for n in range(first, last + 1):
        await Runner.run(agent(model), question(n), session=session, run_config=config)


def pair_problems(items: list[dict[str, Any]]) -> list[str]:
    """What splits a tool call from its result in a model input (empty: pair-safe)."""
    called: set[str] = set()
    answered: set[str] = set()
    problems = []
    for i, item in enumerate(items):
        if item.get("type") == "function_call":
            called.add(item["call_id"])
        elif item.get("type") == "function_call_output":
            if item["call_id"] not in called:
                problems.append(f"input[{i}]: result of {item['call_id']} without its call")
            answered.add(item["call_id"])
    problems += [f"call {c} without its result" for c in sorted(called - answered)]
    return problems


async def input_tokens(engine: ce.Engine, session_id: str, items: list[dict[str, Any]]) -> tuple[int, int]:
    """A model input's tokens as the engine counts a request (the plan's prefix, the items
    rendered as history), and the capacity the plan leaves for it."""
    plan = await engine.plan(session_id, engine.principal)
    converted = openai_responses.to_items(items, first_seq=None)
    rendered = [
        # A pointer the engine truncated a result to is its own text, counted as the builder did.
        RenderedItem("history", "tool", text=raw["output"], call_id=raw["call_id"])
        if str(raw.get("output", "")).startswith(POINTER)
        else render_item(item, "history")
        for raw, item in zip(items, converted, strict=True)
    ]
    key = plan.counting_key
    body = engine.estimator.corrected(sum(engine.estimator.raw_estimates(rendered, key)), key)
    return plan.prefix_tokens + body, plan.budget.total_tokens - plan.budget.reserve_output_tokens
