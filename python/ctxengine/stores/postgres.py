"""``PostgresStore``: the store for many workers on many machines (psycopg 3, pooled).

Concurrency control is the unique constraints, not locks: an append reads the
session's greatest sequence and inserts the next one; when another writer
took that sequence first, the insert fails on ``(session_id, sequence)`` and
the append retries from the top, where it either sees the winner's row for
its own derivation key (an idempotent repeat) or a new greatest sequence.
Each attempt runs in its own transaction, or in a savepoint when it joins a
caller's ``store.transaction()``, so a lost race never poisons the caller's
transaction. Connections run in autocommit mode; every write is an explicit
``conn.transaction()``.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, TypeVar

import psycopg
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool

from ..errors import ModelValidationError, StoreError, StorePredictionMissed
from ..model import Principal
from ..model.clock import Clock, SystemClock
from . import _rows, migrations, postgres_items, postgres_predicted, postgres_writes
from ._sql import (
    DEFAULT_STATEMENT_TIMEOUT,
    SqlCheckpointStore,
    SqlEventLog,
    SqlOps,
    check_statement_timeout,
)
from .events import (
    FORMAT_VERSION,
    Event,
    NewEvent,
    RawCheckpoint,
)
from .formats import WritePolicy
from .postgres_errors import POSTGRES_ERRORS, postgres_error
from .postgres_pool import ConnectFailures, filled
from .postgres_schema import connection_settings, schema
from .prediction import Prediction

#: Appends to one session are serialized by a transaction-scoped advisory lock
#: on (this class id, hashtext(session_id)): a writer holding a transaction
#: with appends in it makes the others wait, in order, instead of racing them.
SESSION_LOCK_CLASS = 0x63747873  # "ctxs"
#: Sequence races an append survives. With the lock they happen only against
#: writers that do not take it (a build from before the lock), each loss means
#: another writer committed, so this bounds contention, not latency.
MAX_APPEND_ATTEMPTS = 50

_EVENT_COLS = _rows.EVENT_COLUMN_LIST
_CHECKPOINT_COLS = _rows.CHECKPOINT_COLUMN_LIST

Conn = AsyncConnection[Any]
R = TypeVar("R")
_TXN: _rows.TransactionSlot[Conn] = _rows.TransactionSlot("ctxengine.stores.postgres.transaction")
_PREDICTED: _rows.TransactionSlot[Prediction] = _rows.TransactionSlot("ctxengine.stores.postgres.predicted")


def describe_dsn(dsn: str) -> str:
    """The DSN without secrets, for error messages."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<unparsable DSN>"
    host = parts.get("host") or "localhost"
    port = parts.get("port") or "5432"
    return f"postgresql://{parts.get('user') or ''}@{host}:{port}/{parts.get('dbname') or ''}"


async def _fetchone(conn: Conn, sql: str, params: Iterable[Any] = ()) -> tuple[Any, ...] | None:
    cur = await conn.execute(sql, tuple(params))
    row: tuple[Any, ...] | None = await cur.fetchone()
    return row


