"""LangChain v1 agents (``langchain.agents.create_agent``): a middleware that gives the model
the budgeted, pair-safe body (issue 41, ADR 0023).

``ContextMiddleware(engine)`` wraps every model call (``wrap_model_call`` and
``awrap_model_call``) and hands the model the agent's messages fitted to the window by the
engine's plan (``fit.fit_items``): tool results truncated to pointers oldest first, then the
history cut, which never splits an ``AIMessage``'s tool calls from their ``ToolMessage``s,
with a summary of what was cut appended to the system message. The current turn (from the
last ``HumanMessage``) is never cut. The agent's state keeps every message; only what the
model is sent changes. It stands in for ``SummarizationMiddleware`` and
``ContextEditingMiddleware``::

    agent = create_agent(model, tools, system_prompt=PROMPT, middleware=[ContextMiddleware(engine)])

Open the engine with the agent's instructions and tools, so that the prefix the budget leaves
room for is the one the model is sent. The synchronous path (``invoke``) plans the session on
a thread of its own; give it a memory or SQLite engine, or use ``ainvoke``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from ..interop import langchain as lc_interop
from ..model import ConversationItem
from ..plan import ContextPlan
from .fit import Fitted, fit_items

if TYPE_CHECKING:
    from ..engine import Engine


class ContextMiddleware(AgentMiddleware):
    """Every model call of a ``create_agent`` agent gets the engine's budgeted, pair-safe body."""

    def __init__(self, engine: Engine, *, session_id: str = "langchain") -> None:
        super().__init__()
        self.engine = engine
        #: The session the agent's plan is kept under (one plan serves every thread).
        self.session_id = session_id

    # -- the fit ------------------------------------------------------------------------

    async def plan(self) -> ContextPlan:
        return await self.engine.plan(self.session_id, self.engine.principal)

    def _plan_sync(self) -> ContextPlan:
        cached = self.engine.planner.cached(self.session_id)
        if cached is not None:
            return cached
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, self.plan()).result()

    def fitted(self, request: ModelRequest, plan: ContextPlan) -> ModelRequest:
        """``request`` with the messages the window holds (the request itself when all do)."""
        messages = list(request.messages)
        items: list[ConversationItem] = lc_interop.to_items(messages, first_seq=None)
        # Which message each item came from: a tool message is one result; any other reads
        # alone into the same items (a result needs its call's message to read).
        owner: list[int] = []
        for m, message in enumerate(messages):
            size = (
                1 if isinstance(message, ToolMessage) else len(lc_interop.to_items([message], first_seq=None))
            )
            owner += [m] * size
        humans = [i for i, item in enumerate(items) if isinstance(messages[owner[i]], HumanMessage)]
        fit = fit_items(self.engine, plan, self.engine.principal, items, humans[-1] if humans else 0)
        if fit.summary is None and not fit.pointers and len(fit.kept) == len(items):
            return request
        return request.override(
            messages=_messages(messages, owner, fit), system_message=_system(request, fit.summary)
        )

    # -- the hooks ----------------------------------------------------------------------

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        return handler(self.fitted(request, self._plan_sync()))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        return await handler(self.fitted(request, await self.plan()))


def _messages(messages: list[Any], owner: list[int], fit: Fitted) -> list[Any]:
    """The messages all of whose items ``fit`` keeps, pointers in place of truncated results;
    then, to stay pair-safe by message, no ``ToolMessage`` whose call's message went, and no
    ``AIMessage`` whose calls' results did."""
    count = [0] * len(messages)
    for i in range(len(owner)):
        count[owner[i]] += 1
    kept = [0] * len(messages)
    for i in fit.kept:
        kept[owner[i]] += 1
    pointers = {owner[i]: text for i, text in fit.pointers.items()}
    chosen = [m for m in range(len(messages)) if count[m] and kept[m] == count[m]]
    calls = {c["id"]: m for m in chosen if isinstance(messages[m], AIMessage) for c in messages[m].tool_calls}
    results = {messages[m].tool_call_id: m for m in chosen if isinstance(messages[m], ToolMessage)}
    dropped = {m for call, m in calls.items() if call not in results}
    dropped |= {m for call, m in results.items() if call not in calls or calls[call] in dropped}
    out = []
    for m in chosen:
        if m in dropped:
            continue
        message = messages[m]
        out.append(message.model_copy(update={"content": pointers[m]}) if m in pointers else message)
    return out


def _system(request: ModelRequest, summary: str | None) -> SystemMessage | None:
    if summary is None:
        return request.system_message
    head = request.system_message.text if request.system_message is not None else ""
    return SystemMessage(content=f"{head}\n\n{summary}" if head else summary)


__all__ = ["ContextMiddleware"]
