"""``SQLiteStore``: the embedded default store (one file, many processes).

Concurrency rules, and why:

* WAL journal: readers never block the writer and vice versa.
* Every write transaction opens with ``BEGIN IMMEDIATE``. A deferred
  transaction that reads and then writes must upgrade its lock; when another
  connection got there first the upgrade fails at once with SQLITE_BUSY
  without consulting ``busy_timeout``. Taking the write lock up front makes
  waiting writers queue on ``busy_timeout`` instead.
* ``UNIQUE(session_id, sequence)`` and ``UNIQUE(session_id, derivation_key)``
  back the invariants even if some other writer skips this code.
* sqlite3 blocks, so each store owns one connection driven by one worker
  thread; the event loop never waits on the file lock.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from ..errors import ModelValidationError, StoreError, StorePredictionMissed
from ..model.clock import Clock, SystemClock
from . import _rows, migrations, sqlite_items, sqlite_predicted
from ._sql import DEFAULT_STATEMENT_TIMEOUT, SqlCheckpointStore, SqlEventLog, SqlOps, check_statement_timeout
from .driver_errors import sqlite_error
from .events import (
    NewEvent,
)
from .formats import WritePolicy
from .prediction import Prediction
from .sqlite_checkpoints import claim as _claim
from .sqlite_checkpoints import delete as _delete
from .sqlite_checkpoints import latest_raw as _latest_raw
from .sqlite_checkpoints import write_checkpoint as _write_checkpoint
from .sqlite_deadline import bounded
from .sqlite_items import in_write_txn as _in_write_txn
from .sqlite_open import open_database
from .sqlite_reads import latest_before as _latest_before
from .sqlite_reads import latest_each as _latest_each
from .sqlite_reads import read as _read
from .sqlite_reads import read_covering as _read_covering
from .sqlite_schema import Synchronous, schema

_EVENT_COLS = _rows.EVENT_COLUMN_LIST

R = TypeVar("R")


@dataclass
class _Txn:
    """The connection of an open ``store.transaction()`` and its savepoint depth."""

    conn: sqlite3.Connection
    depth: int = 0


_TXN: _rows.TransactionSlot[_Txn] = _rows.TransactionSlot("ctxengine.stores.sqlite.transaction")
_PREDICTED: _rows.TransactionSlot[Prediction] = _rows.TransactionSlot("ctxengine.stores.sqlite.predicted")


# --------------------------------------------------------------------------
# blocking helpers: these run on the store's worker thread only


def _alone(fn: Callable[..., R], conn: sqlite3.Connection, *args: Any) -> R:
    """Run ``fn`` as its own transaction, outside any ``store.transaction()``."""
    _rollback(conn)  # only a transaction orphaned by a cancelled task can be open here
    return fn(conn, True, *args)


def _begin(conn: sqlite3.Connection) -> None:
    _rollback(conn)
    conn.execute("BEGIN IMMEDIATE")


def _commit(conn: sqlite3.Connection) -> None:
    try:
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def _rollback_to(conn: sqlite3.Connection, savepoint: str) -> None:
    conn.execute(f"ROLLBACK TO {savepoint}")
    conn.execute(f"RELEASE {savepoint}")


def _append(
    conn: sqlite3.Connection, own: bool, new: NewEvent, text: str, created_at: str
) -> tuple[_rows.Row, bool]:
    """Insert at the next sequence; returns (row, True) or, for a known key, (stored row, False)."""

    def body() -> tuple[_rows.Row, bool]:
        stored = conn.execute(
            f"SELECT {_EVENT_COLS} FROM ctxengine_events WHERE session_id = ? AND derivation_key = ?",
            (new.session_id, new.derivation_key),
        ).fetchone()
        if stored is not None:
            return stored, False
        (last,) = conn.execute(
            "SELECT COALESCE(MAX(sequence), 0) FROM ctxengine_events WHERE session_id = ?",
            (new.session_id,),
        ).fetchone()
        row = _rows.event_row(new, text, last + 1, created_at)
        conn.execute(
            f"INSERT INTO ctxengine_events ({_EVENT_COLS}) VALUES ({', '.join('?' * len(row))})", row
        )
        return row, True

    return _in_write_txn(conn, own, body)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="microseconds")


# --------------------------------------------------------------------------
# the store


class SQLiteStore:
    """Events and checkpoints in one SQLite file (or ``":memory:"``).

    ``busy_timeout`` (seconds) is how long a writer waits for another
    process's write lock. ``synchronous="FULL"`` (the default) makes an
    acknowledged append survive power loss; ``"NORMAL"`` keeps it across
    process crashes only, for more throughput. ``cache_kib`` is the
    connection's page cache (``PRAGMA cache_size``): enough for the pages a
    worker reads again (the tables' inner pages, the ends of the sessions it
    serves), small enough that a long scan (a fresh worker's first read of a
    1,000-item window) recycles its pages instead of growing the process by
    them (each new page of memory costs the first request a page fault).

    ``read_only=True`` opens the file with SQLite's ``mode=ro``: nothing is
    created, migrated or switched to WAL, a missing file is ``StoreOpenError``,
    and writes fail (``ctxengine inspect``, ``migrate --dry-run``); a store
    at an older schema revision is read as it is. ``statement_timeout``
    (seconds, ``None``: no limit) interrupts any statement that runs longer
    with ``StatementTimeout`` (ADR 0010). A path that can never be opened (a
    directory, a FIFO, a device, a missing directory, a file that is not a
    ctxengine store) is ``StoreOpenError``, never the retryable
    ``StoreUnavailable``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Clock | None = None,
        busy_timeout: float = 30.0,
        synchronous: Synchronous = "FULL",
        cache_kib: int = 256,
        migrate: bool = True,
        write_policy: WritePolicy | None = None,
        read_only: bool = False,
        statement_timeout: float | None = DEFAULT_STATEMENT_TIMEOUT,
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise ModelValidationError(
                "SQLiteStore", "synchronous", f"expected FULL or NORMAL, got {synchronous!r}"
            )
        if isinstance(cache_kib, bool) or not isinstance(cache_kib, int) or not 16 <= cache_kib <= 1 << 22:
            raise ModelValidationError(
                "SQLiteStore", "cache_kib", f"expected an int from 16 to {1 << 22} (KiB), got {cache_kib!r}"
            )
        self.path = os.fspath(path)
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._busy_timeout = busy_timeout
        self._synchronous: Synchronous = synchronous
        self._cache_kib = cache_kib
        self._auto_migrate = migrate
        self._read_only = bool(read_only)
        self._statement_timeout = check_statement_timeout("SQLiteStore", statement_timeout)
        self._pending: tuple[str, ...] = ()
        self.write_policy = write_policy if write_policy is not None else WritePolicy.from_env()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxengine-sqlite")
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        # One connection serves every task of this store; the lock keeps a
        # task outside a transaction from reading or writing through the
        # connection while another task's transaction is open on it.
        self._lock = asyncio.Lock()
        self.events = SQLiteEventLog(self)
        self.checkpoints = SQLiteCheckpointStore(self)

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    async def _run(self, fn: Callable[..., R], *args: Any) -> R:
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, self._bounded, fn, args)
        except sqlite3.Error as exc:
            raise sqlite_error(self, exc, statement_timeout=self._statement_timeout) from exc

    def _bounded(self, fn: Callable[..., R], args: tuple[Any, ...]) -> R:
        """``fn(*args)`` on the worker thread, its statements stopped at the statement timeout."""
        conn = self._conn
        if conn is None:
            return fn(*args)
        with bounded(conn, self._statement_timeout):
            return fn(*args)

    async def _connection(self) -> sqlite3.Connection:
        """The open connection; opens (and migrates) it on first use. Call under ``_lock``."""
        if self._closed:
            raise StoreError(f"{self!r} is closed")
        if self._conn is None:
            # One trip to the worker thread: a fresh worker's first request waits for it.
            conn, report = await self._run(
                open_database,
                self.path,
                self._busy_timeout,
                self._synchronous,
                self._cache_kib,
                self._auto_migrate,
                self._read_only,
                self._statement_timeout,
            )
            # A read-only store reads an older revision as it is (what an older worker reads).
            self._pending = () if self._auto_migrate or self._read_only else report.pending
            self._conn = conn
        return self._conn

    async def migrate(self, *, dry_run: bool = False) -> migrations.MigrationReport:
        """Apply the pending schema migrations (or, with ``dry_run``, only report them)."""
        if self._read_only and not dry_run:
            raise StoreError(f"{self!r} is open read-only: open it with read_only=False to migrate it")
        async with self._lock:
            conn = await self._connection()
            report = await self._run(schema, conn, self.path, not dry_run, not self._read_only)
            if not dry_run:
                self._pending = ()
            return report

    async def open(self) -> SQLiteStore:
        """Open the file and create or check the schema now rather than on first use."""
        async with self._lock:
            await self._connection()
        return self

    async def close(self) -> None:
        if _TXN.get(self) is not None:
            raise StoreError(f"{self!r}: close() inside its own transaction")
        async with self._lock:
            if self._closed:
                return
            self._closed = True
            conn, self._conn = self._conn, None
            if conn is not None:
                await self._run(conn.close)
        self._executor.shutdown(wait=False)

    async def __aenter__(self) -> SQLiteStore:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _call(self, fn: Callable[..., R], *args: Any) -> R:
        """Run ``fn(conn, own_txn, *args)`` in the caller's transaction or on its own (inside
        ``predicted``: answer with the prediction and queue the write)."""
        prediction = _PREDICTED.get(self)
        if prediction is not None:
            result: R = prediction.answer(_PREDICTABLE, fn, args)
            return result
        txn = _TXN.get(self)
        if txn is not None:
            return await self._run(fn, txn.conn, False, *args)
        async with self._lock:
            conn = await self._connection()
            self._check_migrated()
            return await self._run(_alone, fn, conn, *args)

    def _check_migrated(self) -> None:
        if self._pending:
            raise StoreError(
                f"{self!r} needs the schema migrations {list(self._pending)}; "
                "run `ctxengine migrate` (or open it with migrate=True)"
            )

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
        """A transaction of one trip to the worker thread (ADR 0013; ``sqlite_predicted``):
        inside the block the write operations answer as the store would when
        ``next_sequence`` is the session's next sequence, ``version`` the run's next
        checkpoint version and an unclaimed run's lease its first, and queue the writes; the
        block's exit writes them all or, when a prediction does not hold, nothing and
        ``StorePredictionMissed``. So does anything in the block that needs the store's
        answer (a read), at once, and so does opening it inside a transaction. Run the same
        writes in ``transaction()`` after a miss. ``sent`` is called on the event loop as the
        worker thread starts the ``COMMIT`` (which syncs the file without the GIL)."""
        if _TXN.get(self) is not None or _PREDICTED.get(self) is not None:
            raise StorePredictionMissed(f"session {session_id!r}: a predicted commit inside a transaction")
        prediction = Prediction(session_id, next_sequence, run_id, version)
        with _PREDICTED.bind(self, prediction):
            yield
        if not prediction.empty:
            async with self._lock:
                conn = await self._connection()
                self._check_migrated()
                committing = None
                if sent is not None:
                    loop = asyncio.get_running_loop()

                    def committing() -> None:
                        loop.call_soon_threadsafe(sent)

                await self._run(_alone, sqlite_predicted.commit, conn, prediction, _OPS, committing)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        if _PREDICTED.get(self) is not None:
            raise StorePredictionMissed("a transaction inside a predicted commit")
        txn = _TXN.get(self)
        if txn is not None:  # nested: a savepoint inside the outer transaction
            async with self._savepoint(txn):
                yield
            return
        async with self._lock:
            conn = await self._connection()
            self._check_migrated()
            try:
                await self._run(_begin, conn)
                with _TXN.bind(self, _Txn(conn)):
                    yield
            except BaseException:
                # Queued behind anything still running on the worker thread,
                # so it also undoes a BEGIN whose await was cancelled.
                await self._run(_rollback, conn)
                raise
            await self._run(_commit, conn)

    @asynccontextmanager
    async def _savepoint(self, txn: _Txn) -> AsyncIterator[None]:
        name = f"ctxengine_savepoint_{txn.depth}"
        txn.depth += 1
        try:
            await self._run(txn.conn.execute, f"SAVEPOINT {name}")
            try:
                yield
            except BaseException:
                await self._run(_rollback_to, txn.conn, name)
                raise
            await self._run(txn.conn.execute, f"RELEASE {name}")
        finally:
            txn.depth -= 1


_OPS = SqlOps(
    append=_append,
    read=_read,
    read_covering=_read_covering,
    latest_before=_latest_before,
    latest_each=_latest_each,
    claim=_claim,
    write_checkpoint=_write_checkpoint,
    latest_raw=_latest_raw,
    delete=_delete,
    timestamp=_iso,
    append_all=sqlite_items.append_all,
    read_items=sqlite_items.read_items,
    put_counts=sqlite_items.put_counts,
    visibilities=sqlite_items.visibilities,
    prune=sqlite_items.prune,
)


_PREDICTABLE: dict[Callable[..., Any], Callable[..., Any]] = {
    _append: Prediction.append,
    sqlite_items.append_all: Prediction.append_all,
    sqlite_items.put_counts: Prediction.put_counts,
    _claim: Prediction.claim,
    _write_checkpoint: Prediction.write_checkpoint,
    sqlite_items.prune: Prediction.prune,
}


class SQLiteEventLog(SqlEventLog):
    _ops = _OPS


class SQLiteCheckpointStore(SqlCheckpointStore):
    _ops = _OPS


__all__ = ["SQLiteCheckpointStore", "SQLiteEventLog", "SQLiteStore"]
