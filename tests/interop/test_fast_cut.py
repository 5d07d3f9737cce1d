"""The cut over OpenAI chat dicts: the Rust path (no items built) equals the reference
definition (convert, ``select_history``, move to a message boundary) on every history."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxengine as ce
from ctxengine.errors import ContextError, OrphanedToolPair
from ctxengine.interop import _backend as backends
from ctxengine.interop import openai_chat
from ctxengine.reference import message_cut

from . import histories

relaxed = settings(suppress_health_check=[HealthCheck.too_slow], deadline=None, max_examples=200)


def cut_on(name: str, messages: list[dict[str, Any]], *args: Any, **kwargs: Any) -> int | str:
    previous = backends.active_name()
    ce.use_backend(name)
    try:
        return openai_chat.select_history(messages, *args, ce.TokenEstimator(), "openai:gpt-x", **kwargs)
    except ContextError as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        ce.use_backend(previous)


@relaxed
@given(histories.openai_chat(), st.integers(-1, 6), st.integers(0, 400), st.data())
def test_rust_equals_reference(
    messages: list[dict[str, Any]], floor: int, budget: int, data: st.DataObject
) -> None:
    kwargs: dict[str, Any] = {"first_seq": data.draw(st.none() | st.integers(0, 3))}
    if data.draw(st.booleans()):
        for k, m in enumerate(messages):
            m["event"] = 2 * k
        kwargs = {"seq_field": "event"}
    rust = cut_on("rust", messages, floor, budget, **kwargs)
    assert rust == cut_on("python", messages, floor, budget, **kwargs)
    if isinstance(rust, int):
        # The fast path took it (no hand-back to the reference): otherwise this compares nothing.
        from ctxengine import _core

        fast = _core.openai_chat_cut(
            messages, floor, budget, backends.module("rust").TokenEstimator(), "openai:gpt-x",
            kwargs.get("seq_field"), kwargs.get("first_seq"), "external_untrusted",
        )  # fmt: skip
        assert fast == rust
        # The definition: the items' cut, moved later to a message start.
        items = openai_chat.to_items(messages, **kwargs)
        item_cut = ce.select_history(items, floor, budget, ce.TokenEstimator(), "openai:gpt-x")
        kept = openai_chat.to_items(messages[rust:], **kwargs) if rust < len(messages) else []
        assert len(kept) <= len(items) - item_cut
        ce.validate_tool_pairs(kept)


@relaxed
@given(histories.openai_chat().filter(bool), st.data())
def test_broken_histories_fail_alike(messages: list[dict[str, Any]], data: st.DataObject) -> None:
    bad = copy.deepcopy(messages)
    i = data.draw(st.integers(0, len(bad) - 1))
    mutation = data.draw(
        st.sampled_from(["drop_result", "bad_role", "extra", "bad_args", "nullable", "bad_part"])
    )
    if mutation == "drop_result" and any(m["role"] == "tool" for m in bad):
        del bad[next(k for k, m in enumerate(bad) if m["role"] == "tool")]
    elif mutation == "bad_role":
        bad[i]["role"] = "critic"
    elif mutation == "extra":
        bad[i]["refusal"] = "no"
    elif mutation == "bad_args" and "tool_calls" in bad[i]:
        bad[i]["tool_calls"][0]["function"]["arguments"] = data.draw(
            st.sampled_from(['{"a":NaN}', '{"a":1e999}', "{", '{"a":"\\ud800"}', '{"a":9007199254740993}'])
        )
    elif mutation == "nullable":
        bad[i]["name"] = None
    elif mutation == "bad_part":
        bad[i]["content"] = [{"type": "image_url", "image_url": {"url": "x"}}]
    assert cut_on("rust", bad, 0, 100) == cut_on("python", bad, 0, 100)


def test_orphans_name_the_message() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a", "tool_calls": [call]}]
    for name in backends.BACKENDS:
        ce.use_backend(name)
        with pytest.raises(OrphanedToolPair) as info:
            openai_chat.select_history(messages, 0, 100, ce.TokenEstimator(), "m", strict=True)
        assert info.value.index == 1
        # By default the unanswered last call is the open pair, kept (ADR 0019).
        assert openai_chat.select_history(messages, 0, 100, ce.TokenEstimator(), "m") == 0
    ce.use_backend("rust")


def test_message_cut_moves_past_the_split() -> None:
    # message 0 -> items 0 (text), 1 (call); message 1 -> item 2 (result); message 2 -> item 3
    assert message_cut.message_cut(1, [0, 0, 1, 2], {1: 2}) == 2
    assert message_cut.message_cut(0, [0, 0, 1, 2], {1: 2}) == 0
    assert message_cut.message_cut(4, [0, 0, 1, 2], {1: 2}) == 3


def test_the_estimator_takes_the_items_dict_form(backend: str) -> None:
    """A history kept as the items' ``to_dict()`` mappings measures exactly as the items do:
    the canonical bytes are the same."""
    estimator = ce.TokenEstimator()
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"b":1,"a":[2.5]}'}}
    items = openai_chat.to_items(
        [
            {"role": "user", "content": "hello", "name": "alice"},
            {"role": "assistant", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "ok"}]},
        ]
    )
    dicts = [item.to_dict() for item in items]
    assert estimator.raw_estimates(dicts, "m") == estimator.raw_estimates(items, "m")
    assert estimator.estimate(dicts, "m") == estimator.estimate(items, "m")
