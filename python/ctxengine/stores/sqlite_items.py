"""The SQLite statements of the history reader and the token counts (ADR 0011).

They run on the store's worker thread, like every statement of ``sqlite.py``:
``fn(conn, own_transaction, *args)``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from . import _batch_rows, _rows
from .events import FORMAT_VERSION, NewEvent

R = TypeVar("R")
_COLS = _rows.EVENT_COLUMN_LIST
_MARKS = ", ".join("?" * len(_rows.EVENT_COLUMNS))
_READ_COLS = ", ".join(f"e.{c}" for c in _batch_rows.ITEM_COLUMNS)


def in_write_txn(conn: sqlite3.Connection, own: bool, body: Callable[[], R]) -> R:
    """Run ``body`` in a ``BEGIN IMMEDIATE`` transaction, or in the caller's when ``own`` is False."""
    if not own:
        return body()
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = body()
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result


def append_all(
    conn: sqlite3.Connection, own: bool, news: list[NewEvent], texts: list[str], created_at: str
) -> list[tuple[Any, bool]]:
    """A batch of one session's events: repeats found by key, the rest inserted in one go."""
    session_id = news[0].session_id
    keys = sorted({new.derivation_key for new in news})

    def body() -> list[tuple[Any, bool]]:
        stored = {
            row[4]: row
            for row in conn.execute(
                f"SELECT {_COLS} FROM ctxengine_events WHERE session_id = ? "
                f"AND derivation_key IN ({', '.join('?' * len(keys))})",
                (session_id, *keys),
            )
        }
        (last,) = conn.execute(
            "SELECT COALESCE(MAX(sequence), 0) FROM ctxengine_events WHERE session_id = ?", (session_id,)
        ).fetchone()
        results, inserts = _batch_rows.plan_batch(news, texts, stored, int(last), created_at)
        if inserts:
            conn.executemany(
                f"INSERT INTO ctxengine_events ({_COLS}) VALUES ({_MARKS})",
                inserts,
            )
        return results

    return in_write_txn(conn, own, body)


def items_query(session_id: str, after: int, before: int | None) -> tuple[str, list[Any]]:
    """The statement and parameters of ``read_items``' item rows (``_batch_rows.ITEM_COLUMNS``,
    then the session's last sequence, ``_batch_rows.TAIL``)."""
    known = _rows.KNOWN_TYPES
    sql = (
        f"SELECT {_READ_COLS}, (SELECT MAX(t.sequence) FROM ctxengine_events t WHERE t.session_id = ?) "
        "FROM ctxengine_events e WHERE e.session_id = ? AND e.sequence > ?"
        + (" AND e.sequence < ?" if before is not None else "")
        + f" AND (e.type = ? OR e.type NOT IN ({', '.join('?' * len(known))}) OR e.schema_version > ?)"
        " ORDER BY e.sequence"
    )
    upper = [before] if before is not None else []
    return sql, [session_id, session_id, after, *upper, _batch_rows.ITEM_TYPE, *known, FORMAT_VERSION]


def read_items(
    conn: sqlite3.Connection, own: bool, session_id: str, after: int, before: int | None, counter: str | None
) -> tuple[list[tuple[Any, ...]], dict[Any, Any] | None]:
    """Item rows of the range (and every unknown or newer row in it): ``_batch_rows.ITEM_COLUMNS``
    and the session's last sequence now (``_batch_rows.TAIL``); and the range's counts under
    ``counter`` by sequence (``None`` without a counter)."""
    sql, params = items_query(session_id, after, before)
    rows = conn.execute(sql, params).fetchall()
    if counter is None:
        return rows, None
    counts = conn.execute(
        _batch_rows.counts_sql("?", before), _batch_rows.counts_params(session_id, counter, after, before)
    )
    return rows, dict(counts.fetchall())


_KNOWN = ", ".join(f"'{t}'" for t in _rows.KNOWN_TYPES)
#: The smallest sequence of a row of an unknown type or a newer format in a session: a loose
#: index scan of the session's distinct types (one index seek per type) and a seek in the
#: format-version index (``sqlite_ddl``), instead of a scan of the whole session.
ANOMALY_FLOOR = f"""
WITH RECURSIVE kinds(type) AS (
    SELECT (SELECT MIN(type) FROM ctxengine_events WHERE session_id = :s)
    UNION ALL
    SELECT (SELECT MIN(type) FROM ctxengine_events WHERE session_id = :s AND type > kinds.type)
    FROM kinds WHERE kinds.type IS NOT NULL
)
SELECT MIN(m) FROM (
    SELECT (SELECT MIN(sequence) FROM ctxengine_events WHERE session_id = :s AND type = kinds.type) AS m
    FROM kinds WHERE kinds.type IS NOT NULL AND kinds.type NOT IN ({_KNOWN})
    UNION ALL
    SELECT MIN(sequence) FROM ctxengine_events INDEXED BY ctxengine_events_by_version
    WHERE session_id = :s AND schema_version > {FORMAT_VERSION}
)
"""


def clean_below(conn: sqlite3.Connection, session_id: str, before: int | None) -> bool:
    """True when no row of the session below ``before`` (at all, when ``None``) has an unknown
    type or a newer format: a typed read of that range may then use the type index alone (the
    fail-closed rule of ADR 0009 has nothing to fetch)."""
    (floor,) = conn.execute(ANOMALY_FLOOR, {"s": session_id}).fetchone()
    return floor is None or (before is not None and floor >= before)


def put_counts(
    conn: sqlite3.Connection, own: bool, session_id: str, counter: str, counts: list[tuple[int, int]]
) -> None:
    def body() -> None:
        conn.executemany(
            "INSERT INTO ctxengine_token_counts (session_id, sequence, counter, count) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (session_id, sequence, counter) DO NOTHING",
            [(session_id, sequence, counter, count) for sequence, count in counts],
        )

    in_write_txn(conn, own, body)


def visibilities(
    conn: sqlite3.Connection, own: bool, session_id: str, event_type: str, after: int, through: int
) -> list[tuple[Any, Any]]:
    return conn.execute(
        "SELECT DISTINCT visibility_scope, visibility_id FROM ctxengine_events "
        "WHERE session_id = ? AND type = ? AND sequence > ? AND sequence <= ?",
        (session_id, event_type, after, through),
    ).fetchall()


def prune(conn: sqlite3.Connection, own: bool, run_id: str, before_version: int) -> int:
    def body() -> int:
        cursor = conn.execute(
            "DELETE FROM ctxengine_checkpoints WHERE run_id = ? AND version < ?", (run_id, before_version)
        )
        return int(cursor.rowcount)

    return in_write_txn(conn, own, body)


__all__ = [
    "ANOMALY_FLOOR",
    "append_all",
    "in_write_txn",
    "clean_below",
    "prune",
    "put_counts",
    "items_query",
    "read_items",
    "visibilities",
]
