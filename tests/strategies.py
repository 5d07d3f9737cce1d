"""Hypothesis strategies shared by the foundation tests (canonical JSON, estimator, cut)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from ctxengine.model import (
    AssistantMessage,
    FileRef,
    ReasoningItem,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResult,
    ToolSpec,
    TrustLevel,
    UserMessage,
)

MAX_SAFE_INTEGER = 2**53 - 1

FLOAT_EXAMPLES = (
    1e21,
    1e-7,
    1e-6,
    5e-324,
    1.7976931348623157e308,
    -0.0,
    0.1,
    123456789.125,
    1e20,
    1e16,
    -1.5e-7,
    2.5e-6,
    100.0,
)

safe_ints = st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
finite_floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(FLOAT_EXAMPLES),
    # every decimal exponent, so each ECMAScript layout branch is hit
    st.builds(
        lambda m, e: float(f"{m}e{e}"),
        st.integers(1, 10**17),
        st.integers(-330, 300),
    ).filter(lambda f: f not in (float("inf"), 0.0)),
    # exact binary fractions of large numbers: the two nearest shortest decimals
    # are often equidistant, and ECMAScript breaks the tie toward the even digit
    st.builds(lambda n, eighths: float(n) + eighths / 8, st.integers(2**40, 2**52), st.integers(1, 7)),
)

# U+E000..U+FFFF sort after the surrogates that encode U+10000+ in UTF-16,
# but before them by code point: mixing the two exercises UTF-16 ordering.
_bmp_high = st.characters(min_codepoint=0xE000, max_codepoint=0xFFFF)
_astral = st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF)
# st.characters() alone may yield lone surrogates; valid JSON text must not.
_chars = st.characters(codec="utf-8")
key_chars = st.one_of(_chars, _bmp_high, _astral, st.sampled_from('ab"\\\n\x00\x1f\x7f'))
keys = st.text(key_chars, max_size=5)
strings = st.text(st.one_of(_chars, _bmp_high, _astral, st.characters(max_codepoint=0x1F)), max_size=24)

scalars = st.one_of(st.none(), st.booleans(), safe_ints, finite_floats, strings)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=5),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(keys, children, max_size=5),
    )


json_values = st.recursive(scalars, _containers, max_leaves=30)
json_objects = st.dictionaries(keys, json_values, max_size=4)

# --------------------------------------------------------------------------
# a value with exactly one defect at a known path

BAD_LEAVES: tuple[tuple[str, Any], ...] = (
    ("nan", float("nan")),
    ("inf", float("inf")),
    ("-inf", float("-inf")),
    ("int too big", 2**53),
    ("int too small", -(2**53)),
    ("huge int", 10**30),
    ("lone surrogate value", "ab\ud800cd"),
    ("lone low surrogate value", "\udfff"),
    ("non-str key", {1: "x"}),
    ("tuple key", {("a",): 1}),
    ("none key", {None: 1}),
    ("surrogate key", {"k\udc00": 1}),
    ("set", {1, 2}),
    ("bytes", b"raw"),
    ("object", object()),
)


@st.composite
def defective_values(draw: st.DrawFn) -> tuple[Any, str]:
    """``(value, path)``: a JSON value with one bad leaf, and that leaf's JSON path.

    A bad key is reported at its dict, which is the leaf itself here.
    """
    _, value = draw(st.sampled_from(BAD_LEAVES))
    segments: list[str] = []
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            siblings = draw(st.lists(json_values, max_size=3))
            index = draw(st.integers(0, len(siblings)))
            siblings.insert(index, value)
            value = siblings if draw(st.booleans()) else tuple(siblings)
            segments.append(f"[{index}]")
        else:
            mapping = draw(st.dictionaries(keys, json_values, max_size=3))
            key = draw(keys.filter(lambda k, m=mapping: k not in m))  # type: ignore[misc]
            mapping[key] = value
            value = mapping
            segments.append(f".{key}")
    return value, "$" + "".join(reversed(segments))


# --------------------------------------------------------------------------
# value types

trust_levels = st.sampled_from(list(TrustLevel))
seqs = st.none() | st.integers(0, 10**6)
call_ids = st.text(_chars, min_size=1, max_size=8)
parts = st.one_of(
    st.builds(TextPart, strings),
    st.builds(FileRef, strings, strings, st.none() | strings),
)
contents = st.one_of(strings, st.lists(parts, max_size=3).map(tuple))

items = st.one_of(
    st.builds(UserMessage, contents, trust=trust_levels, principal_id=st.none() | strings, seq=seqs),
    st.builds(AssistantMessage, contents, trust=trust_levels, seq=seqs),
    st.builds(SystemMessage, contents, trust=trust_levels, seq=seqs),
    st.builds(ToolCall, call_ids, strings, json_objects, seq=seqs),
    st.builds(ToolResult, call_ids, contents, is_error=st.booleans(), trust=trust_levels, seq=seqs),
    st.builds(ReasoningItem, strings, json_objects, seq=seqs),
    st.builds(ToolSpec, call_ids, strings, json_objects),
)


def fresh(item: Any) -> Any:
    """An equal item with an empty ``_cj`` cache."""
    return type(item).from_dict(item.to_dict())


# --------------------------------------------------------------------------
# sessions for the history cut


@st.composite
def sessions(draw: st.DrawFn, max_turns: int = 10, reuse_ids: bool = False) -> list[Any]:
    """User turns with tool calls, results and an assistant reply; seq rises, sometimes None.

    Sometimes a turn's calls are issued together and answered out of order. With
    ``reuse_ids`` call ids come from a pool of four, so an id recurs once its earlier pair
    is complete (never while it is open), as real agents' histories do (ADR 0019).
    """
    pool = ["call_1", "call_2", "call_3", "call_4"]
    out: list[Any] = []
    seq = draw(st.integers(0, 3))
    call_number = 0

    def next_seq() -> int | None:
        nonlocal seq
        seq += draw(st.integers(1, 3))
        return None if draw(st.integers(0, 9)) == 0 else seq

    def filler(tag: str) -> str:
        size = draw(st.sampled_from((0, 5, 40, 200, 450, 1200)))
        return (tag * (size // len(tag) + 1))[:size]

    for _ in range(draw(st.integers(0, max_turns))):
        out.append(UserMessage(filler("user asks "), seq=next_seq()))
        calls = []
        # Calls issued together are open together: distinct ids among them.
        together = draw(st.permutations(pool))[:3] if reuse_ids else []
        for k in range(draw(st.integers(0, 3))):
            call_number += 1
            call_id = together[k] if reuse_ids else f"call_{call_number}"
            calls.append(ToolCall(call_id, "search", {"q": filler("query "), "n": call_number}, seq=None))
        interleave = len(calls) > 1 and draw(st.booleans())
        if interleave:
            for call in calls:
                out.append(ToolCall(call.call_id, call.name, call.arguments, seq=next_seq()))
            order = draw(st.permutations(range(len(calls))))
            for i in order:
                out.append(ToolResult(calls[i].call_id, filler("result text "), seq=next_seq()))
        else:
            for call in calls:
                out.append(ToolCall(call.call_id, call.name, call.arguments, seq=next_seq()))
                out.append(ToolResult(call.call_id, filler("result text "), seq=next_seq()))
        if draw(st.booleans()):
            out.append(AssistantMessage(filler("assistant says "), seq=next_seq()))
    return out


reconciles = st.lists(
    st.tuples(st.sampled_from(("m:a", "m:b")), st.integers(1, 5000), st.integers(0, 12000)),
    max_size=4,
)
