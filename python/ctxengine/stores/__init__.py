"""Store adapters and ``open_store(url)``.

URLs:

* ``memory://`` -> ``MemoryStore``
* ``sqlite:///abs/path/to/file.db`` -> ``SQLiteStore("/abs/path/to/file.db")``
  (three slashes and an absolute path, as in ``file://`` URLs);
  ``sqlite:///:memory:`` -> a private in-memory database
* ``postgresql://...`` or ``postgres://...`` -> ``PostgresStore(url)``
  (any libpq URI, passed through unchanged)
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from ..errors import StoreError
from ..model.clock import Clock
from .events import Store
from .memory import MemoryStore
from .migrations import MigrationReport
from .postgres import PostgresStore
from .sqlite import SQLiteStore


def _sqlite_path(url: str) -> str:
    rest = url[len("sqlite://") :]
    if rest in ("/:memory:", ":memory:"):
        return ":memory:"
    if not rest.startswith("/") or rest == "/" or "?" in rest or "#" in rest:
        raise StoreError(f"SQLite store URL {url!r}: expected sqlite:///absolute/path or sqlite:///:memory:")
    return unquote(rest)


async def open_store(url: str, *, clock: Clock | None = None, **options: Any) -> Store:
    """Open (and create, check and migrate the schema of) the store that ``url`` names.

    ``options`` go to the adapter's constructor (e.g. ``busy_timeout`` for
    SQLite, ``max_size`` for PostgreSQL; for every store ``write_policy``,
    and for the SQL stores ``migrate=False`` to refuse to work on a schema
    with pending migrations instead of applying them; ADR 0009).
    """
    if not isinstance(url, str):
        raise StoreError(f"store URL must be a str, got {type(url).__name__}")
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "memory":
        if url.rstrip("/") != "memory:":
            raise StoreError(f"memory store URL {url!r}: expected exactly memory://")
        return await MemoryStore(clock=clock, **options).open()
    if scheme == "sqlite":
        if not url.startswith("sqlite://"):
            raise StoreError(f"SQLite store URL {url!r}: expected sqlite:///absolute/path")
        return await SQLiteStore(_sqlite_path(url), clock=clock, **options).open()
    if scheme in ("postgresql", "postgres"):
        return await PostgresStore(url, clock=clock, **options).open()
    shown = url.split("@")[-1] if "@" in url else url  # never echo credentials
    raise StoreError(
        f"unknown store URL scheme {scheme or '<none>'!r} in {shown!r}; "
        "expected memory://, sqlite:///path or postgresql://..."
    )


async def migrate_store(url: str, *, dry_run: bool = False) -> MigrationReport:
    """Apply the pending schema migrations of the store ``url`` names (``ctxengine migrate``).

    Idempotent: a second run applies nothing. ``dry_run`` reports what would
    be applied and changes nothing (a new store's tables are not created).
    """
    store = await open_store(url, migrate=False)
    try:
        return await store.migrate(dry_run=dry_run)
    finally:
        await store.close()


__all__ = ["MemoryStore", "PostgresStore", "SQLiteStore", "migrate_store", "open_store"]
