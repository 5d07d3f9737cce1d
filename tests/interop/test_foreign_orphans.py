"""Issue 39 (ADR 0019): one rule for orphans in foreign histories, shared by the two cut
APIs (``openai_chat.select_history`` and the ``trim_messages`` drop-in), on both backends.
Pairs pair by position; a result without an open call, a call never answered and a call
superseded while open are orphans and the cut falls after the last one; the calls of the
last assistant message with calls, followed only by tool results, are the open pair and
stay. ``strict=True`` raises instead."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxengine as ce
from ctxengine.errors import OrphanedToolPair
from ctxengine.interop import openai_chat

MODEL = "m:a"
relaxed = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def user(text: str = "q") -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(*ids: str, text: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant"}
    if text is not None:
        message["content"] = text
    if ids:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
        ]
    return message


def tool(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "out"}


def chat_cut(messages: list[dict[str, Any]], **kw: Any) -> int:
    return openai_chat.select_history(messages, 0, 10**9, ce.TokenEstimator(), MODEL, **kw)


def langchain(messages: list[dict[str, Any]]) -> list[Any]:
    lc = pytest.importorskip("langchain_core.messages")
    out: list[Any] = []
    for m in messages:
        if m["role"] == "user":
            out.append(lc.HumanMessage(m["content"]))
        elif m["role"] == "tool":
            out.append(lc.ToolMessage(m["content"], tool_call_id=m["tool_call_id"]))
        else:
            calls = [
                {"name": "f", "args": {}, "id": c["id"], "type": "tool_call"} for c in m.get("tool_calls", [])
            ]
            out.append(lc.AIMessage(m.get("content") or "", tool_calls=calls))
    return out


def trim_start(messages: list[dict[str, Any]], strategy: str = "last") -> int:
    """Where the drop-in's result starts in ``messages`` (with a budget that keeps all)."""
    from ctxengine.integrations.langchain import trim_messages

    history = langchain(messages)
    kept = trim_messages(history, max_tokens=10**9, token_counter=len, strategy=strategy)
    if strategy == "first":
        return len(kept)
    assert all(a is b for a, b in zip(kept, history[len(history) - len(kept) :], strict=True))
    return len(history) - len(kept)


CASES = [
    # a result whose call is not in the history: the cut falls after it
    ([user(), assistant("a"), tool("a"), tool("ghost"), user(), assistant(text="ok")], 4),
    # a call never answered, followed by a user message
    ([user(), assistant("a"), user(), assistant("b"), tool("b")], 2),
    # one of two parallel calls answered, then the user speaks: the message is an orphan
    ([user(), assistant("a", "b"), tool("b"), user("next")], 3),
    # the open pair: the last calls, only results after them
    ([user(), assistant("a"), tool("a"), assistant("b", "c"), tool("c")], 0),
    ([user(), assistant("a")], 0),
    # an id reused once its pair is complete
    ([user(), assistant("a"), tool("a"), assistant("a"), tool("a"), assistant("a"), tool("a")], 0),
    # reused while open: the earlier call is superseded
    ([user(), assistant("a"), user(), assistant("a"), tool("a"), user()], 2),
    # a second result for one call
    ([user(), assistant("a"), tool("a"), tool("a"), user()], 4),
]


@pytest.mark.parametrize(("messages", "cut"), CASES)
def test_both_cut_apis_drop_orphans_alike(backend: str, messages: list[dict[str, Any]], cut: int) -> None:
    assert chat_cut(messages) == cut
    assert trim_start(messages) == cut


def test_strict_raises_naming_the_message(backend: str) -> None:
    with pytest.raises(OrphanedToolPair) as caught:
        chat_cut(CASES[0][0], strict=True)
    assert (caught.value.call_id, caught.value.index) == ("ghost", 3)
    with pytest.raises(OrphanedToolPair):
        chat_cut([user(), assistant("a")], strict=True)  # the open pair too
    assert chat_cut(CASES[5][0], strict=True) == 0  # reuse after completion is no orphan


@st.composite
def foreign(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Chat histories with ids from a small pool: reuse, orphans and open calls occur."""
    out: list[dict[str, Any]] = [user()]
    for _ in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["user", "text", "calls", "result", "pair"]))
        if kind == "user":
            out.append(user())
        elif kind == "text":
            out.append(assistant(text="t"))
        elif kind == "calls":
            if out[-1]["role"] == "assistant":  # two assistant messages in a row would merge
                out.append(user())
            ids = draw(st.lists(st.sampled_from("abc"), min_size=1, max_size=2, unique=True))
            out.append(assistant(*ids, text=draw(st.none() | st.just("t"))))
        elif kind == "result":
            out.append(tool(draw(st.sampled_from("abcz"))))
        else:
            if out[-1]["role"] == "assistant":
                out.append(user())
            call_id = draw(st.sampled_from("abc"))
            out += [assistant(call_id), tool(call_id)]
    return out


def valid(messages: list[dict[str, Any]]) -> bool:
    """The rule stated directly: no orphan (positional pairing), the open pair allowed."""
    open_calls: dict[str, int] = {}
    for i, m in enumerate(messages):
        for c in m.get("tool_calls", []):
            if c["id"] in open_calls:
                return False
            open_calls[c["id"]] = i
        if m["role"] == "tool" and open_calls.pop(m["tool_call_id"], None) is None:
            return False
    if not open_calls:
        return True
    last = max(i for i, m in enumerate(messages) if m.get("tool_calls"))
    return all(i == last for i in open_calls.values()) and all(
        m["role"] == "tool" for m in messages[last + 1 :]
    )


@relaxed
@given(foreign())
def test_the_two_apis_agree_and_keep_the_longest_valid_suffix(
    backend: str, messages: list[dict[str, Any]]
) -> None:
    cut = chat_cut(messages)
    assert trim_start(messages) == cut
    # The suffix is valid; every longer one holds an orphan or splits a pair.
    assert valid(messages[cut:])
    for longer in range(cut):
        assert not valid(messages[longer:]), longer


@relaxed
@given(foreign())
def test_the_backends_agree(messages: list[dict[str, Any]]) -> None:
    got = {}
    for name in ("rust", "python"):
        ce.use_backend(name)
        try:
            got[name] = (chat_cut(messages), trim_start(messages), trim_start(messages, "first"))
        finally:
            ce.use_backend("rust")
    assert got["rust"] == got["python"]
