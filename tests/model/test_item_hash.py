"""Item hashes are pure Python and agree with equality (issue 12: value types hold data only)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

from ctxengine.core import backends
from ctxengine.model import ReasoningItem, ToolCall, ToolResult, ToolSpec, UserMessage
from strategies import fresh, items, json_objects


def _reordered(d: dict[str, Any]) -> dict[str, Any]:
    return dict(reversed(list(d.items())))


@given(items)
def test_equal_items_hash_equal(item: Any) -> None:
    twin = fresh(item)
    assert twin == item
    assert hash(twin) == hash(item)
    assert len({item, twin}) == 1


@given(json_objects)
def test_key_order_of_json_fields_changes_neither_equality_nor_hash(obj: dict[str, Any]) -> None:
    pairs = [
        (ToolCall("c1", "search", obj), ToolCall("c1", "search", _reordered(obj))),
        (ReasoningItem("openai", obj), ReasoningItem("openai", _reordered(obj))),
        (ToolSpec("search", "find", obj), ToolSpec("search", "find", _reordered(obj))),
    ]
    for a, b in pairs:
        assert a == b
        assert hash(a) == hash(b)


def test_values_python_calls_equal_hash_equal_even_when_their_json_differs() -> None:
    # 1 == 1.0 == True in Python, so these items are equal; their canonical bytes
    # differ (1 vs true), which is why the hash cannot come from those bytes.
    one, one_float, true = (ToolCall("c1", "f", {"x": v}) for v in (1, 1.0, True))
    assert one == one_float == true
    assert hash(one) == hash(one_float) == hash(true)


def test_items_that_differ_are_unequal_and_usually_hash_apart() -> None:
    a, b = UserMessage("hello", seq=1), UserMessage("hello", seq=2)
    assert a != b and hash(a) != hash(b)
    assert ToolResult("c1", "ok") != ToolResult("c1", "ok", is_error=True)


@given(items)
def test_hashing_never_calls_the_backend(item: Any) -> None:
    twin = fresh(item)  # an empty canonical cache
    with pytest.MonkeyPatch.context() as mp:

        def refuse() -> None:
            raise AssertionError("__hash__ reached the backend")

        mp.setattr(backends, "active", refuse)
        hash(twin)
    assert twin._cj is None  # nothing was canonicalized to hash it
