"""The baselines a replay and ``ctxengine bench --cache`` compare with, on the same request
points (issues 39 and 42): the transcript so far as plain chat messages (no envelopes)
behind the same tools, with the agent's instructions as the system message; sent whole
(``full_history``), or trimmed by LangChain ``trim_messages`` when ``langchain-core`` is
installed (``max_tokens`` = ctxengine's history budget — in a replay the first
configuration's —, ``strategy="last"``, ``start_on="human"``, each message counted as its
unit)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..model import AssistantMessage, ConversationItem, ToolCall, ToolResult, ToolSpec, UserMessage
from ..providers.cache_units import UnitCounter
from .fast import Request
from .sources import ReplaySession, request_points

FULL_HISTORY = "full_history"
TRIM_MESSAGES = "trim_messages"


@dataclass(slots=True)
class Transcript:
    """The conversation so far as plain chat messages, each with its unit, and as LangChain
    messages for the baseline (built once per message)."""

    counter: UnitCounter
    messages: list[dict[str, Any]] = field(default_factory=list)
    units: list[tuple[int, bytes]] = field(default_factory=list)
    langchain: list[Any] = field(default_factory=list)
    by_id: dict[int, int] = field(default_factory=dict)
    user_index: int | None = None

    def add(self, items: Sequence[ConversationItem]) -> None:
        for item in items:
            message = bare_message(item)
            if message is None:
                continue
            self.messages.append(message)
            self.units.append(self.counter.unit(message))
            if isinstance(item, UserMessage):
                self.user_index = len(self.messages) - 1

    def langchain_messages(self) -> list[Any]:
        from langchain_core.messages import convert_to_messages

        for i in range(len(self.langchain), len(self.messages)):
            (converted,) = convert_to_messages([self.messages[i]])
            self.langchain.append(converted)
            self.by_id[id(converted)] = i
        return self.langchain


def bare_message(item: ConversationItem) -> dict[str, Any] | None:
    """An item as a plain OpenAI chat message (no envelope)."""
    if isinstance(item, UserMessage):
        return {"role": "user", "content": str(item.content)}
    if isinstance(item, AssistantMessage):
        return {"role": "assistant", "content": str(item.content)}
    if isinstance(item, ToolCall):
        arguments = json.dumps(item.arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        call = {
            "id": item.call_id,
            "type": "function",
            "function": {"name": item.name, "arguments": arguments},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    if isinstance(item, ToolResult):
        return {"role": "tool", "tool_call_id": item.call_id, "content": str(item.content)}
    return None


def trimmed(t: Transcript, max_tokens: int) -> list[int]:
    """The baseline's window of the transcript so far: the indices of the messages
    ``trim_messages(max_tokens=..., strategy="last", start_on="human")`` keeps, each counted
    as its unit (needs ``langchain-core``; the replay's baseline too)."""
    from langchain_core.messages import trim_messages

    def count(batch: Sequence[Any]) -> int:
        return sum(t.units[t.by_id[id(m)]][0] for m in batch)

    kept: list[Any] = trim_messages(
        t.langchain_messages(),
        max_tokens=max_tokens,
        token_counter=count,
        strategy="last",
        start_on="human",
    )
    return [t.by_id[id(m)] for m in kept]


def chat_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as ``to_openai_chat`` renders its ``tools``."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
        }
        for t in tools
    ]


def langchain_installed() -> bool:
    try:
        import langchain_core.messages  # noqa: F401
    except ImportError:
        return False
    return True


def baseline_requests(
    name: str,
    session: ReplaySession,
    instructions: str,
    tools: Sequence[ToolSpec],
    max_tokens: int,
    counter: UnitCounter,
) -> list[Request]:
    """``name``'s request at every request point of ``session``: the prefix (tools and the
    system message) and the messages sent, as units (Anthropic: one breakpoint on the last
    unit, its automatic caching)."""
    t = Transcript(counter)
    head = [counter.unit({"role": "system", "content": instructions})]
    if tools:
        head.insert(0, counter.unit({"tools": chat_tools(tools)}))
    prefix = sum(n for n, _ in head)
    items = session.items
    out: list[Request] = []
    done = 0
    users = 0
    run = -1
    step = 0
    for point in request_points(items):
        for item in items[done:point]:
            if isinstance(item, UserMessage):
                users += 1
        t.add(items[done:point])
        done = point
        if users - 1 != run:
            run, step = users - 1, 0
        kept = trimmed(t, max_tokens) if name == TRIM_MESSAGES else list(range(len(t.units)))
        units = [*head, *(t.units[i] for i in kept)]
        tokens = tuple(n for n, _ in units)
        history = sum(tokens) - prefix
        r = Request(
            len(out),
            point,
            run,
            step,
            prefix,
            0,
            history,
            0,
            0,
            0,
            True,
            "fits",
            len(kept),
            len(t.units) - len(kept),
            sum(n for n, _ in t.units) - history,
            0,
            0,
            0,
            0,
            0,
            (tokens, tuple(d for _, d in units), (len(units) - 1,)),
        )
        out.append(r)
        step += 1
    return out


__all__ = [
    "FULL_HISTORY",
    "TRIM_MESSAGES",
    "Transcript",
    "bare_message",
    "baseline_requests",
    "chat_tools",
    "langchain_installed",
    "trimmed",
]
