"""The stored-item decoder (issue 13, acceptance 3): both backends read the same bytes
as the same items, refuse the same texts with the same words, and agree with the
reference reader (``json.loads`` + a canonical re-check, then ``item_from_dict``).

A decoder that accepted a text the store would call corrupt, built an item that
differs from ``from_dict``'s, or filled ``_cj`` with other bytes than the value's
own canonical form would fail these.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import ctxengine as ce
from ctxengine.core import backends
from ctxengine.core.canonical import canonical_json
from ctxengine.errors import ModelValidationError
from ctxengine.model import ITEM_TYPES, FileRef, TextPart, TrustLevel, item_from_dict
from ctxengine.reference.decode import canonical_object
from ctxengine.runtime.session import item_payload
from strategies import items, json_values, keys

RUST = backends.module("rust")
PY = backends.module("python")
ARGS = (ITEM_TYPES, (TextPart, FileRef), tuple(TrustLevel))
conversation_items = items.filter(lambda i: i.kind in ITEM_TYPES)


def decode(core: Any, payloads: list[Any], seqs: list[int], extra: dict[str, Any] | None = None) -> Any:
    return core.decode_items(payloads, seqs, *ARGS, extra)


def oracle(payload: str, seq: int) -> Any:
    """What session_history read before the native decoder: the item, or None when refused."""
    value = canonical_object(payload)
    if value is None or not isinstance(value.get("item"), dict):
        return None
    try:
        return item_from_dict({**value["item"], "seq": seq})
    except ModelValidationError:
        return None


def stored(item: Any) -> str:
    return canonical_json(item_payload(item)).decode("utf-8")


@settings(max_examples=300)
@given(st.lists(conversation_items, max_size=6), st.integers(1, 2**53 - 1))
def test_both_backends_decode_stored_items_to_equal_items_with_their_cache(
    originals: list[Any], first: int
) -> None:
    payloads = [stored(item) for item in originals]
    seqs = list(range(first, first + len(payloads)))
    # A store refuses to write what would not read back (e.g. a float 2.0**53, whose
    # canonical spelling reads back as an out-of-range int).
    assume(all(oracle(p, s) is not None for p, s in zip(payloads, seqs, strict=True)))
    results = [decode(core, payloads, seqs) for core in (RUST, PY)]
    for decoded, index, reason in results:
        assert (index, reason) == (None, None)
        expected = [oracle(p, s) for p, s in zip(payloads, seqs, strict=True)]
        assert decoded == expected
        for got, want in zip(decoded, expected, strict=True):
            assert type(got) is type(want)
            if got.seq <= 2**53 - 1:
                assert got._cj == PY.item_canonical(want)
            assert got._log is None
            assert hash(got) == hash(want)


def _mutations(text: str) -> st.SearchStrategy[str]:
    """Texts near a canonical one: most are not canonical any more."""
    return st.one_of(
        st.just(text),
        st.integers(0, len(text)).map(lambda i: text[:i] + " " + text[i:]),
        st.integers(0, max(len(text) - 1, 0)).map(lambda i: text[:i] + text[i + 1 :]),
        st.sampled_from(
            [
                text.replace('":', '" :', 1),
                text.replace("1", "1.0", 1),
                text.replace("e", "\\u0065", 1),
                text.replace('"type"', '"tYpe"', 1),
                text.replace("true", "1", 1),
                text.replace('"user"', '"admin"', 1),
                text.replace("}", ',"zz":1}', 1),
                text.replace('{"item":{', '{"item":{"a":1,', 1),
                text + "x",
            ]
        ),
    )


_item_objects = st.one_of(
    conversation_items.map(lambda i: item_payload(i)["item"]),
    st.dictionaries(keys, json_values, max_size=4),
    st.fixed_dictionaries(
        {"type": st.sampled_from(sorted(ITEM_TYPES))},
        optional={
            k: json_values
            for k in ("content", "trust", "call_id", "name", "arguments", "is_error", "provider", "payload")
        },
    ),
)


@settings(max_examples=500)
@given(st.data())
def test_the_backends_agree_with_each_other_and_the_reference_reader_on_any_text(data: Any) -> None:
    inner = data.draw(_item_objects)
    outer = data.draw(st.sampled_from(["item", "items", None]))
    value: Any = inner if outer is None else {outer: inner}
    text = data.draw(_mutations(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)))
    rust = decode(RUST, [text], [5])
    ref = decode(PY, [text], [5])
    assert rust == ref
    want = oracle(text, 5)
    if want is None:
        assert rust[1] == 0 and rust[0] == [] and rust[2]
    else:
        assert rust == ([want], None, None)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ("{ }", "payload is not canonical JSON"),
        ('{"item":{"content":"x","type":"user_message"}} ', "payload is not canonical JSON"),
        ('{"item":1.0}', "payload is not canonical JSON"),
        ('{"item":{"content":"\\u0078","type":"user_message"}}', "payload is not canonical JSON"),
        ("[]", "payload is not canonical JSON"),
        ("{}", "conversation item payload has no 'item' object"),
        ('{"item":[]}', "conversation item payload has no 'item' object"),
        ('{"item":{"type":"nope"}}', "ConversationItem.type: unknown item type"),
        ('{"item":{"type":"user_message"}}', "UserMessage.content: missing"),
        ('{"item":{"content":null,"type":"user_message"}}', "expected str or list, got NoneType"),
        ('{"item":{"content":[{"type":"x"}],"type":"user_message"}}', "UserMessage.content[0]: unknown part"),
        ('{"item":{"content":[{"text":1,"type":"text_part"}],"type":"user_message"}}', "TextPart.text"),
        ('{"item":{"content":"x","trust":"root","type":"user_message"}}', "unknown trust level"),
        ('{"item":{"content":"x","principal_id":7,"type":"user_message"}}', "principal_id: expected str"),
        ('{"item":{"arguments":[],"call_id":"c","name":"n","type":"tool_call"}}', "expected dict, got list"),
        ('{"item":{"call_id":"","content":"x","type":"tool_result"}}', "must not be empty"),
        ('{"item":{"provider":"p","type":"reasoning"}}', "ReasoningItem.payload: missing"),
    ],
)
def test_a_payload_that_does_not_decode_is_named_with_the_same_words_on_both_backends(
    payload: str, reason: str
) -> None:
    good = stored(ce.UserMessage("fine"))
    for core in (RUST, PY):
        decoded, index, why = decode(core, [good, payload, good], [1, 2, 3])
        assert len(decoded) == 1 and index == 1 and why is not None and reason in why
    assert decode(RUST, [payload], [2]) == decode(PY, [payload], [2])


def test_slots_the_decoder_does_not_fill_take_the_extra_values() -> None:
    text = stored(ce.ToolResult("c1", "done"))
    for core in (RUST, PY):
        [item], _, _ = decode(core, [text], [4], {"_log": "s1", "content": "ignored"})
        assert item._log == "s1" and item.content == "done"


def test_nesting_past_the_canonical_limit_is_refused_alike() -> None:
    head, tail = '{"item":{"arguments":{"a":', '},"call_id":"c","name":"n","type":"tool_call"}}'
    deep = head + "[" * 125 + "]" * 125 + tail
    deeper = deep.replace("[", "[[", 1).replace("]", "]]", 1)
    assert decode(RUST, [deep], [1])[1] is None and decode(PY, [deep], [1])[1] is None
    refused = ([], 0, "payload is not canonical JSON")
    assert decode(RUST, [deeper], [1]) == decode(PY, [deeper], [1]) == refused


def _history(n: int) -> list[Any]:
    """``n`` stored items of every shape a session log holds."""

    def shape(i: int) -> Any:
        match i % 4:
            case 0:
                return ce.UserMessage(f'question {i} \u00e9\n"q"', principal_id="alice")
            case 1:
                return ce.ToolCall(f"c{i}", "search", {"q": f"x{i}", "k": [i, 1.5, None]})
            case 2:
                parts = (TextPart(f"r{i}"), FileRef(f"a{i}", "text/plain"))
                return ce.ToolResult(f"c{i}", parts, is_error=i % 3 == 0)
            case _:
                return ce.AssistantMessage(f"answer {i}")

    return [shape(i) for i in range(n)]


@pytest.mark.parametrize("bad", [None, 0, 255, 256, 700, 1199])
@pytest.mark.parametrize("how", ["text", "not a str"])
def test_a_long_batch_decodes_alike_and_stops_at_its_first_bad_row(bad: int | None, how: str) -> None:
    originals = _history(1200)
    payloads: list[Any] = [stored(item) for item in originals]
    seqs = list(range(10, 10 + len(payloads)))
    if bad is not None:
        payloads[bad] = payloads[bad] + " " if how == "text" else payloads[bad].encode()
    rust, ref = decode(RUST, payloads, seqs), decode(PY, payloads, seqs)
    assert rust == ref
    decoded, index, reason = rust
    assert index == bad and (reason is None) == (bad is None)
    assert len(decoded) == (len(payloads) if bad is None else bad)
    for got, payload, seq in zip(decoded, payloads, seqs, strict=False):
        assert got._cj == PY.item_canonical(oracle(payload, seq))
