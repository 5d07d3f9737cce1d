"""Hostile input at the interop seam (issue 37, findings 1, 5 and 6).

- The Rust fast paths (``openai_chat.select_history``, ``mappings.select_history``, the
  ``trim_messages`` drop-in) check their arguments as the reference does: the same
  ``ArgumentError`` for the same bad value, ``summary_floor=None`` accepted, any number as
  ``max_tokens``, and tool arguments too deep for an item handed back, not cut.
- Converters validate what they accept: a value an item cannot hold as canonical JSON, or a
  ``role`` that is not a string, is a ``ConversionError`` naming the message and the field,
  at conversion, on both backends.
- Duplicate argument keys keep the last value on the fast path, as ``json.loads`` does.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxengine as ce
from ctxengine.errors import ArgumentError, ConversionError
from ctxengine.integrations.langchain import trim_messages
from ctxengine.interop import _backend as backends
from ctxengine.interop import anthropic, langchain, mappings, openai_chat, openai_responses
from ctxengine.reference import cut as reference_cut

from . import histories

lc = pytest.importorskip("langchain_core.messages")
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage  # noqa: E402
from langchain_core.messages import trim_messages as lc_trim  # noqa: E402
from langchain_core.messages.utils import count_tokens_approximately  # noqa: E402

relaxed = settings(
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    deadline=None,
    max_examples=120,
)
MODEL = "openai:gpt-x"


def outcome(call: Any) -> Any:
    """A call's result, or its exception as ``(type, message)``."""
    try:
        return call()
    except Exception as exc:
        return (type(exc).__name__, str(exc))


def on(name: str, call: Any) -> Any:
    previous = backends.active_name()
    ce.use_backend(name)
    try:
        return outcome(call)
    finally:
        ce.use_backend(previous)


def chat_history() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hello there", "name": "bob"},
        {
            "role": "assistant",
            "content": "looking",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"q":1}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "found"},
        {"role": "assistant", "content": "done"},
    ]


def item_dicts() -> list[dict[str, Any]]:
    return [item.to_dict() for item in openai_chat.to_items(chat_history())]


def chat_cut(messages: list[dict[str, Any]], *args: Any, **kwargs: Any) -> int:
    return openai_chat.select_history(messages, *args, **kwargs)


ENTRIES = {"openai_chat": (chat_cut, chat_history), "mappings": (mappings.select_history, item_dicts)}


# -- finding 5: one argument check for every entry point ----------------------------------------


BAD_CUT_ARGUMENTS = [
    ("summary_floor", 1.0),
    ("summary_floor", True),
    ("summary_floor", 2**63),
    ("summary_floor", -(2**63) - 1),
    ("summary_floor", "3"),
    ("history_tokens", 1.5),
    ("history_tokens", True),
    ("history_tokens", None),
    ("history_tokens", 2**63),
    ("history_tokens", -(2**64)),
    ("estimator", object()),
    ("model_id", "\ud800"),
    ("model_id", "a\udfffb"),
    ("model_id", 5),
    ("model_id", None),
]


def cut_arguments(**override: Any) -> dict[str, Any]:
    arguments = {
        "summary_floor": 0,
        "history_tokens": 100,
        "estimator": ce.TokenEstimator(),
        "model_id": MODEL,
    }
    arguments.update(override)
    return arguments


@pytest.mark.parametrize("entry", sorted(ENTRIES))
@pytest.mark.parametrize(("argument", "value"), BAD_CUT_ARGUMENTS)
def test_bad_cut_arguments_raise_the_reference_error(
    backend: str, entry: str, argument: str, value: Any
) -> None:
    cut, history = ENTRIES[entry]
    arguments = cut_arguments(**{argument: value})
    expected = outcome(
        lambda: reference_cut.select_history(openai_chat.to_items(chat_history()), **arguments)
    )
    assert expected[0] == "ArgumentError"
    with pytest.raises(ArgumentError) as caught:
        cut(history(), *arguments.values())
    assert (type(caught.value).__name__, str(caught.value)) == expected
    assert caught.value.argument == argument


@pytest.mark.parametrize("entry", sorted(ENTRIES))
@pytest.mark.parametrize("budget", [0, 5, 12, 30, 100])
def test_summary_floor_none_is_no_floor(backend: str, entry: str, budget: int) -> None:
    cut, history = ENTRIES[entry]
    items = openai_chat.to_items(chat_history())
    by_items = ce.select_history(items, None, budget, ce.TokenEstimator(), MODEL)
    got = cut(history(), None, budget, ce.TokenEstimator(), MODEL)
    assert got == cut(history(), -1, budget, ce.TokenEstimator(), MODEL)
    if entry == "mappings":
        assert got == by_items


