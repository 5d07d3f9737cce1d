"""The SQLite store's schema and migrations (ADR 0009); ``sqlite_open`` opens the file.

``schema()`` creates a new store at the current schema, or applies a store's pending
migrations, in one ``BEGIN IMMEDIATE`` transaction (the file's write lock),
so concurrent openers create and migrate once; a dry run only reads the
version rows and writes nothing. It runs on the store's worker thread,
after ``write_ahead_log``.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Literal

from . import migrations, sqlite_ddl
from .sqlite_deadline import unbounded

Synchronous = Literal["FULL", "NORMAL"]

#: A new store's statements (the current schema).
DDL = sqlite_ddl.CURRENT


def write_ahead_log(conn: sqlite3.Connection, busy_timeout: float) -> None:
    """Put the file in write-ahead-log mode, waiting up to ``busy_timeout`` seconds for
    other openers. The mode change reads the file and then takes its write lock; when two
    processes open a new store at once, SQLite answers one of them "locked" at once rather
    than let both wait for each other, without calling the busy handler. So this waits
    itself (the other opener is done in milliseconds) and raises SQLite's error only when
    the time is up: the store then reports it as ``StoreUnavailable``."""
    deadline = time.monotonic() + busy_timeout
    pause = 0.002
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if not _busy(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return any(word in str(exc).lower() for word in ("locked", "busy"))


def schema(
    conn: sqlite3.Connection, path: str, apply: bool, create: bool = True
) -> migrations.MigrationReport:
    """Create or check the schema and, when ``apply``, migrate it, all under the write lock.

    ``apply=False`` (a dry run, a read-only open, ``migrate=False``) only reads the version
    rows: it writes nothing, not even a new store's tables, and reports what applying would
    do. A database without a store is a new one when ``create`` (it would be created at the
    current schema), else ``StoreOpenError``: a read-only open has nothing to read.
    """
    where = f"SQLite store {path!r}"
    if not apply:
        found = _components(conn)
        if found is None and not create:
            raise migrations.no_store(where)
        return migrations.report(where, found or {}, apply=False)

    def run() -> migrations.MigrationReport:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {migrations.VERSION_TABLE} "
            "(component TEXT NOT NULL PRIMARY KEY, version INTEGER NOT NULL)"
        )
        found = dict(conn.execute(f"SELECT component, version FROM {migrations.VERSION_TABLE}").fetchall())
        if migrations.COMPONENT_LEVEL not in found:  # a new store: the current schema at once
            for statement in DDL:
                conn.execute(statement)
            _set_component(conn, migrations.COMPONENT_LEVEL, migrations.COMPAT_LEVEL)
            _set_component(conn, migrations.COMPONENT_REVISION, migrations.SCHEMA_REVISION)
        elif migrations.COMPONENT_REVISION not in found:  # from before revisions were tracked
            _set_component(conn, migrations.COMPONENT_REVISION, migrations.BASE_REVISION)
        report = migrations.report(where, found, apply=True)
        for migration in migrations.pending(report.from_revision):
            with unbounded(conn):  # a migration may copy every row of a large store
                for statement in migration.sqlite:
                    conn.execute(statement)
            _set_component(conn, migrations.COMPONENT_REVISION, migration.revision)
        return report

    if conn.in_transaction:
        conn.execute("ROLLBACK")
    conn.execute("BEGIN IMMEDIATE")
    try:
        report = run()
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return report


def _components(conn: sqlite3.Connection) -> dict[str, object] | None:
    """The version rows, or ``None`` when the database has no version table."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (migrations.VERSION_TABLE,)
    ).fetchone()
    if exists is None:
        return None
    return dict(conn.execute(f"SELECT component, version FROM {migrations.VERSION_TABLE}").fetchall())


def _set_component(conn: sqlite3.Connection, component: str, version: int) -> None:
    conn.execute(
        "INSERT INTO ctxengine_schema_version (component, version) VALUES (?, ?) "
        "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
        (component, version),
    )


__all__ = ["DDL", "Synchronous", "schema", "write_ahead_log"]
