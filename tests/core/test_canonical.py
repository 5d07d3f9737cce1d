"""Canonical JSON (RFC 8785) and payload hashes: behaviour under both backends,
``rfc8785`` as the oracle, and Rust == reference differentially."""

from __future__ import annotations

import enum
import hashlib
from collections import OrderedDict, defaultdict
from typing import Any

import pytest
import rfc8785
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import ctxengine
from ctxengine.core import backends
from ctxengine.errors import CanonicalizationError
from ctxengine.model import ResolvedModel, TextPart, ToolCall, ToolResult, TrustLevel, UserMessage
from strategies import (
    FLOAT_EXAMPLES,
    MAX_SAFE_INTEGER,
    defective_values,
    finite_floats,
    fresh,
    items,
    json_values,
    keys,
    safe_ints,
)

FIXTURE_OK = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def nested_lists(depth: int) -> Any:
    """``depth`` nested lists around a 0: the outermost list is at depth 1."""
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def nested_dicts(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = {"k": value}
    return value


def error_of(fn: Any, value: Any) -> CanonicalizationError:
    with pytest.raises(CanonicalizationError) as info:
        fn(value)
    return info.value


# --------------------------------------------------------------------------
# the oracle


@FIXTURE_OK
@given(value=json_values)
def test_matches_rfc8785(backend: str, value: Any) -> None:
    assert ctxengine.canonical_json(value) == rfc8785.dumps(value)


@FIXTURE_OK
@given(value=finite_floats)
def test_floats_match_rfc8785(backend: str, value: float) -> None:
    assert ctxengine.canonical_json(value) == rfc8785.dumps(value)
    assert ctxengine.canonical_json([value, -value]) == rfc8785.dumps([value, -value])


@FIXTURE_OK
@given(value=safe_ints)
@example(value=MAX_SAFE_INTEGER)
@example(value=-MAX_SAFE_INTEGER)
@example(value=0)
def test_ints_match_rfc8785(backend: str, value: int) -> None:
    assert ctxengine.canonical_json(value) == rfc8785.dumps(value) == str(value).encode()


@FIXTURE_OK
@given(mapping=st.dictionaries(keys, st.integers(0, 9), max_size=8))
def test_keys_sort_by_utf16_code_units(backend: str, mapping: dict[str, int]) -> None:
    assert ctxengine.canonical_json(mapping) == rfc8785.dumps(mapping)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1e21, b"1e+21"),
        (1e-7, b"1e-7"),
        (1e-6, b"0.000001"),
        (5e-324, b"5e-324"),
        (1.7976931348623157e308, b"1.7976931348623157e+308"),
        (-0.0, b"0"),
        (0.0, b"0"),
        (0.1, b"0.1"),
        (123456789.125, b"123456789.125"),
        (1e20, b"100000000000000000000"),
        (1e16, b"10000000000000000"),
        (100.0, b"100"),
        (-1.5, b"-1.5"),
        (1.5e-7, b"1.5e-7"),
        (2.5e-6, b"0.0000025"),
        (1.2345e21, b"1.2345e+21"),
        (9007199254740993.0, b"9007199254740992"),
        (float(2**60), b"1152921504606847000"),  # shortest digits, then zeros
        # ties between two shortest candidates go to the even digit (ECMA-262 Number::toString)
        (562949953421312.2, b"562949953421312.2"),  # exactly ...312.25
        (85378352326445.12, b"85378352326445.12"),  # exactly ...445.125
        (958727946751178.2, b"958727946751178.2"),
        (-562949953421312.2, b"-562949953421312.2"),
    ],
)
def test_float_layout(backend: str, value: float, expected: bytes) -> None:
    assert ctxengine.canonical_json(value) == expected == rfc8785.dumps(value)


def test_float_examples_match_rfc8785(backend: str) -> None:
    for value in FLOAT_EXAMPLES:
        assert ctxengine.canonical_json(value) == rfc8785.dumps(value), value


def test_supplementary_key_sorts_before_private_use(backend: str) -> None:
    # U+10000 is D800 DC00 in UTF-16, which sorts before U+E000 / U+FFFF.
    value = {"\uffff": 3, "\U00010000": 2, "\ue000": 1, "z": 0}
    assert ctxengine.canonical_json(value) == '{"z":0,"\U00010000":2,"\ue000":1,"\uffff":3}'.encode()


