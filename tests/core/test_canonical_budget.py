"""What the canonicalizer accepts (ADR 0010), under both backends: one
nesting budget for the whole value (items, mappings, sequences and
``to_dict`` hops each one level), the refused subclasses, item cycles.

Very deep values and threads run in subprocesses (``test_hostile_values.py``):
a native crash there is a failed test, not a dead run.
"""

from __future__ import annotations

import collections
from typing import Any

import pytest

import ctxengine
from ctxengine.core import backends
from ctxengine.errors import CanonicalizationError
from ctxengine.model import ReasoningItem, ToolCall, ToolResult, TrustLevel

MODEL = "test:model"


def call_chain(n: int) -> Any:
    """``n`` tool calls, each holding the next in its arguments."""
    value: Any = ToolCall("c0", "f", {})
    for i in range(1, n):
        value = ToolCall(f"c{i}", "f", {"x": value})
    return value


class Hop:
    """A value type (not an item) whose dict holds the next one."""

    def __init__(self, inner: object) -> None:
        self.inner = inner

    def to_dict(self) -> dict[str, Any]:
        return {"x": self.inner}


def hop_chain(n: int) -> Any:
    value: Any = 0
    for _ in range(n):
        value = Hop(value)
    return value


def plain(value: Any) -> Any:
    """The value with every value type replaced by its ``to_dict()``."""
    if hasattr(value, "to_dict"):
        value = value.to_dict()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def error_of(fn: Any, *args: Any) -> CanonicalizationError:
    with pytest.raises(CanonicalizationError) as info:
        fn(*args)
    return info.value


# --------------------------------------------------------------------------
# one budget for the whole value


def test_items_in_items_count_against_one_budget(backend: str) -> None:
    # The k-th call sits at level 2k-1 (its arguments at 2k): 64 fit.
    ok = call_chain(64)
    assert ctxengine.canonical_json(ok) == ctxengine.canonical_json(plain(ok))
    for n in (65, 200, 1000):
        error = error_of(ctxengine.canonical_json, call_chain(n))
        assert error.path == "$" + ".arguments.x" * 64
        assert error.reason == "nesting deeper than 128"


def test_every_entry_point_reaches_the_same_error(backend: str) -> None:
    deep = call_chain(300)
    path = "$" + ".arguments.x" * 64
    estimator = ctxengine.TokenEstimator()
    # Wrapped one item deeper, the path has the same shape.
    history = [ToolCall("outer", "f", {"x": deep}), ToolResult("outer", "r")]
    reasoning = ReasoningItem("p", {"x": deep})
    for call, want in (
        (lambda: ctxengine.canonical_json(deep), path),
        (lambda: ctxengine.payload_hash(deep), path),
        (lambda: deep.payload_hash(), path),
        (lambda: estimator.estimate([deep], MODEL), path),
        (lambda: estimator.raw(deep, MODEL), path),
        (lambda: ctxengine.select_history(history, 0, 1000, estimator, MODEL), path),
        (lambda: ctxengine.select_history([reasoning], 0, 10, estimator, MODEL), "$.payload.x" + path[13:]),
    ):
        error = error_of(call)
        assert (error.path, error.reason) == (want, "nesting deeper than 128")


def test_the_path_names_the_level_past_the_budget(backend: str) -> None:
    deep = call_chain(300)
    assert error_of(ctxengine.canonical_json, {"a": deep}).path == "$.a" + ".arguments.x" * 63 + ".arguments"
    assert error_of(ctxengine.canonical_json, [[deep]]).path == "$[0][0]" + ".arguments.x" * 63


def test_a_cached_item_counts_the_levels_of_its_bytes(backend: str) -> None:
    inner = call_chain(60)
    fresh_error = error_of(ctxengine.canonical_json, [[[[[[[[[call_chain(60)]]]]]]]]])
    ctxengine.payload_hash(inner)  # fills every cache in the chain
    assert inner._cj is not None
    cached_error = error_of(ctxengine.canonical_json, [[[[[[[[[inner]]]]]]]]])
    assert cached_error.path == fresh_error.path == "$" + "[0]" * 9 + ".arguments.x" * 59 + ".arguments"
    # Shallow enough, the cached bytes are spliced as they are.
    assert ctxengine.canonical_json([inner]) == b"[" + inner._cj[0] + b"]"


