"""Deterministic synthetic sessions for demos, benchmarks and tests.

The shape SPEC section 11 names: repeating (user message, tool call, tool
result, assistant message) with ~200-500 bytes of text per item.
"""

from __future__ import annotations

import random

from ..model import AssistantMessage, ConversationItem, ToolCall, ToolResult, UserMessage

_WORDS = (
    "context budget prefix cache tool result history window token plan epoch "
    "summary worker session request provider model compaction envelope trust "
    "chronology estimate reserve margin cut pair durable replay"
).split()


def _text(rng: random.Random, low: int, high: int) -> str:
    target = rng.randint(low, high)
    words: list[str] = []
    size = 0
    while size < target:
        word = rng.choice(_WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[:target]


def synthetic_session(
    n_items: int, *, seed: int = 0, first_seq: int = 1, tag: str = "s"
) -> list[ConversationItem]:
    """``n_items`` items cycling user, tool call, tool result, assistant; ``seq`` from ``first_seq``.

    ``tag`` makes the texts (and so the payload hashes) differ between sessions.
    A session cut short in the middle of a tool pair ends with its result so
    pairs stay whole.
    """
    rng = random.Random(f"{tag}:{seed}")
    items: list[ConversationItem] = []
    turn = 0
    while len(items) < n_items:
        seq = first_seq + len(items)
        phase = len(items) % 4
        if phase == 0:
            items.append(UserMessage(f"[{tag} turn {turn}] " + _text(rng, 200, 400), seq=seq))
        elif phase == 1:
            call_id = f"{tag}-call-{turn}"
            items.append(ToolCall(call_id, "search", {"query": _text(rng, 40, 120), "limit": 5}, seq=seq))
        elif phase == 2:
            items.append(ToolResult(f"{tag}-call-{turn}", _text(rng, 300, 500), seq=seq))
        else:
            items.append(AssistantMessage(_text(rng, 200, 450), seq=seq))
            turn += 1
    if items and isinstance(items[-1], ToolCall):
        items.pop()
    return items


def chat_payload(n_bytes: int, *, seed: int = 0) -> dict[str, object]:
    """A provider-style chat payload of roughly ``n_bytes`` canonical bytes."""
    rng = random.Random(seed)
    messages: list[dict[str, object]] = []
    size = 0
    while size < n_bytes:
        role = ("user", "assistant", "tool")[len(messages) % 3]
        text = _text(rng, 200, 500)
        messages.append({"role": role, "content": text, "name": f"m{len(messages)}", "weight": 0.5})
        size += len(text) + 60
    return {"model": "synthetic:chat", "temperature": 0.2, "messages": messages}


__all__ = ["chat_payload", "synthetic_session"]
