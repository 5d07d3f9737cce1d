"""A seed's item rows read and decoded in one native pass (ADR 0014).

A fresh worker's first request reads about a window of item rows. Through
Python's ``sqlite3`` every row becomes a tuple of column objects, its
payload a ``str``, then the rows are checked in Python and the payloads
decoded natively: a third of a cold 1,000-item first request. The native
reader (``ctxengine._core._SqliteReader``, a read-only connection on the very
SQLite library Python's ``sqlite3`` runs on) steps through the same
statement (``sqlite_items.items_query``) without the GIL, then decodes each
payload into the item; the rows keep no payload text.

It takes only the plain case and answers ``None`` at anything else (a row
of another type or a newer format, a column of an unexpected type, a
payload that does not decode, an odd count, a busy or failing read), so
the caller reads the range again through ``read_items``, which raises
exactly what it raised before. These run on the store's worker thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.decode import read_native_window, sqlite_reader
from ..model import ConversationItem
from ._batch_rows import ITEM_TYPE, counts_params, counts_sql
from ._sql import SqlEventLog
from .events import (
    FORMAT_VERSION,
    MAX_VISIBILITY_CLASSES,
    VISIBILITY_CLASSES,
    ItemRow,
    Visibility,
)
from .sqlite_items import items_query

#: The native reader's busy timeout is SQLite's int of milliseconds.
_MAX_BUSY_MS = (1 << 31) - 1


def open_reader(path: str, busy_timeout: float, cache_kib: int) -> Any | None:
    """The native reader of the store's file, or ``None`` (no extension, its SQLite out of
    reach, or a database that is not a file another connection could open)."""
    if path in ("", ":memory:") or path.startswith("file:"):
        return None
    return sqlite_reader(path, min(int(busy_timeout * 1000), _MAX_BUSY_MS), cache_kib)


def read_window(
    reader: Any,
    session_id: str,
    after: int,
    before: int | None,
    counter: str | None,
    extra: Mapping[str, object] | None,
) -> tuple[list[ItemRow], list[ConversationItem], list[int], int | None] | None:
    """``read_items``' rows of the range decoded, natively: ``(rows, items, the payloads'
    lengths, the session's last sequence)``; each row's ``payload`` is empty (not kept).
    ``None``: read the range through ``read_items``."""
    sql, params = items_query(session_id, after, before)
    if counter is None:
        csql, cparams = None, []
    else:
        csql, cparams = counts_sql("?", before), counts_params(session_id, counter, after, before)
    if len(VISIBILITY_CLASSES) >= MAX_VISIBILITY_CLASSES:  # (as ``_batch_rows.item_rows``)
        VISIBILITY_CLASSES.clear()
    found: tuple[list[ItemRow], list[ConversationItem], list[int], int | None] | None
    found = read_native_window(
        reader,
        sql,
        params,
        csql,
        cparams,
        ITEM_TYPE,
        FORMAT_VERSION,
        ItemRow,
        Visibility,
        VISIBILITY_CLASSES,
        extra=extra,
    )
    return found


class NativeReads:
    """A store's native reader: opened on its first read (after the store's own connection
    has created or checked the file), closed with the store; all on the store's thread."""

    def __init__(self, path: str, busy_timeout: float, cache_kib: int) -> None:
        self._args = (path, busy_timeout, cache_kib)
        self._reader: Any | None = None
        self._opened = False

    @property
    def reader(self) -> Any | None:
        """The reader once opened (``None`` before, after closing, or without one)."""
        return self._reader

    def read(
        self, session_id: str, after: int, before: int | None, counter: str | None, extra: Any
    ) -> tuple[list[ItemRow], list[ConversationItem], list[int], int | None] | None:
        """``read_window`` on the reader (opened now, the first time); ``None`` without one."""
        if not self._opened:
            self._opened = True
            self._reader = open_reader(*self._args)
        if self._reader is None:
            return None
        return read_window(self._reader, session_id, after, before, counter, extra)

    def close(self) -> None:
        self._opened = True
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()


class WindowReads(SqlEventLog):
    """The SQLite event log's ``read_decoded`` (the store's ``_read_window`` runs
    ``NativeReads.read`` on its thread, outside its transactions)."""

    async def read_decoded(
        self,
        session_id: str,
        after: int = 0,
        *,
        before: int | None = None,
        counter: str | None = None,
        extra: Mapping[str, object] | None = None,
    ) -> tuple[list[ItemRow], list[ConversationItem], list[int]] | None:
        """``read_items`` and the rows' items (``decode_stored_items(..., extra=extra)``) in one
        native pass, with the payloads' lengths; the rows keep no payload text (ADR 0014).
        ``None``: nothing read — read the range through ``read_items``."""
        self._check_read("EventLog.read_decoded", session_id, after, before, counter)
        found = await self._s._read_window(session_id, after, before, counter, extra)
        if found is None:
            return None
        rows, items, lengths, tail = found
        if type(tail) is int:
            self._saw(session_id, tail)
        return rows, items, lengths


__all__ = ["NativeReads", "WindowReads", "open_reader", "read_window"]
