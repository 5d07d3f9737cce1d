"""Acceptance 1: random valid histories in each format round trip exactly; invalid ones raise
``ConversionError`` naming the index."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxengine as ce
from ctxengine.errors import ConversionError
from ctxengine.interop import anthropic, langchain, openai_chat, openai_responses

from . import histories

# Generation is slow on a shared 2-core machine; the properties, not the clock, are under test.
relaxed = settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)


@relaxed
@given(histories.openai_chat())
def test_openai_chat_round_trip(messages: list[dict[str, Any]]) -> None:
    items = openai_chat.to_items(messages)
    assert openai_chat.from_items(items) == messages
    ce.validate_tool_pairs(items)


@relaxed
@given(histories.openai_responses())
def test_openai_responses_round_trip(input_items: list[dict[str, Any]]) -> None:
    items = openai_responses.to_items(input_items)
    assert openai_responses.from_items(items) == input_items


@relaxed
@given(histories.anthropic())
def test_anthropic_round_trip(body: dict[str, Any]) -> None:
    items = anthropic.to_items(body["messages"], system=body.get("system"))
    assert anthropic.from_items(items) == body
    ce.validate_tool_pairs(items)


@relaxed
@given(histories.langchain())
def test_langchain_round_trip(messages: list[Any]) -> None:
    items = langchain.to_items(messages)
    assert histories.lc_dump(langchain.from_items(items)) == histories.lc_dump(messages)


@relaxed
@given(histories.openai_chat(), st.data())
def test_items_round_trip_through_their_dicts(messages: list[dict[str, Any]], data: st.DataObject) -> None:
    """Converted items are ordinary items: their dict form decodes to equal items."""
    items = openai_chat.to_items(messages, first_seq=data.draw(st.integers(0, 100)))
    assert [ce.item_from_dict(i.to_dict()) for i in items] == items
    seqs = [i.seq for i in items]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


# -- invalid histories name the index ----------------------------------------------------


@relaxed
@given(histories.openai_chat().filter(bool), st.data())
def test_openai_chat_unknown_field_names_index(messages: list[dict[str, Any]], data: st.DataObject) -> None:
    i = data.draw(st.integers(0, len(messages) - 1))
    bad = copy.deepcopy(messages)
    bad[i]["audio_note"] = "x"
    with pytest.raises(ConversionError) as info:
        openai_chat.to_items(bad)
    assert (info.value.index, info.value.field) == (i, "audio_note")


@relaxed
@given(histories.openai_chat().filter(lambda m: any("tool_calls" in x for x in m)), st.data())
def test_openai_chat_bad_arguments_name_index(messages: list[dict[str, Any]], data: st.DataObject) -> None:
    at = [k for k, m in enumerate(messages) if "tool_calls" in m]
    i = data.draw(st.sampled_from(at))
    bad = copy.deepcopy(messages)
    bad[i]["tool_calls"][0]["function"]["arguments"] = data.draw(st.sampled_from(["{", "[]", "1", "nul"]))
    with pytest.raises(ConversionError) as info:
        openai_chat.to_items(bad)
    assert (info.value.index, info.value.field) == (i, "tool_calls[0].function.arguments")


@relaxed
@given(histories.openai_responses().filter(bool), st.data())
def test_openai_responses_unknown_item_names_index(items: list[dict[str, Any]], data: st.DataObject) -> None:
    i = data.draw(st.integers(0, len(items)))
    bad = [*items[:i], {"type": "web_search_call", "id": "ws_1", "status": "completed"}, *items[i:]]
    with pytest.raises(ConversionError) as info:
        openai_responses.to_items(bad)
    assert (info.value.index, info.value.field) == (i, "type")


@relaxed
@given(histories.anthropic().filter(lambda b: bool(b["messages"])), st.data())
def test_anthropic_image_block_names_index(body: dict[str, Any], data: st.DataObject) -> None:
    users = [k for k, m in enumerate(body["messages"]) if m["role"] == "user"]
    i = data.draw(st.sampled_from(users))
    bad = copy.deepcopy(body["messages"])
    content = bad[i]["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    image = {"type": "image", "source": {"type": "url", "url": "https://example.invalid/a.png"}}
    bad[i]["content"] = [*blocks, image]
    with pytest.raises(ConversionError) as info:
        anthropic.to_items(bad)
    assert (info.value.index, info.value.field) == (i, f"content[{len(blocks)}].type")


@relaxed
@given(histories.langchain().filter(lambda m: any(type(x).__name__ == "AIMessage" for x in m)), st.data())
def test_langchain_invalid_tool_call_names_index(messages: list[Any], data: st.DataObject) -> None:
    ais = [k for k, m in enumerate(messages) if type(m).__name__ == "AIMessage"]
    i = data.draw(st.sampled_from(ais))
    bad = list(messages)
    bad[i] = messages[i].model_copy(
        update={"invalid_tool_calls": [{"name": "x", "args": "{", "id": "z", "error": "bad"}]}
    )
    with pytest.raises(ConversionError) as info:
        langchain.to_items(bad)
    assert (info.value.index, info.value.field) == (i, "invalid_tool_calls")


# -- edge cases ----------------------------------------------------------------------------


def test_merging_turns_are_an_error_not_a_reshape() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "assistant", "content": "thinking aloud"},
        {"role": "assistant", "tool_calls": [call]},
    ]
    with pytest.raises(ConversionError) as info:
        openai_chat.to_items(messages)
    assert info.value.index == 1
    use = {"type": "tool_use", "id": "t", "name": "f", "input": {}}
    turns = [
        {"role": "assistant", "content": [{"type": "text", "text": "a"}, use]},
        {"role": "assistant", "content": [{"type": "text", "text": "b"}]},
    ]
    with pytest.raises(ConversionError) as info:
        anthropic.to_items(turns)
    assert info.value.index == 1


def test_trust_defaults_and_overrides() -> None:
    messages = [
        {"role": "system", "content": "s"},
        {"role": "developer", "content": "d"},
        {"role": "user", "content": "u"},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c", "content": "page text"},
    ]
    items = openai_chat.to_items(messages)
    trusts = [getattr(i, "trust", None) for i in items]
    T = ce.TrustLevel
    assert trusts == [T.PLATFORM, T.TRUSTED_CONFIGURATION, T.USER, None, T.EXTERNAL_UNTRUSTED]
    assert openai_chat.to_items(messages, tool_trust="internal_tool")[-1].trust is T.INTERNAL_TOOL  # type: ignore[union-attr]
    assert openai_chat.to_items(messages, trust={4: T.KNOWLEDGE})[-1].trust is T.KNOWLEDGE  # type: ignore[union-attr]
    chosen = openai_chat.to_items(messages, trust=lambda i, m: T.MEMORY if m["role"] == "user" else None)
    assert chosen[2].trust is T.MEMORY  # type: ignore[union-attr]
    with pytest.raises(ConversionError) as info:
        openai_chat.to_items(messages, trust={2: "boss"})
    assert (info.value.index, info.value.field) == (2, "trust")


def test_sequence_numbers_from_a_named_field() -> None:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "u", "event": 10},
        {"role": "assistant", "content": "a", "tool_calls": [call], "event": 11},
        {"role": "tool", "tool_call_id": "c", "content": "r", "event": 14},
    ]
    items = openai_chat.to_items(messages, seq_field="event")
    assert [i.seq for i in items] == [10, 11, None, 14]
    assert openai_chat.from_items(items, seq_field="event") == messages
    assert [i.seq for i in openai_chat.to_items([{"role": "user", "content": "x"}] * 2, first_seq=None)] == [
        None,
        None,
    ]
    with pytest.raises(ConversionError) as info:
        openai_chat.to_items([*messages, {"role": "user", "content": "no event"}], seq_field="event")
    assert (info.value.index, info.value.field) == (3, "event")


def test_items_that_a_format_cannot_hold_raise() -> None:
    with pytest.raises(ConversionError) as info:
        openai_chat.from_items(
            [ce.UserMessage("u"), ce.ToolCall("c", "f", {}), ce.ToolResult("c", "boom", is_error=True)]
        )
    assert (info.value.index, info.value.field) == (2, "is_error")
    with pytest.raises(ConversionError) as info:
        anthropic.from_items([ce.UserMessage("u"), ce.SystemMessage("late")])
    assert info.value.index == 1
    with pytest.raises(ConversionError):
        openai_responses.from_items([ce.ReasoningItem("anthropic", {"type": "thinking"})])
    with pytest.raises(ConversionError):
        openai_chat.from_items([ce.UserMessage((ce.FileRef("a1", "image/png"),))])