async def _fetchall(conn: Conn, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
    cur = await conn.execute(sql, tuple(params))
    return await postgres_items.fetch_rows(cur)


async def _append(conn: Conn, new: NewEvent, text: str, created_at: datetime) -> tuple[tuple[Any, ...], bool]:
    # One statement: the session lock, the key lookup, the next sequence and the insert.
    [result] = await postgres_writes.append_all(conn, [new], [text], created_at)
    return result


async def _read(
    conn: Conn, session_id: str, after: int, before: int | None, types: tuple[str, ...] | None
) -> Sequence[_rows.Row]:
    if types is not None:
        fast, _ = await postgres_items.read_typed(conn, session_id, after, before, types)
        if fast is not None:
            return fast
    return await _read_precise(conn, session_id, after, before, types)


async def _read_covering(
    conn: Conn, session_id: str, after: int, types: tuple[str, ...]
) -> tuple[Sequence[_rows.Row], int]:
    """``_read`` of ``types`` after ``after``, and the session's last sequence in the read's
    snapshot (every event at or below it was committed then): one statement."""
    fast, tail = await postgres_items.read_typed(conn, session_id, after, None, types)
    through = max(after, tail or 0)
    if fast is not None:
        return fast, through
    # A row the fail-closed rule must see: the precise read, bounded by what the first saw.
    return await _read_precise(conn, session_id, after, through + 1, types), through


async def _read_precise(
    conn: Conn, session_id: str, after: int, before: int | None, types: tuple[str, ...] | None
) -> Sequence[_rows.Row]:
    sql = f"SELECT {_EVENT_COLS} FROM ctxengine_events WHERE session_id = %s AND sequence > %s"
    params: list[Any] = [session_id, after]
    if before is not None:
        sql += " AND sequence < %s"
        params.append(before)
    if types is not None:
        # Rows of other types are passed over by SQL only when this code knows
        # them: an unknown type or a newer format is fetched and fails closed.
        sql += " AND (type = ANY(%s) OR NOT (type = ANY(%s)) OR schema_version > %s)"
        params.extend((list(types), list(_rows.KNOWN_TYPES), FORMAT_VERSION))
    sql += " ORDER BY sequence"
    return await _fetchall(conn, sql, params)


async def _latest_each(
    conn: Conn, session_id: str, before: int, types: tuple[str, ...], principal: Principal | None
) -> tuple[Event | None, ...]:
    # One statement finds the newest row of every type: usually each is the answer. A type
    # whose newest row the principal may not read, or any row the fail-closed rule must
    # see, takes the precise read of that type.
    rows = await postgres_items.newest_typed(conn, session_id, before, types)
    if rows is None:
        return tuple([await _latest_before(conn, session_id, before, t, principal) for t in types])
    out: list[Event | None] = []
    for event_type in types:
        row = next((r for r in rows if r[2] == event_type), None)
        event = None if row is None else _rows.decode_event(row)
        if event is not None and not event.visibility.allows(principal):
            event = await _latest_before(conn, session_id, before, event_type, principal)
        out.append(event)
    return tuple(out)


async def _latest_before(
    conn: Conn, session_id: str, before: int, event_type: str, principal: Principal | None
) -> Event | None:
    # Newest first; every row passed over on the way to the answer is decoded,
    # so an unknown type, a newer format or a corrupt row of this type between
    # the boundary and the answer fails closed instead of being skipped. With nothing of an
    # unknown type or a newer format below the boundary, the type index answers.
    decoded: dict[int, Event] = {}

    def visible(row: tuple[Any, ...]) -> bool:
        event = decoded[row[1]] = _rows.decode_event(row)
        return event.visibility.allows(principal)

    clean, found = await postgres_items.latest_typed(conn, session_id, before, event_type, visible)
    if clean:
        return decoded[found[1]] if found is not None else None
    sql = (
        f"SELECT {_EVENT_COLS} FROM ctxengine_events WHERE session_id = %s AND sequence < %s "
        "AND (type = %s OR NOT (type = ANY(%s)) OR schema_version > %s) ORDER BY sequence DESC"
    )
    params = (session_id, before, event_type, list(_rows.KNOWN_TYPES), FORMAT_VERSION)
    async with conn.cursor() as cur:
        await cur.execute(sql, params)
        while True:
            rows = await cur.fetchmany(64)
            if not rows:
                return None
            for row in rows:
                event = _rows.decode_event(row)
                if event.type == event_type and event.visibility.allows(principal):
                    return event


class PostgresStore:
    """Events and checkpoints in PostgreSQL, through an ``AsyncConnectionPool``.

    The pool opens (and the schema is created or checked) on ``open()`` or
    first use; ``close()`` closes it. ``timeout`` bounds every wait for the
    server (connecting, and taking a pooled connection): past it the call
    raises ``StoreUnavailable``, which is safe to retry. The schema is checked
    on a connection of its own, so a database or role that does not exist or a
    refused login is ``StoreOpenError`` at once, not a pool retrying until
    ``timeout``. ``read_only`` and ``statement_timeout``: ``connection_settings``.
    """

    def __init__(
        self,
        dsn: str,
        *,
        clock: Clock | None = None,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 10.0,
        migrate: bool = True,
        write_policy: WritePolicy | None = None,
        read_only: bool = False,
        statement_timeout: float | None = DEFAULT_STATEMENT_TIMEOUT,
    ) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 3600:
            raise ModelValidationError(
                "PostgresStore", "timeout", f"expected 0 < seconds <= 3600, got {timeout!r}"
            )
        self.dsn = dsn
        self._auto_migrate = migrate
        self._read_only = bool(read_only)
        self._statement_timeout = check_statement_timeout("PostgresStore", statement_timeout)
        self._settings = connection_settings(self._statement_timeout, self._read_only)
        self._pending: tuple[str, ...] = ()
        self.write_policy = write_policy if write_policy is not None else WritePolicy.from_env()
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._min_size = min_size
        self._max_size = max_size
        self._timeout = float(timeout)
        self._pool: AsyncConnectionPool[Conn] | None = None
        self._opening = asyncio.Lock()
        self._closed = False
        self.events = PostgresEventLog(self)
        self.checkpoints = PostgresCheckpointStore(self)

    def __repr__(self) -> str:
        return f"PostgresStore({describe_dsn(self.dsn)!r})"

    @asynccontextmanager
    async def _mapped(self) -> AsyncIterator[None]:
        """Driver exceptions leave as ``StoreError``/``StoreUnavailable`` (ADR 0010)."""
        try:
            yield
        except POSTGRES_ERRORS as exc:
            raise postgres_error(
                self, exc, timeout=self._timeout, statement_timeout=self._statement_timeout
            ) from exc

    async def _configure(self, conn: Conn) -> None:
        """Every connection's settings (statement timeout, read-only): one round trip."""
        if self._settings:
            await conn.execute(self._settings)

    async def _ready(self) -> AsyncConnectionPool[Conn]:
        if self._closed:
            raise StoreError(f"{self!r} is closed")
        if self._pool is not None:
            return self._pool
        async with self._opening:
            if self._pool is None:
                failures = ConnectFailures()
                pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
                    self.dsn,
                    connection_class=failures.connection_class(),
                    min_size=self._min_size,
                    max_size=self._max_size,
                    timeout=self._timeout,
                    kwargs={"autocommit": True, "connect_timeout": max(2, math.ceil(self._timeout))},
                    configure=self._configure,
                    open=False,
                )
                try:
                    async with self._mapped():
                        await pool.open(wait=False)
                    await filled(self, pool, failures, self._timeout)
                    # The schema is checked on the pool's first connection (no connection of
                    # its own: a fresh worker's first request would pay for one).
                    async with self._mapped(), pool.connection() as conn:
                        apply = self._auto_migrate and not self._read_only
                        report = await schema(conn, self._where(), apply, not self._read_only)
                except BaseException:
                    await pool.close()
                    raise
                # A read-only store reads an older revision as it is (what an older worker reads).
                self._pending = () if self._auto_migrate or self._read_only else report.pending
                self._pool = pool
            return self._pool

    def _where(self) -> str:
        return f"PostgreSQL store {describe_dsn(self.dsn)}"

    async def open(self) -> PostgresStore:
        """Connect and create or check the schema now rather than on first use."""
        await self._ready()
        return self

    async def migrate(self, *, dry_run: bool = False) -> migrations.MigrationReport:
        """Apply the pending schema migrations (or, with ``dry_run``, only report them)."""
        if self._read_only and not dry_run:
            raise StoreError(f"{self!r} is open read-only: open it with read_only=False to migrate it")
        pool = await self._ready()
        async with self._mapped(), pool.connection() as conn:
            report = await schema(conn, self._where(), not dry_run, not self._read_only)
        if not dry_run:
            self._pending = ()
        return report

    def _check_migrated(self) -> None:
        if self._pending:
            raise StoreError(
                f"{self!r} needs the schema migrations {list(self._pending)}; "
                "run `ctxengine migrate` (or open it with migrate=True)"
            )

    async def close(self) -> None:
        if _TXN.get(self) is not None:
            raise StoreError(f"{self!r}: close() inside its own transaction")
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def __aenter__(self) -> PostgresStore:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _call(self, fn: Callable[..., Awaitable[R]], *args: Any) -> R:
        """Run ``fn(conn, *args)`` on the caller's transaction connection or a pooled one
        (inside ``predicted``: answer with the prediction and queue the write)."""
        prediction = _PREDICTED.get(self)
        if prediction is not None:
            result: R = prediction.answer(_PREDICTABLE, fn, args)
            return result
        conn = _TXN.get(self)
        if conn is not None:
            async with self._mapped():
                if fn not in _TAKES_DEFERRED:  # deferred counts go first, as if sent when put
                    await postgres_items.flush_deferred(conn)
                return await fn(conn, *args)
        pool = await self._ready()
        self._check_migrated()
        async with self._mapped(), pool.connection() as pooled:
            return await fn(pooled, *args)

    @asynccontextmanager
    async def _predicted(
        self,
        session_id: str,
        next_sequence: int,
        run_id: str,
        version: int,
        *,
        sent: Callable[[], None] | None = None,
    ) -> AsyncIterator[None]:
        """A transaction of one call (ADR 0013): inside the block the write operations answer
        as the store would when ``next_sequence`` is the session's next sequence, ``version``
        the run's next checkpoint version and an unclaimed run's lease its first, and queue
        the writes; the block's exit sends them in one call, which writes all or, when a
        prediction does not hold, nothing and ``StorePredictionMissed``. So does anything in
        the block that needs the server's answer (a read), at once, and so does opening it
        inside a transaction. Run the same writes in ``transaction()`` after a miss. ``sent``
        is called as the call goes out (its answer is read when the caller next waits)."""
        if _TXN.get(self) is not None or _PREDICTED.get(self) is not None:
            raise StorePredictionMissed(f"session {session_id!r}: a predicted commit inside a transaction")
        pool = await self._ready()
        self._check_migrated()
        prediction = Prediction(session_id, next_sequence, run_id, version)
        with _PREDICTED.bind(self, prediction):
            yield
        if not prediction.empty:
            async with self._mapped(), pool.connection() as conn:
                if sent is not None:
                    sent()  # the waiter runs once this task waits for the answer: after the send
                await postgres_predicted.commit(conn, prediction, SESSION_LOCK_CLASS)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        if _PREDICTED.get(self) is not None:
            raise StorePredictionMissed("a transaction inside a predicted commit")
        conn = _TXN.get(self)
        if conn is not None:  # nested: a savepoint inside the outer transaction
            async with self._mapped():
                await postgres_items.flush_deferred(conn)  # nothing deferred crosses a savepoint
                async with conn.transaction():
                    try:
                        yield
                        await postgres_items.flush_deferred(conn)
                    except BaseException:
                        postgres_items.drop_deferred(conn)  # put inside what rolls back
                        raise
            return
        pool = await self._ready()
        self._check_migrated()
        async with self._mapped(), pool.connection() as conn, conn.transaction():
            with _TXN.bind(self, conn), postgres_writes.locking(conn), postgres_items.deferring(conn):
                yield
                await postgres_items.flush_deferred(conn)  # before the commit