def test_string_escapes(backend: str) -> None:
    text = "".join(chr(c) for c in range(0x20)) + '"\\/\x7f\u2028é\U0001f600'
    expected = (
        '"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r'
        "\\u000e\\u000f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018\\u0019"
        '\\u001a\\u001b\\u001c\\u001d\\u001e\\u001f\\"\\\\/\x7f\u2028é\U0001f600"'
    ).encode()
    assert ctxengine.canonical_json(text) == expected == rfc8785.dumps(text)
    assert ctxengine.canonical_json({text: text}) == rfc8785.dumps({text: text})


def test_scalars_and_containers(backend: str) -> None:
    cj = ctxengine.canonical_json
    assert cj(None) == b"null"
    assert cj(True) == b"true"
    assert cj(False) == b"false"
    assert cj([]) == b"[]"
    assert cj({}) == b"{}"
    assert cj(()) == b"[]"
    assert cj((1, [2, (3,)])) == b"[1,[2,[3]]]"
    assert cj({"b": [True, None], "a": {"d": 1, "c": 2.5}}) == b'{"a":{"c":2.5,"d":1},"b":[true,null]}'


class Colour(enum.IntEnum):
    RED = 7


def test_enum_members_and_plain_dicts_use_their_data(backend: str) -> None:
    # The accepted subclasses (ADR 0010); every other one is refused
    # (tests/test_canonical_budget.py).
    cj = ctxengine.canonical_json
    assert cj(TrustLevel.USER) == b'"user"'
    assert cj({TrustLevel.PLATFORM: TrustLevel.MEMORY}) == b'{"platform":"memory"}'
    assert cj(Colour.RED) == b"7"
    assert cj(OrderedDict([("b", 1), ("a", 2)])) == b'{"a":2,"b":1}'
    assert cj(defaultdict(list, {"k": [1]})) == b'{"k":[1]}'


def test_shared_subtree_is_not_a_cycle(backend: str) -> None:
    shared = [1, {"x": 2}]
    assert ctxengine.canonical_json({"a": shared, "b": [shared, shared]}) == (
        b'{"a":[1,{"x":2}],"b":[[1,{"x":2}],[1,{"x":2}]]}'
    )


def test_value_types_use_to_dict(backend: str) -> None:
    model = ResolvedModel("p", "m", 1000, 100, 50, frozenset({"b", "a"}))
    assert ctxengine.canonical_json(model) == rfc8785.dumps(model.to_dict())
    part = TextPart("hi")
    assert ctxengine.canonical_json({"p": [part]}) == b'{"p":[{"text":"hi","type":"text_part"}]}'


@FIXTURE_OK
@given(value=json_values)
def test_payload_hash_is_sha256_of_canonical_bytes(backend: str, value: Any) -> None:
    digest = ctxengine.payload_hash(value)
    assert digest == hashlib.sha256(rfc8785.dumps(value)).hexdigest()
    assert len(digest) == 64 and digest == digest.lower()


# --------------------------------------------------------------------------
# rejection, with the JSON path


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"a": [0, 1, float("nan")]}, "$.a[2]"),
        ({"a": [0, 1, float("inf")]}, "$.a[2]"),
        ([float("-inf")], "$[0]"),
        (float("nan"), "$"),
        ({"a": {1: "x"}}, "$.a"),
        ({"a": {"ok": 1, 2: "x"}}, "$.a"),
        ({True: 1}, "$"),
        ({None: 1}, "$"),
        ([{("t",): 1}], "$[0]"),
        ({"x": "bad \ud800 value"}, "$.x"),
        ({"x": ["\udc00"]}, "$.x[0]"),
        ({"x": {"k\udbff": 1}}, "$.x"),
        ("\ud83d\ude00", "$"),  # two code points, each a lone surrogate in a Python str
        ([0, 2**53], "$[1]"),
        ([0, -(2**53)], "$[1]"),
        ({"n": 10**40}, "$.n"),
        ({"s": {1, 2}}, "$.s"),
        ({"b": b"bytes"}, "$.b"),
        ([object()], "$[0]"),
        ({"c": 1j}, "$.c"),
        ({"a.b": {"[0]": float("nan")}}, "$.a.b.[0]"),  # keys are appended verbatim
    ],
)
def test_rejects_with_path(backend: str, value: Any, path: str) -> None:
    error = error_of(ctxengine.canonical_json, value)
    assert error.path == path
    assert error.reason
    assert isinstance(error, ValueError)
    assert error_of(ctxengine.payload_hash, value).path == path


