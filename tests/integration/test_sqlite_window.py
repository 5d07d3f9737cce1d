"""The SQLite store's native window read (ADR 0014): ``read_decoded`` answers exactly what
``read_items`` and ``decode_rows`` answer, on the SQLite library Python runs on, and takes
only the plain case — anything else is read again through Python, which raises what it
always raised.

Each test fails if the native read dropped, reordered or mis-decoded a row, mixed up a count
or a visibility class, served a read inside a transaction from another connection, or
swallowed an anomaly instead of handing it to the Python read.
"""

from __future__ import annotations

import _sqlite3
import asyncio
import sqlite3
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxengine as ce
from ctxengine import _core
from ctxengine.core import backends
from ctxengine.errors import ModelValidationError, StoreCorruption, StoreError, UnsupportedFormat
from ctxengine.model import ToolSpec
from ctxengine.runtime.history_reader import ROW_OBJECTS, HistoryReader
from ctxengine.runtime.session import (
    ITEM_APPENDED,
    decode_rows,
    item_event,
    item_payload,
    read_item_window,
    session_history,
)
from ctxengine.stores import SQLiteStore, _rows
from ctxengine.stores.events import NewEvent, Visibility
from ctxengine.stores.sqlite_window import open_reader, read_window
from strategies import items as any_items

SID = "window-session"
CLASSES = [Visibility.session(), Visibility.principal("p1"), Visibility.tenant("t1")]
T = TypeVar("T")


def run(make: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(make())  # type: ignore[arg-type]


async def _fill(
    store: SQLiteStore, items: list[Any], classes: list[int], sid: str = SID, key: str = "k"
) -> list[int]:
    news = [
        NewEvent(sid, ITEM_APPENDED, item_payload(item), f"{key}{i}", visibility=CLASSES[c])
        for i, (item, c) in enumerate(zip(items, classes, strict=True))
    ]
    events, _ = await store.events.append_all(news)
    return [e.sequence for e in events]


async def _python_read(store: SQLiteStore, after: int, before: int | None, counter: str | None) -> Any:
    rows = await store.events.read_items(SID, after, before=before, counter=counter)
    return rows, decode_rows(SID, rows)


def _same(found: Any, rows_py: list[Any], items_py: list[Any]) -> None:
    assert found is not None
    rows, items, lengths = found
    assert [(r.sequence, r.visibility, r.tokens) for r in rows] == [
        (r.sequence, r.visibility, r.tokens) for r in rows_py
    ]
    assert all(a.visibility is b.visibility for a, b in zip(rows, rows_py, strict=True))  # interned
    assert all(type(r) is type(rows_py[0]) and r.payload == "" for r in rows)
    assert lengths == [len(r.payload.encode("utf-8")) for r in rows_py]
    assert items == items_py
    assert [(type(i), i.seq, i._log, i._cj) for i in items] == [
        (type(i), i.seq, i._log, i._cj) for i in items_py
    ]


def _readable(item: Any) -> bool:
    """A conversation item the log takes (one that would not read back is refused)."""
    if isinstance(item, ToolSpec):
        return False
    try:
        new, _ = item_event(SID, item)
        _rows.probe_event(new, _rows.payload_text(new.payload), "2026-12-01T00:00:00+00:00")
    except ModelValidationError:
        return False
    return True


conversation_items = any_items.filter(_readable)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    items=st.lists(conversation_items, min_size=0, max_size=12),
    data=st.data(),
)
def test_native_read_equals_the_python_read(tmp_path: Path, items: list[Any], data: st.DataObject) -> None:
    classes = data.draw(st.lists(st.integers(0, 2), min_size=len(items), max_size=len(items)))
    counted = data.draw(st.lists(st.booleans(), min_size=len(items), max_size=len(items)))
    after = data.draw(st.integers(0, len(items) + 1))
    before = data.draw(st.none() | st.integers(0, len(items) + 2))
    counter = data.draw(st.sampled_from([None, "c1", "c2"]))
    path = tmp_path / f"w{uuid.uuid4().hex}.db"

    async def main() -> None:
        store = await SQLiteStore(path).open()
        try:
            seqs = await _fill(store, items, classes)
            await _fill(store, items[:2], classes[:2], sid="other-session")
            counts = [(s, 7 * s) for s, c in zip(seqs, counted, strict=True) if c]
            await store.events.put_counts(SID, "c1", counts)
            rows_py, items_py = await _python_read(store, after, before, counter)
            found = await store.events.read_decoded(
                SID, after, before=before, counter=counter, extra={"_log": SID}
            )
            _same(found, rows_py, items_py)
        finally:
            await store.close()

    run(main)


def test_the_library_is_the_one_python_runs_on() -> None:
    major, minor, patch = sqlite3.sqlite_version_info
    assert _core._sqlite_library_version(_sqlite3.__file__) == major * 1_000_000 + minor * 1_000 + patch
    # Another module's path is not looked through (the first one asked is the one kept).
    assert _core._sqlite_library_version("/nonexistent/_sqlite3.so") is None


def test_no_reader_for_a_database_no_other_connection_can_open() -> None:
    assert open_reader(":memory:", 1.0, 256) is None
    assert open_reader("", 1.0, 256) is None
    assert open_reader("file:x?mode=memory", 1.0, 256) is None


def _seeded(tmp_path: Path, n: int = 4) -> tuple[Path, list[int]]:
    path = tmp_path / "s.db"

    async def main() -> list[int]:
        async with SQLiteStore(path) as store:
            seqs = await _fill(store, [ce.UserMessage(f"m{i}") for i in range(n)], [0] * n)
            await store.events.put_counts(SID, "c1", [(s, 3) for s in seqs])
            return seqs

    return path, run(main)


