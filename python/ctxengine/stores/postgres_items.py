"""The PostgreSQL statements of the history reader and the token counts (ADR 0011).

``fn(conn, *args)`` on the caller's transaction connection or a pooled one,
like every statement of ``postgres.py``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection, errors

from ..errors import StoreError
from . import _batch_rows, _rows
from .events import FORMAT_VERSION, NewEvent

Conn = AsyncConnection[Any]
_COLS = ", ".join(_rows.EVENT_COLUMNS)
_ITEM_COLS = ", ".join(f"e.{c}" for c in _rows.EVENT_COLUMNS)


async def append_all(
    conn: Conn, news: list[NewEvent], texts: list[str], created_at: datetime
) -> list[tuple[Any, bool]]:
    """A batch of one session's events under the session's append lock: repeats found by
    key, the rest inserted in one pipelined statement; a lost sequence race starts over."""
    from .postgres import MAX_APPEND_ATTEMPTS, SESSION_LOCK_CLASS  # postgres.py imports this module

    session_id = news[0].session_id
    keys = sorted({new.derivation_key for new in news})
    for _ in range(MAX_APPEND_ATTEMPTS):
        try:
            async with conn.transaction():  # a savepoint inside a caller's transaction
                await conn.execute(
                    "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (SESSION_LOCK_CLASS, session_id)
                )
                cur = await conn.execute(
                    f"SELECT {_COLS}, (SELECT COALESCE(MAX(sequence), 0) FROM ctxengine_events "
                    "WHERE session_id = %s) FROM ctxengine_events WHERE session_id = %s "
                    "AND derivation_key = ANY(%s)",
                    (session_id, session_id, keys),
                )
                found = await cur.fetchall()
                if found:
                    last = int(found[0][-1])
                else:
                    cur = await conn.execute(
                        "SELECT COALESCE(MAX(sequence), 0) FROM ctxengine_events WHERE session_id = %s",
                        (session_id,),
                    )
                    row = await cur.fetchone()
                    assert row is not None
                    last = int(row[0])
                stored = {r[4]: tuple(r[:-1]) for r in found}
                results, inserts = _batch_rows.plan_batch(news, texts, stored, last, created_at)
                if inserts:
                    async with conn.cursor() as insert:
                        await insert.executemany(
                            f"INSERT INTO ctxengine_events ({_COLS}) "
                            f"VALUES ({', '.join(['%s'] * len(_rows.EVENT_COLUMNS))})",
                            inserts,
                        )
                return results
        except errors.UniqueViolation:
            await asyncio.sleep(0)
    raise StoreError(
        f"session {session_id!r}: a batch append lost {MAX_APPEND_ATTEMPTS} sequence races in a row"
    )


async def read_items(
    conn: Conn, session_id: str, after: int, before: int | None, counter: str | None
) -> list[tuple[Any, ...]]:
    """Item rows of the range (and every unknown or newer row in it), each with its count."""
    params: list[Any] = []
    if counter is None:
        sql = f"SELECT {_ITEM_COLS}, NULL FROM ctxengine_events e"
    else:
        sql = (
            f"SELECT {_ITEM_COLS}, c.count FROM ctxengine_events e LEFT JOIN ctxengine_token_counts c "
            "ON c.session_id = e.session_id AND c.sequence = e.sequence AND c.counter = %s"
        )
        params.append(counter)
    sql += (
        " WHERE e.session_id = %s AND e.sequence > %s"
        + (" AND e.sequence < %s" if before is not None else "")
        + " AND (e.type = %s OR NOT (e.type = ANY(%s)) OR e.schema_version > %s) ORDER BY e.sequence"
    )
    params += [session_id, after, *([before] if before is not None else [])]
    params += [_batch_rows.ITEM_TYPE, list(_rows.KNOWN_TYPES), FORMAT_VERSION]
    cur = await conn.execute(sql, params)
    rows: list[tuple[Any, ...]] = await cur.fetchall()
    return rows


async def put_counts(conn: Conn, session_id: str, counter: str, counts: list[tuple[int, int]]) -> None:
    # One statement for the batch: the sequences and counts travel as two arrays.
    await conn.execute(
        "INSERT INTO ctxengine_token_counts (session_id, sequence, counter, count) "
        "SELECT %s, s, %s, n FROM unnest(%s::bigint[], %s::bigint[]) AS t(s, n) "
        "ON CONFLICT (session_id, sequence, counter) DO NOTHING",
        (session_id, counter, [s for s, _ in counts], [n for _, n in counts]),
    )


async def visibilities(
    conn: Conn, session_id: str, event_type: str, after: int, through: int
) -> list[tuple[Any, Any]]:
    cur = await conn.execute(
        "SELECT DISTINCT visibility_scope, visibility_id FROM ctxengine_events "
        "WHERE session_id = %s AND type = %s AND sequence > %s AND sequence <= %s",
        (session_id, event_type, after, through),
    )
    rows: list[tuple[Any, Any]] = await cur.fetchall()
    return rows


async def prune(conn: Conn, run_id: str, before_version: int) -> int:
    cur = await conn.execute(
        "DELETE FROM ctxengine_checkpoints WHERE run_id = %s AND version < %s", (run_id, before_version)
    )
    return int(cur.rowcount)


__all__ = ["append_all", "prune", "put_counts", "read_items", "visibilities"]
