"""Opening a ``PostgresStore``'s pool: a permanent failure to connect is told at once.

The pool connects in the background and retries until its timeout, which is right for a
server that is down or restarting (``StoreUnavailable``) and wrong for a database or role
that does not exist, a refused login or a bad DSN, which no retry gets past. Each of the
pool's connections reports its failure to connect (``ConnectFailures``), so ``filled`` ends
the wait for the pool's first connections with ``StoreOpenError`` as soon as one of those
is seen, without a connection of its own (which cost a fresh worker's first request
2.4 ms).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from ..errors import StoreOpenError
from .postgres_errors import POSTGRES_ERRORS, postgres_error, postgres_open_error

Conn = AsyncConnection[Any]

# The driver's own log lines (the pool's "error connecting ..." on every failed attempt) stay in
# the logging tree: with no handler anywhere above them, logging's last resort printed them to
# stderr beside the typed error the store raises. An application that configures logging still
# receives them (a NullHandler neither filters nor stops propagation).
logging.getLogger("psycopg").addHandler(logging.NullHandler())


class ConnectFailures:
    """The last failure to connect of a pool's connections, and an event set on each (so
    opening a store can tell a permanent error at once instead of after the pool's timeout)."""

    def __init__(self) -> None:
        self.last: Exception | None = None
        self.event = asyncio.Event()

    def connection_class(self) -> type[Conn]:
        failures = self

        class Watched(AsyncConnection[Any]):
            @classmethod
            async def connect(cls, conninfo: str = "", **kwargs: Any) -> Watched:
                try:
                    return await super().connect(conninfo, **kwargs)
                except psycopg.Error as exc:
                    failures.last = exc
                    failures.event.set()
                    raise

        return Watched


async def filled(
    store: object, pool: AsyncConnectionPool[Conn], failures: ConnectFailures, timeout: float
) -> None:
    """Wait for ``pool``'s first connections; a failure to connect that no retry gets past
    (``postgres_open_error``) ends the wait at once as ``StoreOpenError``; any other leaves
    the pool retrying until ``timeout`` (``StoreUnavailable``)."""
    waited = asyncio.ensure_future(pool.wait(timeout=timeout))
    try:
        while not waited.done():
            failed = asyncio.ensure_future(failures.event.wait())
            try:
                await asyncio.wait({waited, failed}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                failed.cancel()
            if failures.last is not None and not waited.done():
                exc, failures.last = failures.last, None
                failures.event.clear()
                found = postgres_open_error(store, exc, timeout=timeout)
                if isinstance(found, StoreOpenError):
                    raise found from exc
        try:
            waited.result()
        except POSTGRES_ERRORS as exc:
            raise postgres_error(store, exc, timeout=timeout) from exc
    finally:
        waited.cancel()


__all__ = ["ConnectFailures", "filled"]