def test_the_fast_paths_check_before_they_take_the_input() -> None:
    """The Rust functions themselves raise the typed error (they are not left to fall back)."""
    from ctxengine import _core

    estimator = backends.module("rust").TokenEstimator()
    for argument, value in BAD_CUT_ARGUMENTS:
        arguments = cut_arguments(**{argument: value})
        if argument == "estimator":
            continue  # another estimator is the reference's to run
        if argument != "estimator":
            arguments["estimator"] = estimator
        with pytest.raises(ArgumentError):
            _core.openai_chat_cut(chat_history(), *arguments.values(), None, 1, "external_untrusted")
        with pytest.raises(ArgumentError):
            _core.mappings_cut(item_dicts(), *arguments.values())
    floorless = cut_arguments(summary_floor=None, estimator=estimator)
    assert _core.openai_chat_cut(chat_history(), *floorless.values(), None, 1, "external_untrusted") >= 0
    assert _core.mappings_cut(item_dicts(), *floorless.values()) >= 0


hostile_numbers = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1]),
    st.floats(),
    st.text(max_size=3),
)
hostile_model_ids = st.one_of(st.just(MODEL), st.text(max_size=4), st.sampled_from(["\ud800", "x\udc00", 3]))


@relaxed
@given(
    histories.openai_chat(),
    hostile_numbers,
    hostile_numbers | st.integers(0, 300),
    hostile_model_ids,
    st.sampled_from(sorted(ENTRIES)),
)
def test_both_backends_check_alike(
    messages: list[dict[str, Any]], floor: Any, budget: Any, model_id: Any, entry: str
) -> None:
    if entry == "mappings":
        cut: Any = mappings.select_history
        history: Any = [item.to_dict() for item in openai_chat.to_items(messages)]
    else:
        cut, history = chat_cut, messages
    rust = on("rust", lambda: cut(history, floor, budget, ce.TokenEstimator(), model_id))
    assert rust == on("python", lambda: cut(history, floor, budget, ce.TokenEstimator(), model_id))
    if isinstance(rust, tuple):
        # An error is the one select_history raises over the items, named alike.
        items = openai_chat.to_items(messages)
        assert rust == outcome(
            lambda: reference_cut.select_history(items, floor, budget, ce.TokenEstimator(), model_id)
        )


def deep_arguments(levels: int) -> str:
    """A JSON object whose nesting takes ``levels`` containers, the object included."""
    return '{"a":' + "[" * (levels - 1) + "1" + "]" * (levels - 1) + "}"


def call_history(arguments: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]


def test_arguments_too_deep_for_an_item_are_handed_back() -> None:
    """An item nests at most 128 levels, its own object included: arguments of 128 levels
    (127 inside the object) cannot be one, and the fast path must not measure them."""
    from ctxengine import _core

    estimator = backends.module("rust").TokenEstimator()
    args = (0, 10**6, estimator, MODEL, None, 1, "external_untrusted")
    assert _core.openai_chat_cut(call_history(deep_arguments(127)), *args) == 0
    assert _core.openai_chat_cut(call_history(deep_arguments(128)), *args) == -2


@pytest.mark.parametrize("levels", [126, 127, 128, 129])
def test_deep_arguments_fail_as_the_items_do(backend: str, levels: int) -> None:
    messages = call_history(deep_arguments(levels))
    by_items = outcome(
        lambda: ce.select_history(openai_chat.to_items(messages), 0, 10**6, ce.TokenEstimator(), MODEL)
    )
    got = outcome(lambda: openai_chat.select_history(messages, 0, 10**6, ce.TokenEstimator(), MODEL))
    if levels <= 127:
        assert (got, by_items) == (0, 0)
    else:
        assert got == by_items
        assert got[0] == "ConversionError"
        assert got[1].startswith("openai_chat [1].tool_calls[0].function.arguments.a[0]")


# -- finding 5: trim_messages takes any number LangChain takes ----------------------------------

limits = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 0, 1, 10, 40]),
    st.floats(),
    st.booleans(),
)


@st.composite
def plain_histories(draw: st.DrawFn) -> list[Any]:
    out: list[Any] = []
    if draw(st.booleans()):
        out.append(SystemMessage(draw(st.text(max_size=20))))
    for human in draw(st.lists(st.booleans(), max_size=8)):
        words = draw(st.text(alphabet="ab c", max_size=40))
        out.append(HumanMessage(words) if human else AIMessage(words))
    return out


