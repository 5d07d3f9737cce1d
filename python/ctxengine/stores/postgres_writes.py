"""PostgreSQL writes in one statement each (issue 13, ADR 0011).

An append used to take a savepoint, the session lock, a lookup of the key, the
session's greatest sequence, the insert and a release: six round trips, and
a transaction of its own outside a caller's. A checkpoint write took five.
Here each is one statement: CTEs take the lock, find the keys already stored
and the next sequence (or lock the lease row and find the next version), and
insert. Outside a caller's transaction the statement is its own transaction,
and a lost sequence race (its snapshot predates a writer it waited for) undoes
it whole and it is retried. Inside a caller's transaction the first append to
a session takes the session lock in a statement of its own, so every later
statement sees every earlier writer and no race is left to lose: no
savepoint is needed (a writer that does not take the lock, a build from
before it, can still win; the caller's transaction is then lost and
``StoreUnavailable`` says to retry it). The rules are unchanged: appends are
idempotent on their derivation keys and keep their order, a batch goes in
whole or not at all, a checkpoint write needs the run's current lease and,
for a delta, a full snapshot before it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection, errors
from psycopg.pq import TransactionStatus

from ..errors import StoreError, StoreUnavailable
from . import _rows, postgres_items
from .events import Lease, NewEvent

Conn = AsyncConnection[Any]
_COLS = _rows.EVENT_COLUMN_LIST

APPEND = f"""
WITH lk AS MATERIALIZED (SELECT pg_advisory_xact_lock(%(cls)s, hashtext(%(s)s)) AS l),
prev AS MATERIALIZED (
    SELECT e.* FROM ctxengine_events e, lk WHERE e.session_id = %(s)s AND e.derivation_key = ANY(%(keys)s)
),
base AS (
    SELECT COALESCE((
        SELECT e.sequence FROM ctxengine_events e WHERE e.session_id = %(s)s ORDER BY e.sequence DESC LIMIT 1
    ), 0) AS m FROM lk
),
batch AS (
    SELECT * FROM unnest(
        %(keys)s::text[], %(types)s::text[], %(payloads)s::text[], %(runs)s::text[], %(actors)s::text[],
        %(scopes)s::text[], %(ids)s::text[], %(versions)s::integer[]
    ) WITH ORDINALITY AS b(derivation_key, type, payload, run_id, actor, visibility_scope, visibility_id,
                           schema_version, ord)
    WHERE NOT EXISTS (SELECT 1 FROM prev p WHERE p.derivation_key = b.derivation_key)
),
ins AS (
    INSERT INTO ctxengine_events ({_COLS})
    SELECT %(s)s, (SELECT m FROM base) + ROW_NUMBER() OVER (ORDER BY b.ord), b.type, b.payload,
           b.derivation_key, b.run_id, b.actor, b.visibility_scope, b.visibility_id, %(at)s, b.schema_version
    FROM batch b
    RETURNING {_COLS}
)
SELECT false, {_COLS} FROM prev UNION ALL SELECT true, {_COLS} FROM ins
"""

WRITE_CHECKPOINT = """
WITH lease AS MATERIALIZED (
    SELECT owner, epoch FROM ctxengine_checkpoint_leases WHERE run_id = %(r)s FOR UPDATE
),
last AS (
    SELECT COALESCE(MAX(version), 0) AS v, COALESCE(bool_or(kind = 'full'), false) AS has_full
    FROM ctxengine_checkpoints WHERE run_id = %(r)s
),
ins AS (
    INSERT INTO ctxengine_checkpoints
        (run_id, version, kind, trigger, payload, lease_epoch, created_at, schema_version)
    SELECT %(r)s, last.v + 1, %(kind)s, %(trigger)s, %(payload)s, %(epoch)s, %(at)s, %(fmt)s
    FROM lease, last
    WHERE lease.owner = %(owner)s AND lease.epoch = %(epoch)s AND (%(kind)s = 'full' OR last.has_full)
    RETURNING version
)
SELECT (SELECT owner FROM lease), (SELECT epoch FROM lease), (SELECT has_full FROM last),
       (SELECT version FROM ins)
