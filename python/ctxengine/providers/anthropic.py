"""Anthropic Messages request bodies.

The prefix becomes ``system`` text blocks with ``cache_control`` at the
plan's breakpoints. Body system items (summary, working state, metadata)
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
            block["cache_control"] = {"type": "ephemeral"}
        system.append(block)
    messages: list[dict[str, Any]] = []
    for item, call_id in zip(request.body, wire_call_ids(request.body), strict=True):
        made = _block(item, call_id)
        if made is None:
            continue
        role, content = made
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
