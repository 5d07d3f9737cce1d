"""Store adapters and ``open_store(url)``.

URLs:

* ``memory://`` -> ``MemoryStore``
* ``sqlite:///relative/file.db`` -> ``SQLiteStore`` of ``relative/file.db`` in the working
  directory at the open (three slashes: the path after them is relative);
  ``sqlite:////abs/path/file.db`` -> ``SQLiteStore("/abs/path/file.db")`` (four slashes: an
  absolute path), as SQLAlchemy reads SQLite URLs. The path is percent-decoded.
  ``sqlite:///:memory:`` -> a private in-memory database
* ``postgresql://...`` or ``postgres://...`` -> ``PostgresStore(url)``
  (any libpq URI, passed through unchanged)

A URL that names no store it could ever open is ``StoreOpenError`` (ADR 0010).
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from ..core import telemetry
from ..errors import StoreOpenError
from ..model.clock import Clock
from ._sql import DEFAULT_STATEMENT_TIMEOUT
from .events import Store
from .memory import MemoryStore
from .migrations import MigrationReport
from .sqlite import SQLiteStore

if TYPE_CHECKING:
    from .postgres import PostgresStore

log = logging.getLogger("ctxengine.stores")

#: The extra that installs the PostgreSQL driver (psycopg and psycopg-pool).
POSTGRES_EXTRA = "ctxengine[postgres]"


def postgres_store_class() -> type[PostgresStore]:
    """``PostgresStore``, importing psycopg now: only a PostgreSQL store needs the driver, so
    ``import ctxengine`` does not load it. Without it, ``StoreOpenError`` names the extra."""
    try:
        from .postgres import PostgresStore
    except ImportError as exc:
        if exc.name is None or exc.name.split(".")[0] not in ("psycopg", "psycopg_pool"):
            raise
        raise StoreOpenError(
            f"a PostgreSQL store needs the driver, which is not installed ({exc}): "
            f"install the postgres extra, pip install '{POSTGRES_EXTRA}'"
        ) from exc
    return PostgresStore


def __getattr__(name: str) -> Any:
    # ``ctxengine.stores.PostgresStore``, loaded on first use (PEP 562).
    if name == "PostgresStore":
        return postgres_store_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: The SQLite URL forms, for error messages.
SQLITE_FORMS = "sqlite:///relative.db, sqlite:////absolute/path.db or sqlite:///:memory:"


def _sqlite_path(url: str) -> str:
    """The file a ``sqlite://`` URL names: after ``sqlite:///``, a relative path (resolved
    against the working directory now) or, with a fourth slash, an absolute one."""
    rest = url[len("sqlite://") :]
    if rest in ("/:memory:", ":memory:"):
        return ":memory:"
    if not rest.startswith("/") or rest.strip("/") == "" or "?" in rest or "#" in rest:
        raise StoreOpenError(f"SQLite store URL {url!r}: expected {SQLITE_FORMS}")
    try:
        path = unquote(rest[1:], errors="strict")
    except UnicodeDecodeError:
        raise StoreOpenError(
            f"SQLite store URL {url!r}: the path is not UTF-8 once percent-decoded"
        ) from None
    if "\x00" in path:
        raise StoreOpenError(f"SQLite store URL {url!r}: the path contains a NUL character (%00)")
    return os.path.abspath(path)


async def open_store(url: str, *, clock: Clock | None = None, **options: Any) -> Store:
    """Open (and create, check and migrate the schema of) the store that ``url`` names.

    ``options`` go to the adapter's constructor (e.g. ``busy_timeout`` for
    SQLite, ``max_size`` for PostgreSQL; for every store ``write_policy``,
    and for the SQL stores ``migrate=False`` to refuse to work on a schema
    with pending migrations instead of applying them; ADR 0009;
    ``read_only=True`` to read an existing store without creating, migrating
    or changing anything, and ``statement_timeout``; ADR 0010). A memory
    store ignores both (it is new and empty either way, and runs no statements).

    Errors that no retry gets past (a bad URL, a path that is not a regular
    file, a missing directory, a file that is not a ctxengine store, a
    PostgreSQL database that does not exist) are ``StoreOpenError``;
    ``StoreUnavailable`` means "try again".
    """
    if not isinstance(url, str):
        raise StoreOpenError(f"store URL must be a str, got {type(url).__name__}")
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    kind = {"postgres": "postgresql"}.get(scheme, scheme)
    with telemetry.span("ctxengine.store.open", store=kind, read_only=bool(options.get("read_only"))) as span:
        store = await _open(url, scheme, clock, options)
        if span.is_recording():
            telemetry.set_attributes(span, {"store.name": repr(store)})
    telemetry.add("ctxengine.store.opens", store=kind)
    log.debug("opened %r", store)
    return store


async def _open(url: str, scheme: str, clock: Clock | None, options: dict[str, Any]) -> Store:
    if scheme == "memory":
        if url.rstrip("/") != "memory:":
            raise StoreOpenError(f"memory store URL {url!r}: expected exactly memory://")
        options.pop("read_only", None)
        options.pop("statement_timeout", None)
        return await MemoryStore(clock=clock, **options).open()
    if scheme == "sqlite":
        if not url.startswith("sqlite://"):
            raise StoreOpenError(f"SQLite store URL {url!r}: expected {SQLITE_FORMS}")
        return await SQLiteStore(_sqlite_path(url), clock=clock, **options).open()
    if scheme in ("postgresql", "postgres"):
        return await postgres_store_class()(url, clock=clock, **options).open()
    shown = url.split("@")[-1] if "@" in url else url  # never echo credentials
    raise StoreOpenError(
        f"unknown store URL scheme {scheme or '<none>'!r} in {shown!r}; "
        "expected memory://, sqlite:///relative.db, sqlite:////absolute/path.db or postgresql://..."
    )


async def migrate_store(
    url: str, *, dry_run: bool = False, statement_timeout: float | None = DEFAULT_STATEMENT_TIMEOUT
) -> MigrationReport:
    """Apply the pending schema migrations of the store ``url`` names (``ctxengine migrate``).

    Idempotent: a second run applies nothing. ``dry_run`` opens the store
    read-only and reports what would be applied: it creates no file, writes
    nothing and never changes the journal mode; a location that holds no
    ctxengine store is ``StoreOpenError``. ``statement_timeout`` bounds the
    statements that read the schema (``StatementTimeout``); migrations
    themselves run without it.
    """
    store = await open_store(url, migrate=False, read_only=dry_run, statement_timeout=statement_timeout)
    try:
        return await store.migrate(dry_run=dry_run)
    finally:
        await store.close()


__all__ = [
    "DEFAULT_STATEMENT_TIMEOUT",
    "MemoryStore",
    "PostgresStore",
    "SQLiteStore",
    "migrate_store",
    "open_store",
]
