"""Hypothesis strategies: valid request histories in each foreign format, spelled the way
``from_items`` writes them (so a round trip must give back exactly the input)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

MAX_SAFE = 2**53 - 1
text = st.text(max_size=12)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-MAX_SAFE, MAX_SAFE),
    st.floats(allow_nan=False, allow_infinity=False),
    text,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(text, inner, max_size=3)),
    max_leaves=8,
)
arguments = st.dictionaries(text, json_values, max_size=4)


def dump(args: dict[str, Any]) -> str:
    return json.dumps(args, ensure_ascii=False, separators=(",", ":"))


class Ids:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return f"call_{self.n}"


def parts(kind: str, extra: dict[str, Any] | None = None) -> st.SearchStrategy[list[dict[str, Any]]]:
    return st.lists(
        st.builds(lambda t: {"type": kind, "text": t, **(extra or {})}, text), min_size=1, max_size=3
    )


def content(kind: str, extra: dict[str, Any] | None = None) -> st.SearchStrategy[Any]:
    return st.one_of(text, parts(kind, extra))


@st.composite
def openai_chat(draw: st.DrawFn) -> list[dict[str, Any]]:
    ids = Ids()
    out: list[dict[str, Any]] = []
    for turn in draw(
        st.lists(st.sampled_from(["system", "developer", "user", "assistant", "calls"]), max_size=8)
    ):
        if turn in ("system", "developer"):
            out.append({"role": turn, "content": draw(content("text"))})
        elif turn == "user":
            m = {"role": "user", "content": draw(content("text"))}
            if draw(st.booleans()):
                m["name"] = draw(text)
            out.append(m)
        elif turn == "assistant":
            out.append({"role": "assistant", "content": draw(content("text"))})
        else:
            calls = [
                {
                    "id": ids(),
                    "type": "function",
                    "function": {"name": draw(text), "arguments": dump(draw(arguments))},
                }
                for _ in range(draw(st.integers(1, 3)))
            ]
            m = {"role": "assistant", "tool_calls": calls}
            # A call-only message right after an assistant text would merge with it on the way back.
            if (out and out[-1]["role"] == "assistant") or draw(st.booleans()):
                m["content"] = draw(content("text"))
            out.append(m)
            for c in calls:
                out.append({"role": "tool", "tool_call_id": c["id"], "content": draw(content("text"))})
    return out


@st.composite
def openai_responses(draw: st.DrawFn) -> list[dict[str, Any]]:
    ids = Ids()
    out: list[dict[str, Any]] = []
    for turn in draw(
        st.lists(
            st.sampled_from(["system", "developer", "user", "assistant", "call", "reasoning"]), max_size=8
        )
    ):
        if turn in ("system", "developer", "user"):
            out.append({"type": "message", "role": turn, "content": draw(content("input_text"))})
        elif turn == "assistant":
            out.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": draw(content("output_text", {"annotations": []})),
                }
            )
        elif turn == "reasoning":
            summary = [{"type": "summary_text", "text": draw(text)}]
            out.append({"type": "reasoning", "id": f"rs_{ids()}", "summary": summary})
        else:
            call_id = ids()
            out.append(
                {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": draw(text),
                    "arguments": dump(draw(arguments)),
                }
            )
            out.append(
                {"type": "function_call_output", "call_id": call_id, "output": draw(content("input_text"))}
            )
    return out


@st.composite
def anthropic(draw: st.DrawFn) -> dict[str, Any]:
    ids = Ids()
    messages: list[dict[str, Any]] = []
    pending: list[str] = []
    for k in range(draw(st.integers(0, 8))):
        if k % 2 == 0:  # user turn: the results of the previous tool uses first
            blocks: list[dict[str, Any]] = []
            for call_id in pending:
                block = {"type": "tool_result", "tool_use_id": call_id, "content": draw(content("text"))}
                if draw(st.booleans()):
                    block["is_error"] = True
                blocks.append(block)
            pending = []
            if blocks:
                blocks += draw(st.lists(st.builds(lambda t: {"type": "text", "text": t}, text), max_size=2))
                messages.append({"role": "user", "content": blocks})
            else:
                messages.append({"role": "user", "content": draw(content("text"))})
        else:
            if draw(st.booleans()):
                messages.append({"role": "assistant", "content": draw(text)})
                continue
            blocks = []
            if draw(st.booleans()):
                blocks.append({"type": "thinking", "thinking": draw(text), "signature": draw(text)})
            if draw(st.booleans()):
                blocks.append({"type": "redacted_thinking", "data": draw(text)})
            blocks += draw(st.lists(st.builds(lambda t: {"type": "text", "text": t}, text), max_size=2))
            for _ in range(draw(st.integers(0 if blocks else 1, 2))):
                call_id = ids()
                pending.append(call_id)
                blocks.append(
                    {"type": "tool_use", "id": call_id, "name": draw(text), "input": draw(arguments)}
                )
            messages.append({"role": "assistant", "content": blocks})
    if pending:
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": c, "content": ""} for c in pending],
            }
        )
    out: dict[str, Any] = {"messages": messages}
    if draw(st.booleans()):
        out["system"] = draw(content("text"))
    return out


@st.composite
def langchain(draw: st.DrawFn) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    ids = Ids()
    out: list[Any] = []
    previous_ai = False
    for turn in draw(st.lists(st.sampled_from(["system", "developer", "human", "ai", "calls"]), max_size=8)):
        if turn in ("system", "developer"):
            kwargs = {"__openai_role__": "developer"} if turn == "developer" else {}
            out.append(SystemMessage(content=draw(content("text")), additional_kwargs=kwargs))
        elif turn == "human":
            out.append(HumanMessage(content=draw(content("text")), name=draw(st.none() | text)))
        elif turn == "ai" and not previous_ai:
            body: Any = draw(st.one_of(text, parts("text")))
            if isinstance(body, list) and draw(st.booleans()):
                body = [{"type": "thinking", "thinking": draw(text), "signature": "sig"}, *body]
            out.append(AIMessage(content=body))
        elif turn == "calls" and not previous_ai:
            calls = [
                {"name": draw(text), "args": draw(arguments), "id": ids(), "type": "tool_call"}
                for _ in range(draw(st.integers(1, 3)))
            ]
            out.append(AIMessage(content=draw(st.one_of(text, parts("text"))), tool_calls=calls))
            for c in calls:
                status = draw(st.sampled_from(["success", "error"]))
                out.append(
                    ToolMessage(
                        content=draw(content("text")), tool_call_id=c["id"], name=c["name"], status=status
                    )
                )
        previous_ai = bool(out) and type(out[-1]).__name__ == "AIMessage"
    return out


def lc_dump(messages: list[Any]) -> list[dict[str, Any]]:
    """A LangChain history as data, less the metadata conversion drops by design."""
    drop = {"id", "response_metadata", "usage_metadata"}
    return [
        {"class": type(m).__name__, **{k: v for k, v in m.model_dump().items() if k not in drop}}
        for m in messages
    ]