async def _claim(conn: Conn, run_id: str, owner: str) -> int:
    row = await _fetchone(
        conn,
        "INSERT INTO ctxengine_checkpoint_leases (run_id, owner, epoch) VALUES (%s, %s, 1) "
        "ON CONFLICT (run_id) DO UPDATE SET owner = EXCLUDED.owner, "
        "epoch = ctxengine_checkpoint_leases.epoch + 1 RETURNING epoch",
        (run_id, owner),
    )
    assert row is not None
    return int(row[0])


async def _latest_raw(conn: Conn, run_id: str) -> list[RawCheckpoint]:
    rows = await _fetchall(
        conn,
        f"SELECT {_CHECKPOINT_COLS} FROM ctxengine_checkpoints WHERE run_id = %s AND version >= "
        "(SELECT MAX(version) FROM ctxengine_checkpoints WHERE run_id = %s AND kind = 'full') "
        "ORDER BY version",
        (run_id, run_id),
    )
    return [_rows.decode_checkpoint(run_id, row) for row in rows]


async def _delete(conn: Conn, run_id: str) -> None:
    async with conn.transaction():
        await conn.execute("DELETE FROM ctxengine_checkpoints WHERE run_id = %s", (run_id,))
        # The lease row stays, one epoch on and owned by no one (see SQLite's _delete).
        await conn.execute(
            "UPDATE ctxengine_checkpoint_leases SET owner = %s, epoch = epoch + 1 WHERE run_id = %s",
            (_rows.FENCED_OWNER, run_id),
        )


