"""Issue 41, acceptance 3: ``ContextMiddleware`` in a 30-turn ``create_agent`` run with tools and
a fake chat model (``langchain_core``'s ``GenericFakeChatModel``, scripted with tool calls):
every model input is within the budget and pair-safe, and the budget binds."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import Field

import ctxengine as ce
from ctxengine.assembly.render_cache import render_item
from ctxengine.assembly.request import RenderedItem
from ctxengine.integrations.langchain import ContextMiddleware
from ctxengine.interop import langchain as lc_interop

PROMPT = "You answer questions with the lookup tool."
SMALL = ce.ResolvedModel("openai", "gpt-4o-mini", 16_000, 2_048, 2_048)
TURNS = 30
POINTER = "[tool result elided under context pressure] "


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"Notes on {topic}: " + " ".join(f"fact {i} about {topic}." for i in range(60))


def script() -> Iterator[AIMessage]:
    for n in range(1, TURNS + 1):
        calls = [
            {"name": "lookup", "args": {"topic": f"topic {n} {k}"}, "id": f"call_{n}_{k}"}
            for k in range(1 + n % 2)
        ]
        yield AIMessage(content="", tool_calls=calls)
        yield AIMessage(content=f"Answer {n}.")


class Scripted(GenericFakeChatModel):
    """The fake chat model, keeping every input it is given."""

    inputs: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.inputs.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def pair_problems(messages: list[BaseMessage]) -> list[str]:
    called: set[str] = set()
    answered: set[str] = set()
    problems = []
    for m in messages:
        if isinstance(m, AIMessage):
            called |= {c["id"] for c in m.tool_calls}
        elif isinstance(m, ToolMessage):
            if m.tool_call_id not in called:
                problems.append(f"result of {m.tool_call_id} without its call")
            answered.add(m.tool_call_id)
    return problems + [f"call {c} without its result" for c in sorted(called - answered)]


async def tokens(engine: ce.Engine, messages: list[BaseMessage]) -> tuple[int, int]:
    plan = await engine.plan("langchain", engine.principal)
    rendered = []
    for m in messages:
        if isinstance(m, ToolMessage) and str(m.content).startswith(POINTER):
            rendered.append(RenderedItem("history", "tool", text=str(m.content), call_id=m.tool_call_id))
        elif m.type != "system":
            alone = m.model_copy(update={"name": None}) if isinstance(m, ToolMessage) else m
            rendered += [render_item(i, "history") for i in lc_interop.to_items([alone], first_seq=None)]
        else:
            rendered.append(RenderedItem("history", "system", text=str(m.content)))
    key = plan.counting_key
    body = engine.estimator.corrected(sum(engine.estimator.raw_estimates(rendered, key)), key)
    return plan.prefix_tokens + body, plan.budget.total_tokens - plan.budget.reserve_output_tokens


async def test_thirty_turns_of_a_langchain_agent_stay_pair_safe_and_in_budget() -> None:
    lookup_spec = {
        "name": "lookup",
        "description": lookup.description,
        "parameters": lookup.args_schema.model_json_schema(),
    }
    async with ce.Engine.open("memory://", model=SMALL, instructions=PROMPT, tools=[lookup_spec]) as engine:
        model = Scripted(messages=script())
        agent = create_agent(model, [lookup], system_prompt=PROMPT, middleware=[ContextMiddleware(engine)])
        state: dict[str, Any] = {"messages": []}
        for n in range(1, TURNS + 1):
            state = await agent.ainvoke({"messages": [*state["messages"], HumanMessage(f"Question {n}")]})
        assert len(model.inputs) == 2 * TURNS
        for messages in model.inputs:
            assert pair_problems(messages) == []
            used, capacity = await tokens(engine, messages)
            assert used <= capacity
        # The budget binds: the agent's state would not fit; the model got pointers instead.
        whole, capacity = await tokens(engine, state["messages"])
        assert whole > capacity
        assert sum(str(m.content).startswith(POINTER) for m in model.inputs[-1]) > TURNS


def test_the_synchronous_path_fits_the_same_way() -> None:
    engine = ce.Engine.open_sync("memory://", model=SMALL, instructions=PROMPT)
    try:
        model = Scripted(messages=script())
        agent = create_agent(
            model, [lookup], system_prompt=PROMPT, middleware=[ContextMiddleware(engine.engine)]
        )
        state: dict[str, Any] = {"messages": []}
        for n in range(1, 13):
            state = agent.invoke({"messages": [*state["messages"], HumanMessage(f"Question {n}")]})
        assert all(pair_problems(m) == [] for m in model.inputs)
        assert any(str(m.content).startswith(POINTER) for m in model.inputs[-1])
    finally:
        engine.close()
