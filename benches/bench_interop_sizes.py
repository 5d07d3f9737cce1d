"""Issue 37: sizes a hostile history can reach in one message, linear on both paths.

- 1.8 MB of tool-call arguments (one JSON object of 42,500 keys, each twice, so the
  duplicate-key rule is exercised too) through ``openai_chat.select_history``; target on the
  Rust backend: under 50 ms (it was 22 s: every key was looked up with a linear scan).
- An AI turn of 128k blocks (thinking and text blocks alternating) through
  ``langchain.from_items``; target: under 1 s (it was 26 s: the content list was rebuilt per
  block).

Targets are reported, never asserted on time.
"""

from __future__ import annotations

from typing import Any

import pytest

import ctxengine as ce
from ctxengine.interop import _backend as backends
from ctxengine.interop import openai_chat
from ctxengine.model import AssistantMessage, ReasoningItem, TextPart, UserMessage

ARGUMENT_KEYS = 42_500
TURN_BLOCKS = 128 * 1024


def big_arguments() -> str:
    """A JSON object of ``ARGUMENT_KEYS`` keys written twice (the second value wins): ~1.8 MB."""
    first = ",".join(f'"key_{k:06d}":"{k:08d}"' for k in range(ARGUMENT_KEYS))
    second = ",".join(f'"key_{k:06d}":{k}' for k in range(ARGUMENT_KEYS))
    return "{" + first + "," + second + "}"


def call_messages(arguments: str) -> list[dict[str, Any]]:
    call = {"id": "c1", "type": "function", "function": {"name": "bulk_write", "arguments": arguments}}
    return [
        {"role": "user", "content": "write it all"},
        {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
        {"role": "assistant", "content": "written"},
    ]


@pytest.mark.parametrize("name", backends.BACKENDS)
def bench_tool_arguments_cut_1_8mb(benchmark: Any, name: str) -> None:
    arguments = big_arguments()
    assert 1_800_000 < len(arguments) < 1_900_000
    messages = call_messages(arguments)
    previous = backends.active_name()
    backends.use(name)
    try:
        estimator = ce.TokenEstimator()

        def cut() -> int:
            return openai_chat.select_history(messages, None, 50_000, estimator, "openai:gpt-x")

        index = benchmark.pedantic(cut, rounds=10 if name == "rust" else 2)
    finally:
        backends.use(previous)
    assert index == 3  # the call is far over budget: only the last message is kept


def long_turn() -> list[Any]:
    """A user message, then one AI turn of ``TURN_BLOCKS`` blocks: thinking and text alternating."""
    items: list[Any] = [UserMessage("think hard")]
    for k in range(TURN_BLOCKS // 2):
        items.append(ReasoningItem("anthropic", {"type": "thinking", "thinking": f"step {k}"}))
        items.append(AssistantMessage((TextPart(f"note {k}"),)))
    return items


def bench_langchain_from_items_128k_blocks(benchmark: Any) -> None:
    pytest.importorskip("langchain_core")
    from ctxengine.interop import langchain

    items = long_turn()
    messages = benchmark.pedantic(langchain.from_items, args=(items,), rounds=3)
    assert len(messages) == 2
    assert len(messages[1].content) == TURN_BLOCKS
