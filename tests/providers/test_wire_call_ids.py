"""Issue 39 (ADR 0019): a request whose history reuses a call id (each pair complete before
the next) renders with ids unique within the request on every wire: the later pairs are
renamed ``<id>~<n>``, deterministically, and the wire checks refuse duplicate ids."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxengine.assembly.request import ModelRequest, RenderedItem
from ctxengine.errors import OrphanedToolPair
from ctxengine.providers import (
    check_wire_pairs,
    to_anthropic_messages,
    to_openai_chat,
    to_openai_responses,
    wire_call_ids,
)

RENDERERS = {
    "openai_chat": to_openai_chat,
    "openai_responses": to_openai_responses,
    "anthropic_messages": to_anthropic_messages,
}


def user(text: str) -> RenderedItem:
    return RenderedItem("history", "user", text=text)


def call(call_id: str) -> RenderedItem:
    return RenderedItem("history", "assistant", call_id=call_id, name="f", arguments={})


def result(call_id: str) -> RenderedItem:
    return RenderedItem("history", "tool", text="out", call_id=call_id)


def request(body: list[RenderedItem]) -> ModelRequest:
    return ModelRequest((RenderedItem("prefix", "system", text="sys"),), tuple(body), (), 100, (), {})


def wire_ids(body: dict[str, Any], wire: str) -> list[str]:
    if wire == "openai_chat":
        out = []
        for m in body["messages"]:
            out += [c["id"] for c in m.get("tool_calls") or []]
            if m["role"] == "tool":
                out.append(m["tool_call_id"])
        return out
    if wire == "openai_responses":
        return [i["call_id"] for i in body["input"] if "call_id" in i]
    return [
        b.get("id") or b["tool_use_id"]
        for m in body["messages"]
        for b in m["content"]
        if b["type"] in ("tool_use", "tool_result")
    ]


def test_later_pairs_with_a_reused_id_are_renamed() -> None:
    body = [user("q"), call("a"), result("a"), call("a"), result("a"), call("a~2"), result("a~2")]
    body += [call("a"), result("a")]
    # "a~2" is an id of the request already: the renamed "a" pairs take the next free names.
    assert wire_call_ids(body) == [None, "a", "a", "a~3", "a~3", "a~2", "a~2", "a~4", "a~4"]
    for wire, render in RENDERERS.items():
        rendered = render(request(body), model="m")
        check_wire_pairs(rendered, wire)
        calls = wire_ids(rendered, wire)
        assert calls == ["a", "a", "a~3", "a~3", "a~2", "a~2", "a~4", "a~4"]
        assert rendered == render(request(body), model="m")  # the same bytes every time


def test_the_wire_checks_refuse_a_reused_id() -> None:
    body = [user("q"), call("a"), result("a"), user("again"), call("a"), result("a")]
    raw = {
        "openai_chat": {
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "tool_calls": [{"id": "a"}]},
                {"role": "tool", "tool_call_id": "a"},
                {"role": "assistant", "tool_calls": [{"id": "a"}]},
                {"role": "tool", "tool_call_id": "a"},
            ]
        },
        "openai_responses": {
            "input": [
                {"type": "function_call", "call_id": "a"},
                {"type": "function_call_output", "call_id": "a"},
                {"type": "function_call", "call_id": "a"},
                {"type": "function_call_output", "call_id": "a"},
            ]
        },
        "anthropic_messages": {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "q"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "a"}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "a"}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]},
            ]
        },
    }
    for wire, body_dict in raw.items():
        with pytest.raises(OrphanedToolPair, match="reused"):
            check_wire_pairs(body_dict, wire)
        check_wire_pairs(RENDERERS[wire](request(body), model="m"), wire)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "a~2", "c"]), max_size=12), st.data())
def test_any_history_that_reuses_ids_renders_unique_ids(ids: list[str], data: st.DataObject) -> None:
    body = [user("q")]
    for call_id in ids:
        body += [call(call_id), result(call_id)]
        if data.draw(st.booleans()):
            body.append(user("more"))
    names = wire_call_ids(body)
    calls = [n for n, item in zip(names, body, strict=True) if item.is_tool_call]
    assert len(set(calls)) == len(calls)
    # The first pair with each id keeps it; each renamed id starts with its logged id.
    first = {}
    for n, item in zip(names, body, strict=True):
        if item.is_tool_call:
            assert n is not None and n.startswith(item.call_id)
            first.setdefault(item.call_id, n)
    assert all(first[i] == i for i in first)
    for wire, render in RENDERERS.items():
        check_wire_pairs(render(request(body), model="m"), wire)