@relaxed
@given(
    plain_histories(),
    limits,
    st.sampled_from(["first", "last"]),
    st.booleans(),
    st.sampled_from([count_tokens_approximately, len]),
)
def test_trim_takes_any_number_langchain_takes(
    backend: str, messages: list[Any], limit: Any, strategy: str, include_system: bool, counter: Any
) -> None:
    options: dict[str, Any] = {"max_tokens": limit, "token_counter": counter, "strategy": strategy}
    if strategy == "last":
        options["include_system"] = include_system
    expected = lc_trim(messages, **options)
    got = trim_messages(messages, **options)
    assert [id(m) for m in got] == [id(m) for m in expected]


@pytest.mark.parametrize(
    "limit", [math.inf, -math.inf, math.nan, 2**63, 2**80, -(2**63) - 1, 7.9, -0.5, True]
)
def test_trim_limits_beyond_64_bits(backend: str, limit: Any) -> None:
    messages = [SystemMessage("rules"), HumanMessage("a " * 10), AIMessage("b " * 10), HumanMessage("c")]
    for strategy, include_system in (("last", True), ("last", False), ("first", False)):
        options = {"max_tokens": limit, "token_counter": count_tokens_approximately, "strategy": strategy}
        if include_system:
            options["include_system"] = True
        assert trim_messages(messages, **options) == lc_trim(messages, **options)


def test_trim_reads_include_system_for_its_truth(backend: str) -> None:
    messages = [SystemMessage("rules"), HumanMessage("a " * 10), AIMessage("b " * 10)]
    for flag in (1, "yes", [1], 0, ""):
        options = {"max_tokens": 12, "token_counter": count_tokens_approximately, "include_system": flag}
        assert trim_messages(messages, **options) == lc_trim(messages, **options)


@pytest.mark.parametrize("limit", ["3", None, [3], object()])
def test_trim_refuses_a_limit_that_is_not_a_number(backend: str, limit: Any) -> None:
    with pytest.raises(ArgumentError, match="trim_messages: max_tokens: expected a number"):
        trim_messages([HumanMessage("a")], max_tokens=limit, token_counter=len)


# -- finding 6: converters validate what they accept --------------------------------------------


@pytest.mark.parametrize("role", [["user"], {"role": "user"}, None, 3, b"user"])
def test_a_role_that_is_not_a_string_is_a_conversion_error(backend: str, role: Any) -> None:
    bad = {"role": role, "content": "x"}
    chat = [*chat_history()[:2], bad]
    responses = [{"type": "message", "role": "user", "content": "hi"}, {"type": "message", **bad}]
    calls = [
        (lambda: openai_chat.to_items(chat), 2, "openai_chat"),
        (lambda: openai_chat.select_history(chat, 0, 100, ce.TokenEstimator(), MODEL), 2, "openai_chat"),
        (lambda: openai_responses.to_items(responses), 1, "openai_responses"),
    ]
    for call, index, source in calls:
        with pytest.raises(ConversionError) as caught:
            call()
        assert (caught.value.source, caught.value.index, caught.value.field) == (source, index, "role")


def test_an_unhashable_block_type_is_a_conversion_error(backend: str) -> None:
    message = AIMessage(content=[{"type": "text", "text": "a"}, {"type": ["thinking"], "thinking": "x"}])
    with pytest.raises(ConversionError) as caught:
        langchain.to_items([HumanMessage("hi"), message])
    assert (caught.value.index, caught.value.field) == (1, "content[1].type")


def chat_call(arguments: str, call_id: str = "c1", name: str = "f") -> dict[str, Any]:
    return {
        "role": "assistant",
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        ],
    }


