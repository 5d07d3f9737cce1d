"""Issue 38: a message's pairing is read by the core (call ids that are str or ``None``) or, off
those shapes (a call id that is not a str), by ``LangChainClasses.pairing``; either way both
backends keep the same window and account the same memo bytes."""

from __future__ import annotations

from typing import Any

import pytest

from ctxengine.reference import interop as reference

lc = pytest.importorskip("langchain_core.messages")
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage  # noqa: E402


def _trim(backend: str, counter: Any, messages: list[Any], max_tokens: int) -> Any:
    if backend == "rust":
        from ctxengine._core import langchain_trim

        return langchain_trim(counter, messages, max_tokens, "last", False, True, None, None)
    return reference.trim(counter, messages, max_tokens, "last", False, True, None, None)


def _counter(backend: str) -> Any:
    classes = reference.LangChainClasses(lc)
    if backend == "rust":
        from ctxengine._core import LangChainCounter

        return LangChainCounter(classes)
    return reference.LangChainCounter(classes)


def _history(answer_id: Any, call_id: Any) -> list[Any]:
    call = {"name": "f", "args": {}, "id": call_id, "type": "tool_call"}
    return [
        SystemMessage("s"),
        HumanMessage("question " * 20),
        AIMessage.model_construct(content="", tool_calls=[call], invalid_tool_calls=[], name=None),
        ToolMessage.model_construct(content="answer " * 20, tool_call_id=answer_id, name=None),
        HumanMessage("more"),
    ]


@pytest.mark.parametrize(
    ("answer_id", "call_id"),
    [("c1", "c1"), ("c1", "c2"), ("c1", None), ("c1", 7), ("7", 7.5)],
)
def test_odd_call_ids_pair_as_the_reference_pairs_them(backend: str, answer_id: Any, call_id: Any) -> None:
    messages = _history(answer_id, call_id)
    counter, twin = _counter(backend), _counter("python")
    for max_tokens in (10, 40, 60, 1_000):
        assert _trim(backend, counter, messages, max_tokens) == _trim("python", twin, messages, max_tokens)
    assert counter.nbytes == twin.nbytes
