"""``shared_prefix``: leading items compared by identity, the same on both backends."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxengine.core import backends
from ctxengine.errors import ArgumentError

BACKENDS = [backends.module("python")]
try:
    BACKENDS.append(backends.module("rust"))
except Exception:  # pragma: no cover - the extension is not built
    pass

POOL = [object() for _ in range(4)]


class Equal:
    """Equal to everything: identity, not equality, is what counts."""

    def __eq__(self, other: object) -> bool:
        raise AssertionError("compared by equality")

    __hash__ = object.__hash__


@given(a=st.lists(st.sampled_from(POOL), max_size=8), b=st.lists(st.sampled_from(POOL), max_size=8))
def test_the_count_of_leading_identical_items(a: list[Any], b: list[Any]) -> None:
    want = 0
    while want < min(len(a), len(b)) and a[want] is b[want]:
        want += 1
    for module in BACKENDS:
        assert module.shared_prefix(a, b) == want
        assert module.shared_prefix(tuple(a), b) == want
        assert module.shared_prefix(iter(a), tuple(b)) == want


def test_equal_but_distinct_items_differ_and_are_never_compared() -> None:
    same = Equal()
    for module in BACKENDS:
        assert module.shared_prefix([same, Equal()], [same, Equal()]) == 1


@pytest.mark.parametrize("module", BACKENDS)
@pytest.mark.parametrize(("a", "b", "name"), [(5, [], "a"), ([], None, "b"), ("ab", [], "a")])
def test_a_non_sequence_is_an_argument_error(module: Any, a: Any, b: Any, name: str) -> None:
    with pytest.raises(ArgumentError, match=f"shared_prefix: {name}: expected a sequence of objects"):
        module.shared_prefix(a, b)