"""


WRITE_CHECKPOINT_WITH_COUNTS = WRITE_CHECKPOINT.replace(
    "\nlast AS (", f"\ncounts AS ({postgres_items.INSERT_COUNTS}),\nlast AS (", 1
)


def _in_transaction(conn: Conn) -> bool:
    return conn.info.transaction_status == TransactionStatus.INTRANS


#: The store's open transaction (its connection) and the sessions whose append lock it holds.
LOCKED: ContextVar[tuple[Conn, set[str]] | None] = ContextVar("ctxengine.postgres.locked", default=None)


@contextmanager
def locking(conn: Conn) -> Iterator[None]:
    """Track the session locks of the transaction just opened on ``conn``."""
    token = LOCKED.set((conn, set()))
    try:
        yield
    finally:
        LOCKED.reset(token)


async def append_all(
    conn: Conn, news: list[NewEvent], texts: list[str], created_at: datetime
) -> list[tuple[Any, bool]]:
    """Append one session's events in order: ``(row, inserted)`` per event, in one statement."""
    from .postgres import MAX_APPEND_ATTEMPTS, SESSION_LOCK_CLASS  # postgres.py imports this module

    session_id = news[0].session_id
    first: dict[str, int] = {}
    for i, new in enumerate(news):
        first.setdefault(new.derivation_key, i)
    unique = [news[i] for i in first.values()]
    params = {
        "cls": SESSION_LOCK_CLASS,
        "s": session_id,
        "keys": [n.derivation_key for n in unique],
        "types": [n.type for n in unique],
        "payloads": [texts[i] for i in first.values()],
        "runs": [n.run_id for n in unique],
        "actors": [n.actor for n in unique],
        "scopes": [n.visibility.scope for n in unique],
        "ids": [n.visibility.id for n in unique],
        "versions": [n.format_version for n in unique],
        "at": created_at,
    }
    held = LOCKED.get()
    locked = held[1] if held is not None and held[0] is conn else None
    # The store says whether its transaction is open (the driver may not know yet).
    if locked is not None or _in_transaction(conn):
        if locked is None or session_id not in locked:
            # Held until the caller commits; later statements see every earlier writer.
            lock = "SELECT pg_advisory_xact_lock(%s, hashtext(%s))"
            await conn.execute(lock, (SESSION_LOCK_CLASS, session_id))
            if locked is not None:
                locked.add(session_id)
        try:
            cur = await conn.execute(APPEND, params)
            return _results(news, first, await cur.fetchall())
        except errors.UniqueViolation as exc:
            raise StoreUnavailable(
                f"session {session_id!r}: a writer that does not take the session lock appended first; "
                "the transaction is lost (retry it)"
            ) from exc
    for _ in range(MAX_APPEND_ATTEMPTS):
        try:
            cur = await conn.execute(APPEND, params)  # its own transaction
            return _results(news, first, await cur.fetchall())
        except errors.UniqueViolation:
            # Its snapshot predates a writer it waited for (or one that does not take the
            # lock): the whole attempt was undone; try again.
            await asyncio.sleep(0)
    raise StoreError(f"session {session_id!r}: an append lost {MAX_APPEND_ATTEMPTS} sequence races in a row")


def _results(news: list[NewEvent], first: dict[str, int], rows: list[Any]) -> list[tuple[Any, bool]]:
    """``(row, inserted)`` per event in batch order; a key repeated in the batch repeats its first."""
    stored = {row[5]: (tuple(row[1:]), bool(row[0])) for row in rows}
    out = []
    for i, new in enumerate(news):
        row, inserted = stored[new.derivation_key]
        out.append((row, inserted and i == first[new.derivation_key]))
    return out


async def write_checkpoint(
    conn: Conn,
    run_id: str,
    lease: Lease,
    kind: str,
    trigger: str,
    text: str,
    created_at: datetime,
    fmt: int,
) -> int:
    """The next version of the run's checkpoints, written under ``lease`` in one statement."""
    _rows.check_lease(run_id, lease, (lease.owner, lease.epoch))  # the run id; the epoch is checked below
    params = {
        "r": run_id,
        "kind": kind,
        "trigger": trigger,
        "payload": text,
        "epoch": lease.epoch,
        "owner": lease.owner,
        "at": created_at,
        "fmt": fmt,
    }
    counts = postgres_items.take_deferred(conn)
    if counts is None:
        cur = await conn.execute(WRITE_CHECKPOINT, params)
    else:  # the transaction's deferred token counts ride along (one statement)
        cur = await conn.execute(WRITE_CHECKPOINT_WITH_COUNTS, {**params, **counts})
    row = await cur.fetchone()
    assert row is not None
    owner, epoch, has_full, version = row
    if version is not None:
        return int(version)
    # Nothing was written: say why, as the checks before this statement did.
    _rows.check_lease(run_id, lease, None if owner is None else (owner, int(epoch)))
    if kind == "delta" and not has_full:
        raise _rows.no_base_for_delta(run_id)
    raise StoreError(f"run {run_id!r}: checkpoint version was not written")


__all__ = [
    "APPEND",
    "LOCKED",
    "WRITE_CHECKPOINT",
    "WRITE_CHECKPOINT_WITH_COUNTS",
    "append_all",
    "locking",
    "write_checkpoint",
]
