"""Anthropic Messages request bodies.

The prefix becomes ``system`` text blocks with ``cache_control`` at the
plan's breakpoints. A request of builder version 3 names body breakpoints too
(``metadata["body_cache_breakpoints"]``, ADR 0027): the block each item renders
to (or the last one before it, for an item with no Anthropic form) gets
``cache_control``, at most four breakpoints a request, the prefix's included
(the latest body ones win). Body system items (summary, working state, metadata)
have no role of their own in Messages, so they ride as text blocks in the
user turn they fall in. Consecutive same-role turns are merged, tool results
lead their user turn, and the first message is from the user.
"""

from __future__ import annotations

from typing import Any

from ..assembly.request import ModelRequest, RenderedItem
from .pairs import wire_call_ids

# Used only when a cut history would otherwise open with the assistant.
OPENING_USER_TEXT = "[earlier conversation omitted]"
#: Anthropic's limit of ``cache_control`` breakpoints in one request.
MAX_BREAKPOINTS = 4
_EPHEMERAL = {"type": "ephemeral"}


def _block(item: RenderedItem, call_id: str | None) -> tuple[str, dict[str, Any]] | None:
    if item.reasoning is not None:
        if item.provider != "anthropic":
            return None
        return "assistant", dict(item.reasoning)
    if item.is_tool_call:
        return "assistant", {
            "type": "tool_use",
            "id": call_id,
            "name": item.name,
            "input": dict(item.arguments or {}),
        }
    if item.is_tool_result:
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": call_id,
            "content": item.text or "",
        }
        if item.is_error:
            block["is_error"] = True
        return "user", block
    role = "assistant" if item.role == "assistant" else "user"
    return role, {"type": "text", "text": item.text or ""}


def to_anthropic_messages(request: ModelRequest, *, model: str) -> dict[str, Any]:
    system: list[dict[str, Any]] = []
    for i, item in enumerate(request.prefix):
        block: dict[str, Any] = {"type": "text", "text": item.text or ""}
        if i in request.cache_breakpoints:
            block["cache_control"] = dict(_EPHEMERAL)
        system.append(block)
    marks = sum(1 for b in system if "cache_control" in b)
    wanted = request.metadata.get("body_cache_breakpoints") or ()
    # The latest body breakpoints first: the end of the stable part matters most.
    marked = set(sorted(wanted)[::-1][: max(0, MAX_BREAKPOINTS - marks)])
    messages: list[dict[str, Any]] = []
    last: dict[str, Any] | None = None
    for index, (item, call_id) in enumerate(zip(request.body, wire_call_ids(request.body), strict=True)):
        made = _block(item, call_id)
        if made is None:
            if index in marked and last is not None:
                last["cache_control"] = dict(_EPHEMERAL)
            continue
        role, content = made
        last = content
        if index in marked:
            content["cache_control"] = dict(_EPHEMERAL)
        if messages and messages[-1]["role"] == role:
            blocks: list[dict[str, Any]] = messages[-1]["content"]
            if content["type"] == "tool_result":
                # Tool results must lead their user turn, in call order.
                at = sum(1 for b in blocks if b["type"] == "tool_result")
                blocks.insert(at, content)
            else:
                blocks.append(content)
        else:
            messages.append({"role": role, "content": [content]})
    if not messages or messages[0]["role"] != "user":
        messages.insert(0, {"role": "user", "content": [{"type": "text", "text": OPENING_USER_TEXT}]})
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_output_tokens,
        "system": system,
        "messages": messages,
    }
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
    return body


__all__ = ["to_anthropic_messages"]