def _corrupt(path: Path, sql: str, *args: Any) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA ignore_check_constraints = ON")
        conn.execute(sql, args)


ANOMALIES: list[tuple[str, str, tuple[Any, ...], type[Exception], str]] = [
    (
        "unknown type",
        "UPDATE ctxengine_events SET type = 'x.future' WHERE sequence = ?",
        (),
        StoreCorruption,
        "unknown event type",
    ),
    (
        "newer format",
        "UPDATE ctxengine_events SET schema_version = 99 WHERE sequence = ?",
        (),
        UnsupportedFormat,
        "newer|format",
    ),
    (
        "not canonical",
        "UPDATE ctxengine_events SET payload = ' ' || payload WHERE sequence = ?",
        (),
        StoreCorruption,
        "canonical",
    ),
    (
        "payload as bytes",
        "UPDATE ctxengine_events SET payload = CAST(payload AS BLOB) WHERE sequence = ?",
        (),
        StoreCorruption,
        "payload is bytes",
    ),
    (
        "bad scope",
        "UPDATE ctxengine_events SET visibility_scope = 'nobody' WHERE sequence = ?",
        (),
        StoreCorruption,
        "visibility",
    ),
    (
        "negative count",
        "UPDATE ctxengine_token_counts SET count = -1 WHERE sequence = ?",
        (),
        StoreCorruption,
        "token count",
    ),
    (
        "text count",
        "UPDATE ctxengine_token_counts SET count = 'x' WHERE sequence = ?",
        (),
        StoreCorruption,
        "token count",
    ),
]


@pytest.mark.parametrize(("name", "sql", "args", "error", "match"), ANOMALIES, ids=[a[0] for a in ANOMALIES])
def test_an_anomaly_is_read_through_python_and_raises_as_before(
    tmp_path: Path, name: str, sql: str, args: tuple[Any, ...], error: type[Exception], match: str
) -> None:
    path, seqs = _seeded(tmp_path)
    _corrupt(path, sql, seqs[2], *args)

    async def main() -> None:
        async with SQLiteStore(path) as store:
            assert await store.events.read_decoded(SID, 0, counter="c1") is None
            with pytest.raises(error, match=match) as python:
                decode_rows(SID, await store.events.read_items(SID, 0, counter="c1"))
            with pytest.raises(error, match=match) as through:
                await read_item_window(store, SID, 0, seqs[-1] + 1, "c1")
            assert str(through.value) == str(python.value)
            # A range below the anomaly is still read natively.
            below = await store.events.read_decoded(SID, 0, before=seqs[2], counter="c1")
            assert below is not None and [r.sequence for r in below[0]] == seqs[:2]

    run(main)


def test_inside_a_transaction_reads_go_through_its_connection(tmp_path: Path) -> None:
    path, seqs = _seeded(tmp_path)

    async def main() -> None:
        async with SQLiteStore(path) as store:
            async with store.transaction():
                await _fill(store, [ce.UserMessage("uncommitted")], [0], key="u")
                assert await store.events.read_decoded(SID, 0) is None
                _, items, lengths = await read_item_window(store, SID, 0, 100, None)
                assert lengths is None  # the Python read: the rows hold their payloads
                assert [i.content for i in items][-1] == "uncommitted"
            async with store.predicted(SID, seqs[-1] + 2, "r", 1):
                assert await store.events.read_decoded(SID, 0) is None
            found = await store.events.read_decoded(SID, 0)
            assert found is not None and [i.content for i in found[1]][-1] == "uncommitted"

    run(main)


def test_the_reader_closes_with_the_store(tmp_path: Path) -> None:
    path, _ = _seeded(tmp_path)

    async def main() -> None:
        store = await SQLiteStore(path).open()
        assert store._native.reader is None  # opened on the first read
        assert await store.events.read_decoded(SID, 0) is not None
        reader = store._native.reader
        assert reader is not None
        await store.close()
        assert store._native.reader is None
        with pytest.raises(StoreError, match="closed"):
            await store.events.read_decoded(SID, 0)
        # A closed reader answers nothing (its connection is gone).
        assert read_window(reader, SID, 0, None, None, None) is None

    run(main)


def test_the_python_backend_reads_through_python(tmp_path: Path) -> None:
    path, _ = _seeded(tmp_path)

    async def main() -> None:
        async with SQLiteStore(path) as store:
            before = backends.backend()
            backends.use_backend("python")
            try:
                assert await store.events.read_decoded(SID, 0) is None
            finally:
                backends.use_backend(before)
            assert await store.events.read_decoded(SID, 0) is not None

    run(main)


def test_a_window_read_natively_is_accounted_without_payload_text(tmp_path: Path) -> None:
    path = tmp_path / "a.db"

    async def main() -> None:
        async with SQLiteStore(path) as store:
            texts = ["ascii " * 20, "é€𝄞 " * 10, "x"]
            seqs = await _fill(store, [ce.UserMessage(t) for t in texts], [0, 1, 2])
            rows_py = await store.events.read_items(SID, 0)
            reader = HistoryReader(store)
            rows, _ = await reader.history(SID, 0, seqs[-1], None)
            window = reader._windows[SID]
            assert [r.payload for r in rows] == ["", "", ""]
            assert window.sizes == [ROW_OBJECTS + 2 * len(r.payload.encode("utf-8")) for r in rows_py]
            assert window.nbytes == reader._bytes == sum(window.sizes)
            principal = ce.Principal("p1", "t1")
            visible = await session_history(store, SID, seqs[-1] + 1, principal=principal)
            assert visible == [
                i
                for r, i in zip(rows_py, decode_rows(SID, rows_py), strict=True)
                if r.visibility.allows(principal)
            ]

    run(main)
