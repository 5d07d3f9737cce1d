"""Driver exceptions, mapped once to the store error taxonomy (ADR 0010).

No ``sqlite3``/``psycopg``/``psycopg_pool`` exception leaves a store: a
failure to reach the data (a lost connection, a server that is down, a lock
or pool wait that ran out, a deadlock or serialization failure) is a
retryable ``StoreUnavailable``; anything else a driver raises is a
``StoreError`` naming the store and the driver's message.
"""

from __future__ import annotations

import sqlite3

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import PoolTimeout

from ..errors import StoreError, StoreUnavailable

#: SQLite messages that mean "not now" rather than "never".
_SQLITE_TRANSIENT = ("locked", "busy", "unable to open", "disk i/o")
#: PostgreSQL errors that a retry of the same call can get past.
_PG_TRANSIENT = (
    psycopg.OperationalError,
    psycopg.InterfaceError,
    pg_errors.SerializationFailure,
    pg_errors.DeadlockDetected,
    pg_errors.LockNotAvailable,
    pg_errors.QueryCanceled,
    pg_errors.AdminShutdown,
    pg_errors.CannotConnectNow,
)


def sqlite_error(store: object, exc: sqlite3.Error) -> StoreError:
    message = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and any(t in message.lower() for t in _SQLITE_TRANSIENT):
        return StoreUnavailable(f"{store!r}: {message} (retry; the wait is the store's busy_timeout)")
    return StoreError(f"{store!r}: SQLite {type(exc).__name__}: {message}")


def postgres_error(store: object, exc: Exception, *, timeout: float) -> StoreError:
    if isinstance(exc, PoolTimeout):
        return StoreUnavailable(f"{store!r}: no connection within {timeout:g} s ({exc}); retry later")
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, _PG_TRANSIENT):
        return StoreUnavailable(f"{store!r}: {type(exc).__name__}: {message} (retry)")
    return StoreError(f"{store!r}: PostgreSQL {type(exc).__name__}: {message}")


#: What a PostgreSQL store catches and maps.
POSTGRES_ERRORS = (psycopg.Error, PoolTimeout)

__all__ = ["POSTGRES_ERRORS", "postgres_error", "sqlite_error"]