def test_oracle_rejects_the_same_values(backend: str) -> None:
    for value in (float("nan"), [2**53], {1: 2}, "\ud800"):
        with pytest.raises(rfc8785.CanonicalizationError):
            rfc8785.dumps(value)
        error_of(ctxengine.canonical_json, value)


def test_safe_integer_bounds(backend: str) -> None:
    assert (
        ctxengine.canonical_json([MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER])
        == b"[9007199254740991,-9007199254740991]"
    )
    assert error_of(ctxengine.canonical_json, MAX_SAFE_INTEGER + 1).path == "$"
    assert error_of(ctxengine.canonical_json, -MAX_SAFE_INTEGER - 1).path == "$"


@pytest.mark.parametrize("nest", [nested_lists, nested_dicts])
def test_nesting_limit_is_128(backend: str, nest: Any) -> None:
    assert ctxengine.canonical_json(nest(128)) == rfc8785.dumps(nest(128))
    error = error_of(ctxengine.canonical_json, nest(129))
    segment = "[0]" if nest is nested_lists else ".k"
    # the container at depth 129 is the one 128 steps below the root
    assert error.path == "$" + segment * 128
    assert error_of(ctxengine.canonical_json, nest(1000)).path == "$" + segment * 128


def test_empty_container_at_depth_129_fails(backend: str) -> None:
    value: Any = []
    for _ in range(128):
        value = [value]
    assert error_of(ctxengine.canonical_json, value).path == "$" + "[0]" * 128
    assert ctxengine.canonical_json(value[0]) == b"[" * 128 + b"]" * 128


def test_nesting_limit_counts_from_where_the_value_starts(backend: str) -> None:
    # depth is absolute from the root: 127 lists inside a dict is depth 128
    assert ctxengine.canonical_json({"a": nested_lists(127)})
    assert error_of(ctxengine.canonical_json, {"a": nested_lists(128)}).path == "$.a" + "[0]" * 127


def test_list_cycle(backend: str) -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    assert error_of(ctxengine.canonical_json, loop).path == "$[1]"
    assert error_of(ctxengine.canonical_json, {"a": [0, loop]}).path == "$.a[1][1]"


def test_dict_cycle(backend: str) -> None:
    loop: dict[str, Any] = {"a": 1}
    loop["self"] = loop
    assert error_of(ctxengine.canonical_json, loop).path == "$.self"
    outer = {"x": [{"y": loop}]}
    assert error_of(ctxengine.canonical_json, outer).path == "$.x[0].y.self"


def test_indirect_cycle(backend: str) -> None:
    inner: list[Any] = []
    outer = {"list": inner}
    inner.append(outer)
    assert error_of(ctxengine.canonical_json, outer).path == "$.list[0]"


def test_cycle_is_checked_before_depth(backend: str) -> None:
    # a cycle that recurs exactly at depth 129 is still reported as a cycle
    chain: list[Any] = []
    node = chain
    for _ in range(127):
        child: list[Any] = []
        node.append(child)
        node = child
    node.append(chain)  # the root recurs at depth 129
    error = error_of(ctxengine.canonical_json, chain)
    assert error.path == "$" + "[0]" * 128
    assert "cycle" in error.reason.lower()


@FIXTURE_OK
@given(case=defective_values())
def test_generated_defect_path(backend: str, case: tuple[Any, str]) -> None:
    value, path = case
    assert error_of(ctxengine.canonical_json, value).path == path


# --------------------------------------------------------------------------
# the per-item cache


