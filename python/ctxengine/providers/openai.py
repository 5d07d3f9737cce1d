"""OpenAI Chat Completions and Responses request bodies."""

from __future__ import annotations

import json
from typing import Any

from ..assembly.request import ModelRequest, RenderedItem
from .pairs import wire_call_ids


def _arguments(item: RenderedItem) -> str:
    # Compact, key-sorted JSON: the same call renders to the same bytes.
    return json.dumps(item.arguments or {}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def to_openai_chat(
    request: ModelRequest, *, model: str, prompt_cache_key: str | None = None
) -> dict[str, Any]:
    """A ``POST /chat/completions`` body. Reasoning items have no Chat form and are left out.
    ``prompt_cache_key`` (e.g. the session id) routes a session's requests to the same cache
    (ADR 0027); without it the body has no such key."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": item.text or ""} for item in request.prefix
    ]
    for item, call_id in zip(request.body, wire_call_ids(request.body), strict=True):
        if item.reasoning is not None:
            continue
        if item.is_tool_call:
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": item.name, "arguments": _arguments(item)},
            }
            last = messages[-1] if messages else None
            # Parallel calls, or text then calls, are one assistant message (an
            # assistant message that is last has no answered calls yet).
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif item.is_tool_result:
            messages.append({"role": "tool", "tool_call_id": call_id, "content": item.text or ""})
        else:
            messages.append({"role": item.role, "content": item.text or ""})
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "max_completion_tokens": request.max_output_tokens,
    }
    if prompt_cache_key is not None:
        body["prompt_cache_key"] = prompt_cache_key
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
            }
            for t in request.tools
        ]
    return body


def to_openai_responses(
    request: ModelRequest, *, model: str, prompt_cache_key: str | None = None
) -> dict[str, Any]:
    """A ``POST /responses`` body; reasoning items replay verbatim (OpenAI-provider items only).
    ``prompt_cache_key`` as for ``to_openai_chat``."""
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "system", "content": item.text or ""} for item in request.prefix
    ]
    for item, call_id in zip(request.body, wire_call_ids(request.body), strict=True):
        if item.reasoning is not None:
            if item.provider == "openai":
                items.append(dict(item.reasoning))
            continue
        if item.is_tool_call:
            items.append(
                {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": item.name,
                    "arguments": _arguments(item),
                }
            )
        elif item.is_tool_result:
            items.append({"type": "function_call_output", "call_id": call_id, "output": item.text or ""})
        else:
            items.append({"type": "message", "role": item.role, "content": item.text or ""})
    body: dict[str, Any] = {"model": model, "input": items, "max_output_tokens": request.max_output_tokens}
    if prompt_cache_key is not None:
        body["prompt_cache_key"] = prompt_cache_key
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.input_schema,
                "strict": False,
            }
            for t in request.tools
        ]
    return body


__all__ = ["to_openai_chat", "to_openai_responses"]
