"""The history reader keeps within ``max_items`` and ``max_bytes`` (the estimated memory of
its rows and items): a worker taking turns of many sessions otherwise held every window it
had read, up to 200,000 items whatever their size. Its accounting stays exact through
reads, extensions, retractions and a carried point that moves on."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ctxengine.errors import ArgumentError
from ctxengine.model import AssistantMessage, UserMessage
from ctxengine.runtime.history_reader import HistoryReader, row_bytes, row_sizes
from ctxengine.runtime.session import append_item
from ctxengine.stores import open_store


def _accounted(reader: HistoryReader) -> None:
    windows = list(reader._windows.values())
    for window in windows:
        assert window.nbytes == row_bytes(window.rows) == sum(window.sizes)
        assert window.sizes == row_sizes(window.rows)
        assert len(window.rows) == len(window.items) == len(window.seqs)
    assert reader._bytes == sum(w.nbytes for w in windows)
    assert reader._size == sum(len(w.rows) for w in windows)


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
        one = HistoryReader(store)
        await one.history("a", 0, lasts["a"], None)
        per_session = one._bytes
        assert per_session > 20 * 3 * 2_000  # the text three times, and the objects
        # Room for two and a half sessions: reading a third drops the least recently read.
        reader = HistoryReader(store, max_bytes=per_session * 5 // 2)
        for sid in ("a", "b", "a", "c"):
            rows, items = await reader.history(sid, 0, lasts[sid], None)
            assert [row.sequence for row in rows] == [item.seq for item in items]
            assert len(items) == 20
            _accounted(reader)
            assert reader._bytes <= reader.max_bytes
        assert list(reader._windows) == ["a", "c"]
        reads = reader.reads
        await reader.history("a", 0, lasts["a"], None)  # still held: no read
        assert reader.reads == reads
        await reader.history("b", 0, lasts["b"], None)  # dropped: read again
        assert reader.reads == reads + 1
        _accounted(reader)
        # The same reads within the count bound and the default byte bound keep all four.
        roomy = HistoryReader(store)
        for sid in lasts:
            await roomy.history(sid, 0, lasts[sid], None)
        assert list(roomy._windows) == list(lasts)
        _accounted(roomy)

    asyncio.run(main())


def test_accounting_through_extend_retract_and_a_moved_carried_point() -> None:
    async def main() -> None:
        store = await open_store("memory://")
        last = await _session(store, "s", 12, 300)
        reader = HistoryReader(store)
        full = await reader.history("s", 0, last, None)
        fresh = HistoryReader(store)
        await fresh.history("s", 0, last - 2, None)
        _accounted(fresh)
        await fresh.history("s", 0, last, None)  # the window grows by a read
        _accounted(fresh)
        assert fresh._bytes == reader._bytes
        grown = HistoryReader(store)
        await grown.history("s", 0, last - 2, None)
        rows, items = full[0][-2:], full[1][-2:]
        grown.extend("s", [row.sequence for row in rows], rows, items)  # a commit of two
        _accounted(grown)
        assert grown._bytes == reader._bytes
        grown.retract("s", last)  # its last event was not committed after all
        _accounted(grown)
        assert len(grown._windows["s"].rows) == 11
        await reader.history("s", 5, last, None)  # the carried point moved on
        _accounted(reader)
        assert reader._windows["s"].seqs[0] == 6
        reader.forget("s")
        _accounted(reader)
        assert reader._bytes == reader._size == 0

    asyncio.run(main())


@pytest.mark.parametrize(
    ("name", "value"), [("max_items", -1), ("max_items", True), ("max_bytes", -1), ("max_bytes", 1.5)]
)
def test_bounds_are_non_negative_ints(name: str, value: object) -> None:
    with pytest.raises(ArgumentError, match=name):
        HistoryReader(None, **{name: value})  # type: ignore[arg-type]
