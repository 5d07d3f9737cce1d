"""The session windows keep within ``max_bytes`` (the estimated memory of their rows, items,
renders and reference snapshots): a worker taking turns of many sessions otherwise held every
window it had read. Their accounting stays exact through reads, extensions, retractions and a
carried point that moves on (ADR 0016)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from ctxengine.errors import ArgumentError
from ctxengine.model import AssistantMessage, UserMessage
from ctxengine.runtime.session import ITEM_APPENDED, append_item
from ctxengine.runtime.window import row_sizes
from ctxengine.runtime.windows import Windows
from ctxengine.stores import open_store


def _accounted(windows: Windows) -> None:
    for window in windows._windows.values():
        assert window.row_bytes == sum(window.sizes)
        columns = (window.items, window.seqs, window.visibilities, window.tokens, window.sizes)
        assert len({len(column) for column in columns}) == 1
        assert window.seqs == [item.seq for item in window.items]


async def _session(store: Any, sid: str, n: int, size: int) -> int:
    last = 0
    for i in range(n):
        cls = UserMessage if i % 2 == 0 else AssistantMessage
        item = await append_item(store, sid, cls(f"{sid} {i} " + "x" * size), derivation_key=f"{sid}:{i}")
        assert item.seq is not None
        last = item.seq
    return last


def test_windows_beyond_max_bytes_go_least_recently_read_first() -> None:
    async def main() -> None:
        store = await open_store("memory://")
        lasts = {sid: await _session(store, sid, 20, 2_000) for sid in ("a", "b", "c", "d")}
        one = Windows(store)
        await one.span("a", 0, lasts["a"], None)
        per_session = one.nbytes
        assert per_session > 20 * 2 * 2_000  # the text twice (content, canonical bytes), and the objects
        # Room for two and a half sessions: reading a third drops the least recently read.
        windows = Windows(store, max_bytes=per_session * 5 // 2)
        for sid in ("a", "b", "a", "c"):
            span = await windows.span(sid, 0, lasts[sid], None)
            assert span.end == 20
            _accounted(windows)
            assert windows.nbytes <= windows.max_bytes
        assert list(windows._windows) == ["a", "c"]
        reads = windows.reads
        await windows.span("a", 0, lasts["a"], None)  # still held: no read
        assert windows.reads == reads
        await windows.span("b", 0, lasts["b"], None)  # dropped: read again
        assert windows.reads == reads + 1
        _accounted(windows)
        # The same reads within the default byte bound keep all four.
        roomy = Windows(store)
        for sid in lasts:
            await roomy.span(sid, 0, lasts[sid], None)
        assert list(roomy._windows) == list(lasts)
        _accounted(roomy)

    asyncio.run(main())


def test_accounting_through_extend_retract_and_a_moved_carried_point() -> None:
    async def main() -> None:
        store = await open_store("memory://")
        last = await _session(store, "s", 12, 300)
        windows = Windows(store)
        full = await windows.span("s", 0, last, None)
        whole = full.window.row_bytes
        fresh = Windows(store)
        await fresh.span("s", 0, last - 2, None)
        _accounted(fresh)
        await fresh.span("s", 0, last, None)  # the window grows by a read
        _accounted(fresh)
        assert fresh.get("s").row_bytes == whole  # type: ignore[union-attr]
        grown = Windows(store)
        await grown.span("s", 0, last - 2, None)
        rows, items = await store.events.read_items("s", last - 2), full.items[-2:]
        events = [SimpleNamespace(sequence=row.sequence, type=ITEM_APPENDED) for row in rows]
        grown.extend("s", events, rows, items)  # type: ignore[arg-type]  # a commit of two
        _accounted(grown)
        assert grown.get("s").row_bytes == whole == sum(row_sizes(await store.events.read_items("s")))  # type: ignore[union-attr]
        assert grown.next_sequence("s") == last + 1
        grown.retract("s", last)  # its last event was not committed after all
        _accounted(grown)
        assert len(grown._windows["s"].seqs) == 11
        assert grown.next_sequence("s") == last
        await windows.span("s", 5, last, None)  # the carried point moved on
        _accounted(windows)
        assert windows._windows["s"].seqs[0] == 6
        windows.forget("s")
        assert windows.nbytes == 0 and windows.get("s") is None

    asyncio.run(main())


def test_a_window_that_cannot_be_extended_starts_again_from_the_log() -> None:
    async def main() -> None:
        store = await open_store("memory://")
        last = await _session(store, "s", 6, 10)
        windows = Windows(store)
        await windows.span("s", 0, last - 2, None)
        gap = [SimpleNamespace(sequence=last, type=ITEM_APPENDED)]  # one event in between unseen
        windows.extend("s", gap, [], [])  # type: ignore[arg-type]
        assert windows.next_sequence("s") == last - 1  # not taken: another worker wrote
        span = await windows.span("s", 0, last, None)  # read from the log instead
        assert [item.seq for item in span.items[: span.end]] == list(range(1, last + 1))
        other = await windows.span("s", 0, last, "another-counter")  # counted another way
        assert other.window.counter == "another-counter" and other.end == last
        _accounted(windows)

    asyncio.run(main())


@pytest.mark.parametrize("value", [-1, True, 1.5])
def test_bounds_are_non_negative_ints(value: object) -> None:
    with pytest.raises(ArgumentError, match="max_bytes"):
        Windows(None, max_bytes=value)  # type: ignore[arg-type]
