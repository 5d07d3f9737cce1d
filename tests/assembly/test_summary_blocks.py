"""The compacted-summary blocks a render cache keeps: the same renders for the same summary and
spans however they are passed, found by the identity of a spans tuple seen before without
hashing its spans again (a seeded run's spans are its carry's, the same tuple run after run)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from ctxengine.assembly.blocks import render_summary, summary_blocks
from ctxengine.assembly.render_cache import RenderCache
from ctxengine.model import ElidedSpan, TrustLevel


def spans(n: int, tag: str = "") -> tuple[ElidedSpan, ...]:
    return tuple(
        ElidedSpan(f"tool_result:{tag}{i}", TrustLevel.EXTERNAL_UNTRUSTED, 100 + i, i + 1) for i in range(n)
    )


@pytest.fixture
def hashes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many times an ElidedSpan is hashed (the dataclass's generated ``__hash__``)."""
    calls: list[int] = [0]
    original = ElidedSpan.__hash__

    def counting(self: ElidedSpan) -> int:
        calls[0] += 1
        return original(self)

    monkeypatch.setattr(ElidedSpan, "__hash__", counting)
    yield calls


def test_the_same_tuple_is_found_without_hashing_its_spans(hashes: list[int]) -> None:
    cache = RenderCache()
    elided = spans(66)
    first = summary_blocks(cache, "the summary", elided)
    assert first == tuple(render_summary("the summary", elided))
    hashed = hashes[0]
    assert hashed >= 66  # the first lookup keys the blocks by value
    for _ in range(5):
        assert summary_blocks(cache, "the summary", elided) is first
    assert hashes[0] == hashed


def test_equal_spans_anew_or_as_a_list_share_the_renders_and_other_inputs_do_not() -> None:
    cache = RenderCache()
    elided = spans(5)
    first = summary_blocks(cache, "s", elided)
    copy = tuple(replace(span) for span in elided)
    assert copy == elided and copy[0] is not elided[0]
    assert summary_blocks(cache, "s", copy) is first  # by value
    assert summary_blocks(cache, "s", list(elided)) is first  # a list: by value only
    other = summary_blocks(cache, "another summary", elided)  # the same tuple, another text
    assert other == tuple(render_summary("another summary", elided)) and other is not first
    assert summary_blocks(cache, "s", elided) is first
    assert summary_blocks(cache, None, ()) == tuple(render_summary("", ()))


def test_the_identity_entries_are_bounded_and_hold_their_tuples() -> None:
    cache = RenderCache(block_capacity=4)
    kept = [spans(2, tag=str(i)) for i in range(10)]
    for elided in kept:
        summary_blocks(cache, "s", elided)
    assert len(cache._summaries) == 4
    assert all(held is kept[6 + i] for i, held in enumerate(cache._summaries.held()))
    for elided in kept:
        assert summary_blocks(cache, "s", elided) == tuple(render_summary("s", elided))
