"""The PostgreSQL statements of the history reader and the token counts (ADR 0011).

``fn(conn, *args)`` on the caller's transaction connection or a pooled one,
like every statement of ``postgres.py``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from psycopg import AsyncConnection

from ..core import slices
from . import _batch_rows, _rows
from .events import FORMAT_VERSION

Conn = AsyncConnection[Any]
_COLS = _rows.EVENT_COLUMN_LIST
_ITEM_COLS = ", ".join(f"e.{c}" for c in _rows.EVENT_COLUMNS)
_READ_COLS = ", ".join(f"e.{c}" for c in _batch_rows.ITEM_COLUMNS)


#: Rows converted per fetch of a long result (``fetch_rows``).
FETCH_ROWS = 1024


async def fetch_rows(cur: Any) -> list[tuple[Any, ...]]:
    """``cur.fetchall()``, the driver converting ``FETCH_ROWS`` rows a call and the event loop
    given back between calls once a slice's time has passed (``core.slices``): the rows of a
    long history are converted on the loop."""
    rows: list[tuple[Any, ...]] = []
    clock = time.perf_counter
    until = clock() + slices.SLICE_SECONDS
    while True:
        part = await cur.fetchmany(FETCH_ROWS)
        rows.extend(part)
        if len(part) < FETCH_ROWS:
            return rows
        if clock() >= until:
            await slices.give_back()
            until = clock() + slices.SLICE_SECONDS


async def read_items(
    conn: Conn, session_id: str, after: int, before: int | None, counter: str | None
) -> tuple[list[tuple[Any, ...]], dict[Any, Any] | None]:
    """Item rows of the range (and every unknown or newer row in it): ``_batch_rows.ITEM_COLUMNS``
    and the session's last sequence now (``_batch_rows.TAIL``); and the range's counts under
    ``counter`` by sequence (``None`` without a counter), in the same pipeline."""
    sql = (
        f"SELECT {_READ_COLS}, (SELECT t.sequence FROM ctxengine_events t WHERE t.session_id = %s "
        "ORDER BY t.sequence DESC LIMIT 1) FROM ctxengine_events e "
        "WHERE e.session_id = %s AND e.sequence > %s"
        + (" AND e.sequence < %s" if before is not None else "")
        + " AND (e.type = %s OR NOT (e.type = ANY(%s)) OR e.schema_version > %s) ORDER BY e.sequence"
    )
    upper = [before] if before is not None else []
    params = [
        session_id,
        session_id,
        after,
        *upper,
        _batch_rows.ITEM_TYPE,
        list(_rows.KNOWN_TYPES),
        FORMAT_VERSION,
    ]
    if counter is None:
        cur = await conn.execute(sql, params)
        return await fetch_rows(cur), None
    async with conn.pipeline():
        cur = await conn.execute(sql, params)
        counted = await conn.execute(
            _batch_rows.counts_sql("%s", before),
            _batch_rows.counts_params(session_id, counter, after, before),
        )
    rows = await fetch_rows(cur)
    return rows, dict(await fetch_rows(counted))


#: The smallest sequence of a row of an unknown type or a newer format in a session (see
#: ``sqlite_items.ANOMALY_FLOOR``; the function is in ``postgres_ddl``), as a CTE the
#: typed reads join, so that the check and the read take one round trip.
FLOOR = "WITH floor AS (SELECT ctxengine_anomaly_floor(%(s)s, %(known)s, %(v)s) AS f)"
_PAGE = 64


def _clean(floor: object, before: int | None) -> bool:
    return floor is None or (before is not None and isinstance(floor, int) and floor >= before)


async def read_typed(
    conn: Conn, session_id: str, after: int, before: int | None, types: tuple[str, ...]
) -> tuple[list[tuple[Any, ...]] | None, int | None]:
    """The rows of ``types`` in the range through the type index (``None`` when a row of an
    unknown type or a newer format lies below ``before``: the caller then reads precisely),
    and the session's last sequence in the statement's snapshot (``None``: no events)."""
    upper = " AND e.sequence < %(b)s" if before is not None else ""
    # One branch per type, each a range of the type index: with "type = ANY(...)" the planner
    # took the sequence range and filtered every row after ``after`` (a plan read after
    # the session's first plan walked the whole session, every turn).
    each = " UNION ALL ".join(
        f"(SELECT * FROM ctxengine_events e WHERE e.session_id = %(s)s AND e.type = %(t{i})s "
        f"AND e.sequence > %(a)s{upper})"
        for i in range(len(types))
    )
    if not types:
        return None, None  # nothing to read by type: the precise read (it still fails closed)
    sql = (
        "WITH floor AS (SELECT ctxengine_anomaly_floor(%(s)s, %(known)s, %(v)s) AS f, "
        "(SELECT max(t.sequence) FROM ctxengine_events t WHERE t.session_id = %(s)s) AS tail) "
        f"SELECT floor.f, floor.tail, {_ITEM_COLS} FROM floor LEFT JOIN LATERAL ({each}) e ON true "
        "ORDER BY e.sequence"
    )
    params = _params(session_id, a=after, b=before, **{f"t{i}": t for i, t in enumerate(types)})
    cur = await conn.execute(sql, params)
    rows = await fetch_rows(cur)
    tail = rows[0][1] if rows else None
    if not rows or not _clean(rows[0][0], before):
        return None, tail
    return [tuple(r[2:]) for r in rows if r[3] is not None], tail


async def latest_typed(
    conn: Conn, session_id: str, before: int, event_type: str, visible: Any
) -> tuple[bool, tuple[Any, ...] | None]:
    """``(True, the newest row of event_type below before that visible(row) accepts)`` through
    the type index, or ``(False, None)`` when the fail-closed rule needs the precise read."""
    sql = (
        f"{FLOOR} SELECT floor.f, {_ITEM_COLS} FROM floor LEFT JOIN LATERAL ("
        "SELECT * FROM ctxengine_events e WHERE e.session_id = %(s)s AND e.type = %(t)s "
        "AND e.sequence < %(b)s "
        "ORDER BY e.sequence DESC LIMIT 1) e ON true"
    )
    cur = await conn.execute(sql, _params(session_id, b=before, t=event_type))
    rows = await cur.fetchall()
    if not rows or not _clean(rows[0][0], before):
        return False, None
    # The newest row alone first (it is usually the answer, and payloads such as carries are
    # large); then pages of _PAGE.
    limit = 1
    while True:
        page = [tuple(r[1:]) for r in rows if r[2] is not None]
        for row in page:
            if visible(row):
                return True, row
        if len(page) < limit:
            return True, None
        limit = _PAGE
        cur = await conn.execute(
            f"SELECT {_COLS} FROM ctxengine_events WHERE session_id = %s AND type = %s AND sequence < %s "
            f"ORDER BY sequence DESC LIMIT {_PAGE}",
            (session_id, event_type, page[-1][1]),
        )
        rows = [(None, *r) for r in await cur.fetchall()]


async def newest_typed(
    conn: Conn, session_id: str, before: int, types: tuple[str, ...]
) -> list[tuple[Any, ...]] | None:
    """The newest row of each of ``types`` below ``before`` (those there are, any visibility),
    in one statement through the type index; ``None`` when the fail-closed rule needs the
    precise read (as ``latest_typed``)."""
    newest = " UNION ALL ".join(
        f"(SELECT * FROM ctxengine_events e WHERE e.session_id = %(s)s AND e.type = %(t{i})s "
        "AND e.sequence < %(b)s ORDER BY e.sequence DESC LIMIT 1)"
        for i in range(len(types))
    )
    sql = f"{FLOOR} SELECT floor.f, {_ITEM_COLS} FROM floor LEFT JOIN LATERAL ({newest}) e ON true"
    params = _params(session_id, b=before, **{f"t{i}": t for i, t in enumerate(types)})
    cur = await conn.execute(sql, params)
    rows = await cur.fetchall()
    if not rows or not _clean(rows[0][0], before):
        return None
    return [tuple(r[1:]) for r in rows if r[2] is not None]


def _params(session_id: str, **extra: Any) -> dict[str, Any]:
    return {"s": session_id, "known": list(_rows.KNOWN_TYPES), "v": FORMAT_VERSION, **extra}


#: Insert-or-ignore of counts given as four arrays (session, sequence, counter, count).
INSERT_COUNTS = (
    "INSERT INTO ctxengine_token_counts (session_id, sequence, counter, count) "
    "SELECT * FROM unnest(%(cs)s::text[], %(cq)s::bigint[], %(cc)s::text[], %(cn)s::bigint[]) "
    "ON CONFLICT (session_id, sequence, counter) DO NOTHING"
)

#: Counts put inside the store's open transaction and not yet sent: ``(conn, rows)``.
#: They travel with the transaction's next checkpoint write (one statement), or on their
#: own before any other statement, a savepoint or the commit (ADR 0011).
DEFERRED: ContextVar[tuple[Conn, list[tuple[str, int, str, int]]] | None] = ContextVar(
    "ctxengine.postgres.deferred_counts", default=None
)


@contextmanager
def deferring(conn: Conn) -> Iterator[None]:
    """Defer the counts put inside the transaction just opened on ``conn``."""
    token = DEFERRED.set((conn, []))
    try:
        yield
    finally:
        DEFERRED.reset(token)


def take_deferred(conn: Conn) -> dict[str, list[Any]] | None:
    """The deferred counts of ``conn``'s transaction as ``INSERT_COUNTS`` parameters (now
    taken: the caller sends them), or ``None``."""
    held = DEFERRED.get()
    if held is None or held[0] is not conn or not held[1]:
        return None
    rows = list(held[1])
    held[1].clear()
    return {
        "cs": [r[0] for r in rows],
        "cq": [r[1] for r in rows],
        "cc": [r[2] for r in rows],
        "cn": [r[3] for r in rows],
    }


def drop_deferred(conn: Conn) -> None:
    """Forget the deferred counts (what put them is being rolled back)."""
    held = DEFERRED.get()
    if held is not None and held[0] is conn:
        held[1].clear()


async def flush_deferred(conn: Conn) -> None:
    params = take_deferred(conn)
    if params is not None:
        await conn.execute(INSERT_COUNTS, params)


async def put_counts(conn: Conn, session_id: str, counter: str, counts: list[tuple[int, int]]) -> None:
    held = DEFERRED.get()
    if held is not None and held[0] is conn:
        held[1].extend((session_id, s, counter, n) for s, n in counts)
        return
    # One statement for the batch: the sequences and counts travel as arrays.
    rows = {"cs": [session_id] * len(counts), "cq": [s for s, _ in counts], "cc": [counter] * len(counts)}
    await conn.execute(INSERT_COUNTS, {**rows, "cn": [n for _, n in counts]})


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


__all__ = [
    "DEFERRED",
    "FLOOR",
    "INSERT_COUNTS",
    "deferring",
    "drop_deferred",
    "flush_deferred",
    "take_deferred",
    "latest_typed",
    "newest_typed",
    "prune",
    "put_counts",
    "read_items",
    "read_typed",
    "visibilities",
]
