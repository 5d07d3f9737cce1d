"""A lone surrogate in a message the native count reads (a tool call's arguments, a content
block's text or type) counts as LangChain counts it, under both backends (issue 38: the native
count reads through the interop value seam; it raised UnicodeEncodeError before)."""

from __future__ import annotations

from typing import Any

import pytest

from ctxengine.integrations.langchain import trim_messages

lc = pytest.importorskip("langchain_core.messages")
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.messages import trim_messages as lc_trim  # noqa: E402
from langchain_core.messages.utils import count_tokens_approximately  # noqa: E402

LONE = "\ud800"


def histories() -> list[list[Any]]:
    call = {"name": "f", "args": {"a": LONE, LONE: [1, (2,)]}, "id": "c1", "type": "tool_call"}
    return [
        [AIMessage("x" * 40, tool_calls=[call]), ToolMessage("y" * 40, tool_call_id="c1"), HumanMessage("z")],
        [HumanMessage([{"type": "text", "text": LONE * 30}]), HumanMessage("w" * 30)],
        [HumanMessage([{"type": LONE, "text": "t"}]), HumanMessage("w" * 30)],
    ]


@pytest.mark.parametrize("index", range(3))
def test_a_lone_surrogate_counts_as_langchain_counts(backend: str, index: int) -> None:
    history = histories()[index]
    for max_tokens in range(0, 80, 7):
        opts: dict[str, Any] = {"max_tokens": max_tokens, "token_counter": count_tokens_approximately}
        theirs = lc_trim(history, **opts)
        calls = {c["id"] for m in theirs if isinstance(m, AIMessage) for c in m.tool_calls}
        if any(isinstance(m, ToolMessage) and m.tool_call_id not in calls for m in theirs):
            continue  # LangChain keeps an orphan here; the pair-safe trim does not (tested elsewhere)
        assert [id(m) for m in trim_messages(history, **opts)] == [id(m) for m in theirs]