@FIXTURE_OK
@given(item=items)
def test_item_canonical_fills_and_reuses_cache(backend: str, item: Any) -> None:
    item = fresh(item)
    module = backends.active()
    assert item._cj is None
    data, digest = module.item_canonical(item)
    assert data == rfc8785.dumps(item.to_dict())
    assert digest == hashlib.sha256(data).digest()
    assert item._cj == (data, digest)
    # the cache slot itself is returned: no copy, no recomputation
    again = module.item_canonical(item)
    assert again is item._cj
    assert again[0] is data and again[1] is digest
    assert ctxengine.canonical_json(item) == data
    assert ctxengine.payload_hash(item) == digest.hex()
    assert item.canonical_bytes() == data
    assert item.payload_hash() == digest.hex()


def test_canonical_json_of_item_fills_cache(backend: str) -> None:
    item = UserMessage("hello", seq=3)
    assert ctxengine.canonical_json(item) == rfc8785.dumps(item.to_dict())
    assert item._cj is not None
    assert item._cj[0] == rfc8785.dumps(item.to_dict())


def test_items_nested_in_payloads(backend: str) -> None:
    call = ToolCall("c1", "search", {"q": "x"}, seq=1)
    result = ToolResult("c1", "found", seq=2)
    payload = {"items": [call, result], "n": 2}
    expected = rfc8785.dumps({"items": [call.to_dict(), result.to_dict()], "n": 2})
    assert ctxengine.canonical_json(payload) == expected
    assert ctxengine.canonical_json(payload) == expected  # now from the caches


def test_bad_item_reports_path(backend: str) -> None:
    call = ToolCall("c1", "search", {"q": [1, float("nan")]})
    assert error_of(ctxengine.canonical_json, call).path == "$.arguments.q[1]"
    assert error_of(backends.active().item_canonical, call).path == "$.arguments.q[1]"
    assert call._cj is None
    # inside a payload, the path continues from where the item sits
    assert error_of(ctxengine.canonical_json, {"log": [0, call]}).path == "$.log[1].arguments.q[1]"


# --------------------------------------------------------------------------
# differential: Rust == reference


RUST = "rust"
PYTHON = "python"
DIFF = settings(max_examples=200, deadline=None)


def both() -> tuple[Any, Any]:
    return backends.module(RUST), backends.module(PYTHON)


@DIFF
@given(value=json_values)
def test_differential_bytes_and_hash(value: Any) -> None:
    rust, ref = both()
    assert rust.canonical_json(value) == ref.canonical_json(value)
    assert rust.payload_hash(value) == ref.payload_hash(value)


@DIFF
@given(case=defective_values())
def test_differential_errors(case: tuple[Any, str]) -> None:
    value, _ = case
    rust, ref = both()
    errors = []
    for module in (rust, ref):
        with pytest.raises(CanonicalizationError) as info:
            module.canonical_json(value)
        errors.append((type(info.value), info.value.path))
    assert errors[0] == errors[1]


@DIFF
@given(item=items)
def test_differential_item_canonical(item: Any) -> None:
    rust, ref = both()
    by_rust, by_ref = fresh(item), fresh(item)
    assert rust.item_canonical(by_rust) == ref.item_canonical(by_ref)
    assert by_rust._cj == by_ref._cj
    # a cache written by one backend is served as-is by the other
    assert ref.item_canonical(by_rust) is by_rust._cj
    assert rust.item_canonical(by_ref) is by_ref._cj
    assert rust.payload_hash(by_ref) == ref.payload_hash(by_rust)


@DIFF
@given(values=st.lists(items, max_size=6), extra=json_values)
def test_differential_payload_with_items(values: list[Any], extra: Any) -> None:
    rust, ref = both()
    left = {"items": [fresh(v) for v in values], "extra": extra}
    right = {"items": [fresh(v) for v in values], "extra": extra}
    assert rust.canonical_json(left) == ref.canonical_json(right)
    assert rust.canonical_json(left) == ref.canonical_json(left)


def test_differential_structural_errors() -> None:
    rust, ref = both()
    loop: list[Any] = [1]
    loop.append({"again": loop})
    cases = [
        nested_lists(129),
        nested_dicts(129),
        loop,
        ToolCall("c", "n", {"a": [0, float("inf")]}),
        [ToolCall("c", "n", {"a": {"b": 2**60}})],
    ]
    for value in cases:
        found = []
        for module in (rust, ref):
            with pytest.raises(CanonicalizationError) as info:
                module.canonical_json(value)
            found.append((type(info.value), info.value.path))
        assert found[0] == found[1], value