SURROGATE = "bad \ud800 text"
NAN_ARGUMENTS = ['{"a": NaN}', '{"a": -Infinity}', '{"a": [1, {"b": Infinity}]}']
# (case, to_items call, message index, field)
CHAT_CASES: list[tuple[str, list[dict[str, Any]], dict[str, Any], int, str]] = [
    (
        "content",
        [{"role": "user", "content": "ok"}, {"role": "user", "content": SURROGATE}],
        {},
        1,
        "content",
    ),
    (
        "text part",
        [
            {
                "role": "system",
                "content": [{"type": "text", "text": "ok"}, {"type": "text", "text": SURROGATE}],
            }
        ],
        {},
        0,
        "content[1].text",
    ),
    ("name", [{"role": "user", "content": "ok", "name": SURROGATE}], {}, 0, "name"),
    (
        "tool_call_id",
        [chat_call("{}"), {"role": "tool", "tool_call_id": "c1\udc00", "content": "ok"}],
        {},
        1,
        "tool_call_id",
    ),
    ("call id", [chat_call("{}", call_id="c\ud800")], {}, 0, "tool_calls[0].id"),
    ("function name", [chat_call("{}", name="f\ud800")], {}, 0, "tool_calls[0].function.name"),
    ("NaN", [chat_call(NAN_ARGUMENTS[0])], {}, 0, "tool_calls[0].function.arguments.a"),
    ("-Infinity", [chat_call(NAN_ARGUMENTS[1])], {}, 0, "tool_calls[0].function.arguments.a"),
    ("nested Infinity", [chat_call(NAN_ARGUMENTS[2])], {}, 0, "tool_calls[0].function.arguments.a[1].b"),
    ("surrogate key", [chat_call('{"\\ud800": 1}')], {}, 0, "tool_calls[0].function.arguments"),
    ("surrogate value", [chat_call('{"k": "\\udc00"}')], {}, 0, "tool_calls[0].function.arguments.k"),
    ("big int", [chat_call('{"k": 9007199254740993}')], {}, 0, "tool_calls[0].function.arguments.k"),
    (
        "seq field",
        [{"role": "user", "content": "a", "n": 1}, {"role": "user", "content": "b", "n": 2**53}],
        {"seq_field": "n"},
        1,
        "n",
    ),
    ("negative seq field", [{"role": "user", "content": "a", "n": -(2**60)}], {"seq_field": "n"}, 0, "n"),
    ("first_seq", [{"role": "user", "content": "a"}], {"first_seq": 2**53}, 0, "first_seq"),
    (
        "numbering",
        [
            {"role": "user", "content": "a"},
            {"role": "user", "content": "b"},
            {"role": "user", "content": "c"},
        ],
        {"first_seq": 2**53 - 2},
        2,
        "first_seq",
    ),
]


@pytest.mark.parametrize(
    ("case", "messages", "options", "index", "field"), CHAT_CASES, ids=[c[0] for c in CHAT_CASES]
)
def test_chat_values_an_item_cannot_hold_fail_at_conversion(
    backend: str, case: str, messages: list[dict[str, Any]], options: dict[str, Any], index: int, field: str
) -> None:
    with pytest.raises(ConversionError) as caught:
        openai_chat.to_items(messages, **options)
    assert (caught.value.source, caught.value.index, caught.value.field) == ("openai_chat", index, field)
    # The cut fails the same way on both backends, with the same message.
    cut = outcome(
        lambda: openai_chat.select_history(messages, 0, 10**6, ce.TokenEstimator(), MODEL, **options)
    )
    assert cut == ("ConversionError", str(caught.value))


OTHER_CASES: list[tuple[str, Any, int, str]] = [
    (
        "responses output",
        lambda: openai_responses.to_items(
            [
                {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c", "output": SURROGATE},
            ]
        ),
        1,
        "output",
    ),
    (
        "responses arguments",
        lambda: openai_responses.to_items(
            [{"type": "function_call", "call_id": "c", "name": "f", "arguments": NAN_ARGUMENTS[0]}]
        ),
        0,
        "arguments.a",
    ),
    (
        "responses reasoning",
        lambda: openai_responses.to_items([{"type": "reasoning", "summary": [{"text": SURROGATE}]}]),
        0,
        "summary[0].text",
    ),
    (
        "anthropic system",
        lambda: anthropic.to_items([{"role": "user", "content": "hi"}], system=SURROGATE),
        -1,
        "system",
    ),
    (
        "anthropic text run",
        lambda: anthropic.to_items(
            [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "t", "signature": "s"},
                        {"type": "text", "text": "ok"},
                        {"type": "text", "text": SURROGATE},
                    ],
                },
            ]
        ),
        1,
        "content[2].text",
    ),
    (
        "anthropic tool input",
        lambda: anthropic.to_items(
            [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "c", "name": "f", "input": {"a": math.nan}}],
                },
            ]
        ),
        1,
        "content[0].input.a",
    ),
    (
        "langchain human",
        lambda: langchain.to_items([HumanMessage(SURROGATE)]),
        0,
        "content",
    ),
    (
        "langchain text run",
        lambda: langchain.to_items(
            [
                HumanMessage("hi"),
                AIMessage(
                    content=[
                        {"type": "thinking", "thinking": "t"},
                        {"type": "text", "text": "ok"},
                        {"type": "text", "text": SURROGATE},
                    ]
                ),
            ]
        ),
        1,
        "content[2].text",
    ),
    (
        "langchain reasoning",
        lambda: langchain.to_items(
            [HumanMessage("hi"), AIMessage(content=[{"type": "thinking", "thinking": SURROGATE}])]
        ),
        1,
        "content[0].thinking",
    ),
    (
        "langchain args",
        lambda: langchain.to_items(
            [
                HumanMessage("hi"),
                AIMessage(
                    "", tool_calls=[{"name": "f", "args": {"a": math.inf}, "id": "c", "type": "tool_call"}]
                ),
                ToolMessage("ok", tool_call_id="c"),
            ]
        ),
        1,
        "tool_calls[0].args.a",
    ),
    (
        "langchain seq",
        lambda: langchain.to_items([HumanMessage("hi", additional_kwargs={"n": 2**53})], seq_field="n"),
        0,
        "n",
    ),
    (
        "item dicts",
        lambda: mappings.to_items([*item_dicts()[:2], {**item_dicts()[2], "content": SURROGATE}]),
        2,
        "content",
    ),
    (
        "item dict seq",
        lambda: mappings.to_items([{**item_dicts()[0], "seq": -(2**53)}]),
        0,
        "seq",
    ),
]


