"""Acceptance 2: ``trim_messages`` against the installed ``langchain-core``.

Random message lists x option combinations: ours equals LangChain's wherever LangChain's
output keeps every tool pair; where it orphans one, ours orphans none and lies inside
LangChain's (a suffix for "last", a prefix for "first")."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxengine.integrations.langchain import trim_messages

lc = pytest.importorskip("langchain_core.messages")
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage  # noqa: E402
from langchain_core.messages import trim_messages as lc_trim  # noqa: E402
from langchain_core.messages.utils import count_tokens_approximately  # noqa: E402

relaxed = settings(
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    deadline=None,
    max_examples=150,
)
words = st.text(alphabet="abc \n", max_size=30)
# Tool-call arguments: the counter measures repr(tool_calls), so quotes, escapes, unicode,
# numbers and nesting all matter.
arg_text = st.text(alphabet=st.sampled_from(list("ab '\"\\\t\n\x00\x7fé€😀")), max_size=12)
arg_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), arg_text),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(arg_text, inner, max_size=3)),
    max_leaves=6,
)


@st.composite
def histories(draw: st.DrawFn) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    if draw(st.booleans()):
        out.append(SystemMessage(draw(words)))
    n = 0
    for turn in draw(
        st.lists(st.sampled_from(["human", "ai", "calls", "calls", "stray", "reuse"]), max_size=14)
    ):
        if turn == "human":
            out.append(HumanMessage(draw(words), name=draw(st.none() | st.just("bob"))))
        elif turn == "ai":
            content = draw(st.one_of(words, st.builds(lambda t: [{"type": "text", "text": t}], words)))
            out.append(AIMessage(content))
        elif turn == "calls":
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                n += 1
                calls.append(
                    {"name": "search", "args": {"q": draw(words)}, "id": f"c{n}", "type": "tool_call"}
                )
            out.append(AIMessage(draw(words), tool_calls=calls))
            answered = calls if draw(st.integers(0, 9)) else calls[:-1]  # now and then one is never answered
            for c in answered:
                out.append(ToolMessage(draw(words), tool_call_id=c["id"], name="search"))
        elif turn == "stray":  # a result whose call is not in the history at all
            n += 1
            out.append(ToolMessage(draw(words), tool_call_id=f"ghost{n}"))
        else:  # a call id reused once its pair is complete (ADR 0019)
            reused = {"name": "search", "args": {"q": draw(words)}, "id": "c1", "type": "tool_call"}
            out += [AIMessage("", tool_calls=[reused]), ToolMessage(draw(words), tool_call_id="c1")]
    return out


def per_message_len(message: BaseMessage) -> int:
    return len(str(message.content)) // 3 + 1


# LangChain tells a per-message counter by its first parameter's annotation being the class
# itself (this module's annotations are strings).
per_message_len.__annotations__["message"] = BaseMessage


def list_counter(messages: list[BaseMessage]) -> int:
    return sum(2 + len(str(m.content)) for m in messages)


COUNTERS = [count_tokens_approximately, "approximate", len, per_message_len, list_counter]
types = st.sampled_from([None, "human", "ai", "tool", ["human", "system"], HumanMessage, [AIMessage, "tool"]])


@st.composite
def options(draw: st.DrawFn) -> dict[str, Any]:
    strategy = draw(st.sampled_from(["first", "last"]))
    opts: dict[str, Any] = {
        "max_tokens": draw(st.integers(0, 400)),
        "token_counter": draw(st.sampled_from(COUNTERS)),
        "strategy": strategy,
        "end_on": draw(types),
    }
    if strategy == "last":
        opts["start_on"] = draw(types)
        opts["include_system"] = draw(st.booleans())
    return opts


def orphan_free(kept: list[BaseMessage], history: list[BaseMessage]) -> bool:
    """Independent oracle of ADR 0019's rule: ``kept`` pairs by position (a result answers
    the nearest earlier open call with its id, and no id is reused while open), and a call
    it leaves open is one of the history's open pair: in its last message with tool calls,
    never answered, only tool results after that message."""
    open_calls: dict[str, BaseMessage] = {}
    for m in kept:
        if isinstance(m, AIMessage):
            for c in m.tool_calls:
                if c["id"] in open_calls:
                    return False
                open_calls[c["id"]] = m
        elif isinstance(m, ToolMessage) and open_calls.pop(m.tool_call_id, None) is None:
            return False
    if not open_calls:
        return True
    last = max(k for k, m in enumerate(history) if isinstance(m, AIMessage) and m.tool_calls)
    after = history[last + 1 :]
    return (
        all(m is history[last] for m in open_calls.values())
        and all(isinstance(m, ToolMessage) for m in after)
        and not any(m.tool_call_id in open_calls for m in after if isinstance(m, ToolMessage))
    )


def same(a: list[BaseMessage], b: list[BaseMessage]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


@relaxed
@given(histories(), options())
def test_equals_langchain_or_is_the_pair_safe_part(
    backend: str, messages: list[BaseMessage], opts: dict[str, Any]
) -> None:
    theirs = lc_trim(messages, **opts)
    ours = trim_messages(messages, **opts)
    if orphan_free(theirs, messages):
        assert same(ours, theirs)
        return
    assert orphan_free(ours, messages)
    head = 1 if opts.get("include_system") and theirs and isinstance(theirs[0], SystemMessage) else 0
    assert same(ours[:head], theirs[:head])
    body, their_body = ours[head:], theirs[head:]
    if opts["strategy"] == "last":
        assert same(body, their_body[len(their_body) - len(body) :])
    else:
        assert same(body, their_body[: len(body)])


@relaxed
@given(histories(), options())
def test_warm_calls_match_cold_ones(backend: str, messages: list[BaseMessage], opts: dict[str, Any]) -> None:
    """The memo changes time, never a result: trim, append, trim again (an agent loop)."""
    first = trim_messages(messages, **opts)
    assert same(trim_messages(messages, **opts), first)
    messages.append(HumanMessage("one more"))
    assert same(trim_messages(messages, **opts), lc_trim(messages, **opts)) or not orphan_free(
        lc_trim(messages, **opts), messages
    )
    messages[0] = messages[0].model_copy(update={"content": "changed"})
    again = trim_messages(messages, **opts)
    theirs = lc_trim(messages, **opts)
    assert same(again, theirs) or not orphan_free(theirs, messages)


def test_runnable_without_messages(backend: str) -> None:
    trimmer = trim_messages(max_tokens=30, token_counter=count_tokens_approximately, strategy="last")
    history = [HumanMessage("hello there " * 5), AIMessage("hi"), HumanMessage("how are you")]
    assert same(
        trimmer.invoke(history), lc_trim(history, max_tokens=30, token_counter=count_tokens_approximately)
    )


def test_option_errors_match_langchain(backend: str) -> None:
    for bad in ({"start_on": "human"}, {"include_system": True}):
        with pytest.raises(ValueError) as ours:
            trim_messages([HumanMessage("x")], max_tokens=5, token_counter=len, strategy="first", **bad)
        with pytest.raises(ValueError) as theirs:
            lc_trim([HumanMessage("x")], max_tokens=5, token_counter=len, strategy="first", **bad)
        assert str(ours.value) == str(theirs.value)


def test_orphans_langchain_keeps_are_dropped(backend: str) -> None:
    history = [
        HumanMessage("find it"),
        AIMessage("", tool_calls=[{"name": "search", "args": {}, "id": "c1", "type": "tool_call"}]),
        ToolMessage("found", tool_call_id="c1"),
        HumanMessage("thanks"),
        AIMessage("welcome"),
    ]
    # The last three messages fit: LangChain keeps a result whose call it cut.
    opts: dict[str, Any] = {"max_tokens": 3, "token_counter": len}
    assert not orphan_free(lc_trim(history, **opts), history)
    assert same(trim_messages(history, **opts), history[3:])
    # end_on="ai" cuts the result off a call: the longest prefix ending on "ai" without it is empty.
    first: dict[str, Any] = {"max_tokens": 100, "token_counter": len, "strategy": "first", "end_on": "ai"}
    assert not orphan_free(lc_trim(history[:3], **first), history[:3])
    assert trim_messages(history[:3], **first) == []


def test_counts_equal_count_tokens_approximately() -> None:
    from ctxengine.reference.interop import LangChainClasses, approximate_count

    classes = LangChainClasses(lc)
    samples = [
        SystemMessage("rules", additional_kwargs={"__openai_role__": "developer"}),
        HumanMessage(
            [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "x"}}, "raw"]
        ),
        AIMessage(
            "calling", tool_calls=[{"name": "f", "args": {"a": [1, "é"]}, "id": "c", "type": "tool_call"}]
        ),
        AIMessage([{"type": "text", "text": "t"}, {"type": "tool_use", "id": "c", "name": "f", "input": {}}]),
        ToolMessage("out", tool_call_id="c", name="f"),
        lc.ChatMessage("hi", role="critic"),
        lc.FunctionMessage("r", name="f"),
    ]
    for m in samples:
        assert approximate_count(m, classes) == count_tokens_approximately([m])
    assert sum(approximate_count(m, classes) for m in samples) == count_tokens_approximately(samples)


def test_reassigned_fields_are_recounted(backend: str) -> None:
    history = [HumanMessage("short"), AIMessage("short"), HumanMessage("short")]
    opts: dict[str, Any] = {"max_tokens": 20, "token_counter": count_tokens_approximately}
    assert same(trim_messages(history, **opts), lc_trim(history, **opts))
    history[1].content = "long " * 40  # the same object, a new content value
    assert same(trim_messages(history, **opts), lc_trim(history, **opts))
    history[2].name = "a-rather-long-participant-name" * 3
    assert same(trim_messages(history, **opts), lc_trim(history, **opts))


@given(st.lists(histories(), min_size=1, max_size=4), st.integers(1, 6))
@relaxed
def test_a_small_memo_changes_nothing(batches: list[list[BaseMessage]], capacity: int) -> None:
    """Generations flip many times with a tiny capacity; counts and windows stay LangChain's."""
    from ctxengine import _core
    from ctxengine.reference import interop as reference

    classes = reference.LangChainClasses(lc)
    counters = {
        "rust": _core.LangChainCounter(classes, capacity),
        "python": reference.LangChainCounter(classes, capacity),
    }
    for messages in batches * 2:
        windows = {
            "rust": _core.langchain_trim(counters["rust"], messages, 60, "last", False, True, None, None),
            "python": reference.trim(counters["python"], messages, 60, "last", False, True, None, None),
        }
        assert windows["rust"] == windows["python"]
        assert len(counters["rust"]) <= max(capacity, 2) + len(messages)