def test_to_dict_hops_count_one_level_each(backend: str) -> None:
    assert ctxengine.canonical_json(hop_chain(128)) == ctxengine.canonical_json(plain(hop_chain(128)))
    for n in (129, 1000):
        error = error_of(ctxengine.canonical_json, hop_chain(n))
        assert (error.path, error.reason) == ("$" + ".x" * 128, "nesting deeper than 128")


def test_to_dict_must_return_a_dict(backend: str) -> None:
    class Indirect:
        def __init__(self, inner: object) -> None:
            self.inner = inner

        def to_dict(self) -> Any:
            return self.inner

    error = error_of(ctxengine.canonical_json, {"a": [Indirect(Indirect({}))]})
    assert (error.path, error.reason) == ("$.a[0]", "Indirect.to_dict() returned Indirect, not a dict")
    error = error_of(ctxengine.canonical_json, Indirect([1]))
    assert error.reason == "Indirect.to_dict() returned list, not a dict"
    assert ctxengine.canonical_json(Indirect(collections.OrderedDict(a=1))) == b'{"a":1}'


# --------------------------------------------------------------------------
# cycles


def test_an_item_that_contains_itself(backend: str) -> None:
    call = ToolCall("c", "f", {})
    call.arguments["self"] = [call]  # the arguments dict is the item's own copy
    error = error_of(ctxengine.canonical_json, call)
    assert (error.path, error.reason) == ("$.arguments.self[0]", "cycle: item contains itself")
    assert call._cj is None


def test_a_value_type_that_contains_itself(backend: str) -> None:
    hop = Hop(None)
    hop.inner = {"again": hop}
    error = error_of(ctxengine.canonical_json, {"h": hop})
    assert (error.path, error.reason) == ("$.h.x.again", "cycle: value contains itself")


# --------------------------------------------------------------------------
# subclasses: refused, except enum members and the standard plain dicts


class MyStr(str):
    def __str__(self) -> str:
        return "not the data"


class MyInt(int):
    pass


class MyFloat(float):
    pass


class MyDict(dict[str, Any]):
    def items(self) -> Any:  # type: ignore[override]
        return [("forged", 1)]


class MyList(list[Any]):
    def __iter__(self) -> Any:
        return iter(["forged"])


Point = collections.namedtuple("Point", "x y")


@pytest.mark.parametrize(
    ("value", "path", "reason"),
    [
        ({"a": MyStr("s")}, "$.a", "unsupported subclass MyStr of str"),
        ([1, MyInt(7)], "$[1]", "unsupported subclass MyInt of int"),
        ([MyFloat(0.5)], "$[0]", "unsupported subclass MyFloat of float"),
        ({"d": MyDict(a=1)}, "$.d", "unsupported subclass MyDict of dict"),
        ({"l": MyList([1])}, "$.l", "unsupported subclass MyList of list"),
        ({"p": Point(1, 2)}, "$.p", "unsupported subclass Point of tuple"),
        ({MyStr("k"): 1}, "$", "object key of unsupported subclass MyStr of str"),
        ({"ok": 1, 2: 3}, "$", "object key 2 is not a string"),
    ],
)
def test_subclasses_are_refused_by_path_and_type(backend: str, value: Any, path: str, reason: str) -> None:
    for fn in (ctxengine.canonical_json, ctxengine.payload_hash):
        error = error_of(fn, value)
        assert (error.path, error.reason) == (path, reason)


def test_refused_subclasses_inside_items(backend: str) -> None:
    call = ToolCall("c", "f", {"n": MyInt(3)})
    error = error_of(ctxengine.TokenEstimator().raw, call, MODEL)
    assert (error.path, error.reason) == ("$.arguments.n", "unsupported subclass MyInt of int")


def test_both_backends_agree_on_every_subclass() -> None:
    rust, ref = backends.module("rust"), backends.module("python")
    values: list[Any] = [
        TrustLevel.USER,
        {TrustLevel.USER: [TrustLevel.MEMORY]},
        collections.OrderedDict(b=1, a=2),
        collections.defaultdict(int, k=1),
        MyStr("x"),
        MyDict(a=1),
        MyList([1]),
        Point(1, 2),
    ]
    for value in values:
        outcomes = []
        for module in (rust, ref):
            try:
                outcomes.append(module.canonical_json(value))
            except CanonicalizationError as error:
                outcomes.append((error.path, error.reason))
        assert outcomes[0] == outcomes[1], value
