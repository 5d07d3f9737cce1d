"""psycopg and psycopg_pool exceptions, mapped once to the store error taxonomy (ADR 0010):
the PostgreSQL half of ``driver_errors``, imported only with a PostgreSQL store."""

from __future__ import annotations

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import PoolTimeout

from ..errors import StatementTimeout, StoreError, StoreOpenError, StoreUnavailable

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


def postgres_error(
    store: object, exc: Exception, *, timeout: float, statement_timeout: float | None = None
) -> StoreError:
    if isinstance(exc, PoolTimeout):
        return StoreUnavailable(f"{store!r}: no connection within {timeout:g} s ({exc}); retry later")
    message = _first_line(exc)
    if isinstance(exc, pg_errors.QueryCanceled) and statement_timeout is not None and "timeout" in message:
        return StatementTimeout(repr(store), statement_timeout)
    if isinstance(exc, _PG_TRANSIENT):
        return StoreUnavailable(f"{store!r}: {type(exc).__name__}: {message} (retry)")
    return StoreError(f"{store!r}: PostgreSQL {type(exc).__name__}: {message}")


#: What libpq or the server answers to a connection that can never be made as asked (the
#: server's words are English unless its ``lc_messages`` says otherwise; a connection error
#: carries no SQLSTATE): a database or role that does not exist, a refused login, no
#: CONNECT privilege, a database that takes no connections, a malformed connection option.
_PG_REFUSED = (
    "does not exist",
    "authentication failed",
    "no pg_hba.conf entry",
    "permission denied",
    "not currently accepting connections",
    "connection is bad: invalid",
)


def postgres_open_error(store: object, exc: Exception, *, timeout: float) -> StoreError:
    """A failure to connect when the store opens: ``StoreOpenError`` when no retry can get
    past it (above, or a DSN that does not parse), else as ``postgres_error``."""
    message = _first_line(exc)
    if isinstance(exc, psycopg.ProgrammingError):
        return StoreOpenError(f"{store!r}: the connection string does not parse: {message}")
    if isinstance(exc, psycopg.OperationalError) and any(words in str(exc) for words in _PG_REFUSED):
        return StoreOpenError(f"{store!r}: {message}")
    return postgres_error(store, exc, timeout=timeout)


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


#: What a PostgreSQL store catches and maps.
POSTGRES_ERRORS = (psycopg.Error, PoolTimeout)

__all__ = ["POSTGRES_ERRORS", "postgres_error", "postgres_open_error"]
