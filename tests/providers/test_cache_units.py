"""Provider bodies as prompt-cache units (ADR 0020): order, breakpoints, digests, counts."""

from __future__ import annotations

import json

from ctxengine.providers.cache_units import UnitCounter

CHAT = {
    "model": "m",
    "messages": [
        {"role": "system", "content": "You help."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "out"},
    ],
    "tools": [{"type": "function", "function": {"name": "search"}}],
}

ANTHROPIC = {
    "model": "m",
    "system": [
        {"type": "text", "text": "platform", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "agent"},
    ],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "more"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "s", "input": {}}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "x", "cache_control": {}}],
        },
    ],
    "tools": [{"name": "s", "description": "Search.", "input_schema": {}}],
}


def test_chat_units_are_the_tool_list_then_each_message() -> None:
    counted: list[str] = []

    def count(text: str) -> int:
        counted.append(text)
        return len(text)

    counter = UnitCounter(count)
    units = counter.openai_chat(CHAT)
    assert len(units.tokens) == 1 + len(CHAT["messages"]) and units.breakpoints == ()
    assert json.loads(counted[0]) == {"tools": CHAT["tools"]}
    assert units.total == sum(len(t) for t in counted)
    # A second request repeating the units counts nothing again and gives the same digests.
    again = counter.openai_chat(CHAT)
    assert again == units and len(counted) == len(units.tokens)


def test_anthropic_units_are_blocks_with_the_marked_ones_as_breakpoints() -> None:
    counter = UnitCounter(len)
    units = counter.anthropic(ANTHROPIC)
    # tool, 2 system blocks, 2 + 1 + 1 message blocks
    assert len(units.tokens) == 7 and units.breakpoints == (1, 6)
    # The marker is not part of the digest: moving it keeps the prefix.
    moved = json.loads(json.dumps(ANTHROPIC))
    del moved["system"][0]["cache_control"]
    moved["system"][1]["cache_control"] = {"type": "ephemeral"}
    other = counter.anthropic(moved)
    assert other.digests == units.digests and other.breakpoints == (2, 6)
    # Where a message starts is part of the prefix: the same blocks split differently differ.
    split = json.loads(json.dumps(ANTHROPIC))
    first = split["messages"][0]
    split["messages"][0:1] = [{"role": "user", "content": first["content"][:1]}]
    split["messages"].insert(1, {"role": "user", "content": first["content"][1:]})
    assert counter.anthropic(split).digests[4] != units.digests[4]


def test_the_default_counter_is_o200k_of_the_units_json(backend: str) -> None:
    from ctxengine import reference

    units = UnitCounter().openai_chat({"messages": [{"role": "user", "content": "hello world"}]})
    text = '{"content":"hello world","role":"user"}'
    assert units.tokens == (reference.count_tokens("o200k_base", text),)
    assert units.tokens[0] == 10