def _identity(moment: datetime) -> datetime:
    return moment  # psycopg stores an aware datetime as timestamptz


_OPS = SqlOps(
    append=_append,
    read=_read,
    read_covering=_read_covering,
    latest_before=_latest_before,
    latest_each=_latest_each,
    claim=_claim,
    write_checkpoint=postgres_writes.write_checkpoint,
    latest_raw=_latest_raw,
    delete=_delete,
    timestamp=_identity,
    append_all=postgres_writes.append_all,
    read_items=postgres_items.read_items,
    put_counts=postgres_items.put_counts,
    visibilities=postgres_items.visibilities,
    prune=postgres_items.prune,
)


#: What a predicted commit answers itself, per operation (the rest need the server).
_PREDICTABLE: dict[Callable[..., Any], Callable[..., Any]] = {
    _append: Prediction.append,
    postgres_writes.append_all: Prediction.append_all,
    postgres_items.put_counts: Prediction.put_counts,
    _claim: Prediction.claim,
    postgres_writes.write_checkpoint: Prediction.write_checkpoint,
    postgres_items.prune: Prediction.prune,
}

#: Ops that handle the transaction's deferred counts themselves (put or send them).
_TAKES_DEFERRED = (postgres_items.put_counts, postgres_writes.write_checkpoint)


class PostgresEventLog(SqlEventLog):
    _ops = _OPS


class PostgresCheckpointStore(SqlCheckpointStore):
    _ops = _OPS


__all__ = [
    "MAX_APPEND_ATTEMPTS",
    "SESSION_LOCK_CLASS",
    "PostgresCheckpointStore",
    "PostgresEventLog",
    "PostgresStore",
    "describe_dsn",
]
