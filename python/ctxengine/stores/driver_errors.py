"""Driver exceptions, mapped once to the store error taxonomy (ADR 0010).

No ``sqlite3``/``psycopg``/``psycopg_pool`` exception leaves a store: a
failure to reach the data (a lost connection, a server that is down, a lock
or pool wait that ran out, a deadlock or serialization failure) is a
retryable ``StoreUnavailable``; a statement interrupted by the store's
statement timeout is ``StatementTimeout``; at the open, what no retry gets
past is ``StoreOpenError`` (``sqlite_open`` for SQLite); anything else a
driver raises is a ``StoreError`` naming the store and the driver's message.
PostgreSQL's half is ``postgres_errors`` (imported only with a PostgreSQL store,
so ``import ctxengine`` never imports psycopg).
"""

from __future__ import annotations

import sqlite3

from ..errors import StatementTimeout, StoreError, StoreUnavailable

#: SQLite messages that mean "not now" rather than "never".
_SQLITE_TRANSIENT = ("locked", "busy", "unable to open", "disk i/o")


def sqlite_error(store: object, exc: sqlite3.Error, *, statement_timeout: float | None = None) -> StoreError:
    message = str(exc)
    if statement_timeout is not None and getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_INTERRUPT:
        return StatementTimeout(repr(store), statement_timeout)  # the deadline's progress handler
    if isinstance(exc, sqlite3.OperationalError) and any(t in message.lower() for t in _SQLITE_TRANSIENT):
        return StoreUnavailable(f"{store!r}: {message} (retry; the wait is the store's busy_timeout)")
    return StoreError(f"{store!r}: SQLite {type(exc).__name__}: {message}")


__all__ = ["sqlite_error"]