@pytest.mark.parametrize(("case", "call", "index", "field"), OTHER_CASES, ids=[c[0] for c in OTHER_CASES])
def test_other_formats_fail_at_conversion(backend: str, case: str, call: Any, index: int, field: str) -> None:
    with pytest.raises(ConversionError) as caught:
        call()
    assert (caught.value.index, caught.value.field) == (index, field)


def test_item_dicts_cut_fails_at_the_mapping(backend: str) -> None:
    bad = [*item_dicts()[:4], {**item_dicts()[4], "content": SURROGATE}, *item_dicts()[5:]]
    with pytest.raises(ConversionError) as caught:
        mappings.select_history(bad, 0, 10**6, ce.TokenEstimator(), MODEL)
    assert (caught.value.index, caught.value.field) == (4, "content")


hostile_values = st.sampled_from(
    [SURROGATE, "\udfff", math.nan, math.inf, -math.inf, 2**53, -(2**53), 2**64, {"k": math.nan}, ["\ud800"]]
)


@relaxed
@given(histories.openai_chat().filter(bool), hostile_values, st.data())
def test_a_hostile_value_fails_at_its_message_or_not_at_all(
    backend: str, messages: list[dict[str, Any]], value: Any, data: st.DataObject
) -> None:
    """Whatever hostile value lands in a message, ``to_items`` either refuses it there (a
    ``ConversionError`` naming that message) or returns items every later step accepts."""
    i = data.draw(st.integers(0, len(messages) - 1))
    message = messages[i]
    spot = data.draw(st.sampled_from(["content", "name", "arguments", "call_id", "seq"]))
    options: dict[str, Any] = {}
    if spot == "content":
        message["content"] = value
    elif spot == "name" and message["role"] == "user":
        message["name"] = value
    elif spot == "arguments" and "tool_calls" in message:
        arguments = message["tool_calls"][0]["function"]["arguments"]
        message["tool_calls"][0]["function"]["arguments"] = json.dumps({**json.loads(arguments), "x": value})
    elif spot == "call_id" and message["role"] == "tool":
        message["tool_call_id"] = value
    elif spot == "seq":
        for k, m in enumerate(messages):
            m["n"] = k
        message["n"] = value
        options = {"seq_field": "n"}
    try:
        items = openai_chat.to_items(messages, **options)
    except ConversionError as exc:
        assert exc.index == i
        return
    ce.select_history(items, None, 10**6, ce.TokenEstimator(), MODEL)
    for item in items:
        item.canonical_bytes()


# -- finding 1: duplicate keys, the fast path and the reference alike ---------------------------

keys = st.sampled_from(["a", "b", "é", "\U0001f600", "ab", ""])


@relaxed
@given(st.lists(st.tuples(keys, histories.json_values), min_size=1, max_size=12), st.integers(0, 60))
def test_duplicate_argument_keys_keep_the_last_value(members: list[tuple[str, Any]], budget: int) -> None:
    """The fast path sorts an object's members once and keeps the last of equal keys: the
    same bytes as ``json.loads`` (last wins) and the canonicalizer, so the same cut."""
    from ctxengine import _core

    text = "{" + ",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in members) + "}"
    messages = call_history(text)
    rust = on("rust", lambda: openai_chat.select_history(messages, 0, budget, ce.TokenEstimator(), MODEL))
    python = on("python", lambda: openai_chat.select_history(messages, 0, budget, ce.TokenEstimator(), MODEL))
    assert rust == python
    estimator = backends.module("rust").TokenEstimator()
    assert _core.openai_chat_cut(messages, 0, budget, estimator, MODEL, None, 1, "external_untrusted") == rust
    assert openai_chat.to_items(messages)[1].arguments == json.loads(text)
