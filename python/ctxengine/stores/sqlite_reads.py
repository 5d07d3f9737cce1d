"""The SQLite event log's typed reads: a range, a range with the session's tail, and the
latest event of a type before a sequence (ADR 0009: each fails closed on a row of an
unknown type or a newer format in its range). They run on the store's worker thread, like
every statement of ``sqlite.py``: ``fn(conn, own_transaction, *args)``. A range is fetched
there and decoded on the event loop in slices (``SqlEventLog.read``: ``decode_events_steps``,
as the memory and PostgreSQL stores decode theirs, ADR 0028), not in one stretch on the
worker thread, which holds the GIL throughout.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ..model import Principal
from . import _rows, sqlite_items
from .events import FORMAT_VERSION, Event

_EVENT_COLS = _rows.EVENT_COLUMN_LIST


def read(
    conn: sqlite3.Connection,
    own: bool,
    session_id: str,
    after: int,
    before: int | None,
    types: tuple[str, ...] | None,
) -> list[_rows.Row]:
    """The stored rows of the range (``types``' and those no type filter may pass over), in
    sequence order, undecoded."""
    # No row of an unknown type or a newer format in the range: the type index answers.
    by_type = types is not None and sqlite_items.clean_below(conn, session_id, before)
    index = " INDEXED BY ctxengine_events_by_type" if by_type else ""
    sql = f"SELECT {_EVENT_COLS} FROM ctxengine_events{index} WHERE session_id = ? AND sequence > ?"
    params: list[Any] = [session_id, after]
    if before is not None:
        sql += " AND sequence < ?"
        params.append(before)
    if types is not None and by_type:
        sql += f" AND type IN ({', '.join('?' * len(types))})"
        params.extend(types)
    elif types is not None:
        # Rows of other types are passed over by SQL only when this code knows
        # them: an unknown type or a newer format is fetched and fails closed.
        known = _rows.KNOWN_TYPES
        sql += (
            f" AND (type IN ({', '.join('?' * len(types))}) OR type NOT IN ({', '.join('?' * len(known))})"
            " OR schema_version > ?)"
        )
        params.extend((*types, *known, FORMAT_VERSION))
    sql += " ORDER BY sequence"
    rows: list[_rows.Row] = conn.execute(sql, params).fetchall()
    return rows


def read_covering(
    conn: sqlite3.Connection, own: bool, session_id: str, after: int, types: tuple[str, ...]
) -> tuple[list[_rows.Row], int]:
    """``read`` of ``types`` after ``after``, and the session's last sequence when it ran:
    read first, so every event at or below it is committed and the read (bounded by it, in
    a snapshot taken after) sees them all."""
    (tail,) = conn.execute(
        "SELECT MAX(sequence) FROM ctxengine_events WHERE session_id = ?", (session_id,)
    ).fetchone()
    through = max(after, tail or 0)
    return read(conn, own, session_id, after, through + 1, types), through


def latest_each(
    conn: sqlite3.Connection,
    own: bool,
    session_id: str,
    before: int,
    types: tuple[str, ...],
    principal: Principal | None,
) -> tuple[Event | None, ...]:
    return tuple(latest_before(conn, own, session_id, before, t, principal) for t in types)


def latest_before(
    conn: sqlite3.Connection,
    own: bool,
    session_id: str,
    before: int,
    event_type: str,
    principal: Principal | None,
) -> Event | None:
    # Newest first; every row passed over is decoded, so a corrupt row
    # between the boundary and the visible answer still fails closed.
    known = _rows.KNOWN_TYPES
    if sqlite_items.clean_below(conn, session_id, before):
        # Nothing of an unknown type or a newer format below the boundary: the type index answers.
        cursor = conn.execute(
            f"SELECT {_EVENT_COLS} FROM ctxengine_events INDEXED BY ctxengine_events_by_type "
            "WHERE session_id = ? AND type = ? AND sequence < ? ORDER BY sequence DESC",
            (session_id, event_type, before),
        )
    else:
        cursor = conn.execute(
            f"SELECT {_EVENT_COLS} FROM ctxengine_events WHERE session_id = ? AND sequence < ? AND (type = ? "
            f"OR type NOT IN ({', '.join('?' * len(known))}) OR schema_version > ?) ORDER BY sequence DESC",
            (session_id, before, event_type, *known, FORMAT_VERSION),
        )
    try:
        for row in cursor:
            event = _rows.decode_event(row)
            if event.type == event_type and event.visibility.allows(principal):
                return event
        return None
    finally:
        cursor.close()


__all__ = ["latest_before", "latest_each", "read", "read_covering"]
