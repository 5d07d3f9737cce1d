"""A scripted model that answers request bodies in each provider's own response shape.

``ScriptedModel.respond(body, wire)`` reads a request body (``openai_chat``,
``openai_responses``, ``anthropic_messages``) and returns what that provider's API would:
a ChatCompletion, a Response or a Message, as dicts (``sdk_object`` validates them into the
official SDK's types). Asked after the user spoke, it calls the request's tools (one, or two
in parallel, or none, decided by a hash of the user's text); given its tools' results, it
answers in text that quotes them. Everything is a function of the body, so two runs that send
the same requests get the same responses. Usage reports the body's size as input tokens and,
for about half the bodies (by their hash), half of them as cached.

``serve()`` puts the same model behind HTTP (``/v1/chat/completions``, ``/v1/responses``,
``/v1/messages``), calling the tools the user's text names, so the real ``openai`` and
``anthropic`` clients can be pointed at it with ``OPENAI_BASE_URL`` and ``ANTHROPIC_BASE_URL``:
the README's and the guide's loops run as written.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from loopback import JsonHandler, serving

ENVELOPE = re.compile(r"<untrusted [^>]*>(.*?)</untrusted:[0-9a-f]+>", re.DOTALL)


def _plain(text: str) -> str:
    """Text without its trust envelope."""
    found = ENVELOPE.search(text)
    return found.group(1) if found else text


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def _last_turn(body: dict[str, Any], wire: str) -> tuple[str, list[str]]:
    """The last user text of the body and the tool outputs after it (empty: the user spoke last)."""
    outputs: list[str] = []
    if wire == "openai_chat":
        for m in reversed(body["messages"]):
            if m["role"] == "tool":
                outputs.append(_plain(m["content"]))
            elif m["role"] == "user":
                return _plain(_text(m["content"])), outputs[::-1]
            elif m["role"] == "assistant" and not m.get("tool_calls"):
                break
    elif wire == "openai_responses":
        for item in reversed(body["input"]):
            kind = item.get("type")
            if kind == "function_call_output":
                outputs.append(_plain(_text(item["output"])))
            elif kind == "message" and item["role"] == "user":
                return _plain(_text(item["content"])), outputs[::-1]
            elif kind == "message" and item["role"] == "assistant":
                break
    else:
        for m in reversed(body["messages"]):
            blocks = (
                m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
            )
            results = [b for b in blocks if b.get("type") == "tool_result"]
            if m["role"] == "user" and results:
                outputs.extend(_plain(_text(b.get("content", ""))) for b in reversed(results))
                texts = [b for b in blocks if b.get("type") == "text"]
                if texts:
                    return _plain(_text(texts)), outputs[::-1]
            elif m["role"] == "user":
                return _plain(_text(blocks)), outputs[::-1]
            elif not any(b.get("type") == "tool_use" for b in blocks):
                break
    return "", outputs[::-1]


def _tools(body: dict[str, Any], wire: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for t in body.get("tools", []):
        if wire == "openai_chat":
            out.append((t["function"]["name"], t["function"].get("parameters") or {}))
        elif wire == "openai_responses":
            out.append((t["name"], t.get("parameters") or {}))
        else:
            out.append((t["name"], t.get("input_schema") or {}))
    return out


def arguments_for(schema: dict[str, Any], seed: str) -> dict[str, Any]:
    """Arguments for a tool: ``"Paris"`` for a ``city``, a word of the seed for other strings."""
    args: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        kind = prop.get("type") if isinstance(prop, dict) else None
        if kind == "string":
            args[name] = "Paris" if name == "city" else f"{name}-{seed[:6]}"
        elif kind == "integer":
            args[name] = int(seed[:2], 16)
    return args


class ScriptedModel:
    """Deterministic responses in each provider's shape (see the module docstring)."""

    def __init__(self, *, reasoning: bool = True, answer_bytes: int = 0, mentions: bool = False) -> None:
        self.reasoning = reasoning
        #: Call the tools whose names the user's text mentions (instead of the hash's choice).
        self.mentions = mentions
        #: Extra bytes of text in each final answer (to fill small windows).
        self.answer_bytes = answer_bytes
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def plan(self, body: dict[str, Any], wire: str) -> tuple[str, list[tuple[str, str, dict[str, Any]]], str]:
        """(text, calls as (id, name, arguments), digest) of the answer to ``body``."""
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        user, outputs = _last_turn(body, wire)
        tools = _tools(body, wire)
        if self.mentions:
            tools = [t for t in tools if t[0].lower() in user.lower()]
        want = int(hashlib.sha256(user.encode()).hexdigest()[:2], 16) % 3 if tools else 0
        if self.mentions:
            want = len(tools)
        if outputs or want == 0:
            said = "; ".join(outputs) if outputs else f"you said {user[:60]!r}"
            filler = (" " + digest) * (self.answer_bytes // 65) if self.answer_bytes else ""
            return f"Done: {said}.{filler}", [], digest
        prefix = "toolu_" if wire == "anthropic_messages" else "call_"
        calls = [
            (f"{prefix}{digest[:12]}_{j}", name, arguments_for(schema, digest[8 * j :]))
            for j, (name, schema) in enumerate(tools[:want])
        ]
        return "", calls, digest

    def respond(self, body: dict[str, Any], wire: str) -> dict[str, Any]:
        self.requests.append((wire, body))
        text, calls, digest = self.plan(body, wire)
        size = len(json.dumps(body)) // 4
        cached = size // 2 if digest[0] in "01234567" else 0
        if wire == "openai_chat":
            message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
            if calls:
                message["tool_calls"] = [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                    for i, n, a in calls
                ]
            return {
                "id": f"chatcmpl-{digest[:10]}",
                "object": "chat.completion",
                "created": 1_750_000_000,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls" if calls else "stop",
                        "logprobs": None,
                        "message": message,
                    }
                ],
                "usage": {
                    "prompt_tokens": size,
                    "completion_tokens": 20,
                    "total_tokens": size + 20,
                    "prompt_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
                },
            }
        if wire == "openai_responses":
            output: list[dict[str, Any]] = []
            if self.reasoning:
                summary = [{"type": "summary_text", "text": f"Thinking about {digest[:6]}."}]
                output.append({"type": "reasoning", "id": f"rs_{digest[:10]}", "summary": summary})
            for i, n, a in calls:
                output.append(
                    {
                        "type": "function_call",
                        "id": f"fc_{i}",
                        "call_id": i,
                        "name": n,
                        "arguments": json.dumps(a),
                        "status": "completed",
                    }
                )
            if text:
                output.append(
                    {
                        "type": "message",
                        "id": f"msg_{digest[:10]}",
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": text, "annotations": []}],
                    }
                )
            return {
                "id": f"resp_{digest[:10]}",
                "object": "response",
                "created_at": 1_750_000_000,
                "model": body["model"],
                "status": "completed",
                "output": output,
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
                "usage": {
                    "input_tokens": size,
                    "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
                    "output_tokens": 20,
                    "output_tokens_details": {"reasoning_tokens": 5},
                    "total_tokens": size + 20,
                },
            }
        content: list[dict[str, Any]] = []
        if self.reasoning:
            content.append(
                {"type": "thinking", "thinking": f"Thinking about {digest[:6]}.", "signature": digest[:16]}
            )
        if text:
            content.append({"type": "text", "text": text})
        content.extend({"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls)
        written = size // 4 if cached == 0 else 0
        return {
            "id": f"msg_{digest[:10]}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": size - cached - written,
                "output_tokens": 20,
                "cache_read_input_tokens": cached,
                "cache_creation_input_tokens": written,
            },
        }


def sdk_object(response: dict[str, Any], wire: str) -> Any:
    """``response`` as the official SDK's object (what its client returns)."""
    if wire == "openai_chat":
        from openai.types.chat import ChatCompletion

        return ChatCompletion.model_validate(response)
    if wire == "openai_responses":
        from openai.types.responses import Response

        return Response.model_validate(response)
    from anthropic.types import Message

    return Message.model_validate(response)


_PATHS = {
    "/v1/chat/completions": "openai_chat",
    "/v1/responses": "openai_responses",
    "/v1/messages": "anthropic_messages",
}


@contextmanager
def serve(model: ScriptedModel | None = None) -> Iterator[dict[str, str]]:
    """Run ``model`` behind HTTP on a free loopback port; yields the environment that points
    the ``openai`` and ``anthropic`` clients at it."""
    scripted = model if model is not None else ScriptedModel(reasoning=False, mentions=True)

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            wire = _PATHS.get(self.path.split("?")[0])
            body = self.read_json()
            if wire is None:
                self.send_response(404)
                self.end_headers()
                return
            self.send_json(200, scripted.respond(body, wire))

    with serving(Handler) as base:
        yield {
            "OPENAI_BASE_URL": f"{base}/v1",
            "OPENAI_API_KEY": "test-key",
            "ANTHROPIC_BASE_URL": base,
            "ANTHROPIC_API_KEY": "test-key",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
