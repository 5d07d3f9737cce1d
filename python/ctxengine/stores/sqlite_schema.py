"""The SQLite store's file opened: its connection, schema and migrations (ADR 0009).

``schema()`` creates a new store at the base revision and applies pending
migrations in one ``BEGIN IMMEDIATE`` transaction (the file's write lock),
so concurrent openers create and migrate once; a dry run reports and rolls
back. It runs on the store's worker thread, after ``write_ahead_log``.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Literal

from . import migrations

Synchronous = Literal["FULL", "NORMAL"]

DDL = (
    """
    CREATE TABLE ctxengine_events (
        session_id       TEXT    NOT NULL,
        sequence         INTEGER NOT NULL CHECK (sequence >= 1),
        type             TEXT    NOT NULL,
        payload          TEXT    NOT NULL,
        derivation_key   TEXT    NOT NULL,
        run_id           TEXT,
        actor            TEXT    NOT NULL,
        visibility_scope TEXT    NOT NULL,
        visibility_id    TEXT,
        created_at       TEXT    NOT NULL,
        schema_version   INTEGER NOT NULL,
        PRIMARY KEY (session_id, sequence),
        UNIQUE (session_id, derivation_key)
    ) WITHOUT ROWID
    """,
    # latest_before and plan reconstruction look events up by type.
    "CREATE INDEX ctxengine_events_by_type ON ctxengine_events (session_id, type, sequence)",
    """
    CREATE TABLE ctxengine_checkpoint_leases (
        run_id TEXT    NOT NULL PRIMARY KEY,
        owner  TEXT    NOT NULL,
        epoch  INTEGER NOT NULL
    )
    """,
    """
    CREATE TABLE ctxengine_checkpoints (
        run_id         TEXT    NOT NULL,
        version        INTEGER NOT NULL CHECK (version >= 1),
        kind           TEXT    NOT NULL,
        trigger        TEXT    NOT NULL,
        payload        TEXT    NOT NULL,
        lease_epoch    INTEGER NOT NULL,
        created_at     TEXT    NOT NULL,
        schema_version INTEGER NOT NULL,
        PRIMARY KEY (run_id, version)
    ) WITHOUT ROWID
    """,
)


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


def schema(conn: sqlite3.Connection, path: str, apply: bool) -> migrations.MigrationReport:
    """Create or check the schema and, when ``apply``, migrate it, all under the write lock.

    ``apply=False`` is a dry run: it reports and rolls everything back, even
    the creation of a new store's tables.
    """
    where = f"SQLite store {path!r}"

    def run() -> migrations.MigrationReport:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS ctxengine_schema_version "
            "(component TEXT NOT NULL PRIMARY KEY, version INTEGER NOT NULL)"
        )
        found = dict(conn.execute("SELECT component, version FROM ctxengine_schema_version").fetchall())
        if migrations.COMPONENT_LEVEL not in found:
            for statement in DDL:
                conn.execute(statement)
            level, revision = migrations.COMPAT_LEVEL, migrations.BASE_REVISION
            _set_component(conn, migrations.COMPONENT_LEVEL, level)
            _set_component(conn, migrations.COMPONENT_REVISION, revision)
        else:
            level = migrations.check_level(where, found[migrations.COMPONENT_LEVEL])
            revision = migrations.check_revision(
                where, found.get(migrations.COMPONENT_REVISION, migrations.BASE_REVISION)
            )
        if migrations.COMPONENT_REVISION not in found:
            # A store from before revisions were tracked is at the base revision.
            _set_component(conn, migrations.COMPONENT_REVISION, revision)
        todo = migrations.pending(revision)
        for migration in todo:
            for statement in migration.sqlite:
                conn.execute(statement)
            _set_component(conn, migrations.COMPONENT_REVISION, migration.revision)
        return migrations.MigrationReport(
            where,
            level,
            revision,
            todo[-1].revision if todo else revision,
            tuple(migrations.describe(m) for m in todo),
            tuple(migrations.describe(m) for m in todo) if apply else (),
            not apply,
        )

    if conn.in_transaction:
        conn.execute("ROLLBACK")
    conn.execute("BEGIN IMMEDIATE")
    try:
        report = run()
        conn.execute("COMMIT" if apply else "ROLLBACK")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return report


def connect(path: str, busy_timeout: float, synchronous: Synchronous, cache_kib: int) -> sqlite3.Connection:
    """The store's connection to ``path``, in write-ahead-log mode."""
    # isolation_level=None: the module never opens transactions behind our
    # back, so every transaction here is the BEGIN IMMEDIATE we issue.
    conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        write_ahead_log(conn, busy_timeout)
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute(f"PRAGMA cache_size = -{int(cache_kib)}")
    except BaseException:
        conn.close()
        raise
    return conn


def open_database(
    path: str, busy_timeout: float, synchronous: Synchronous, cache_kib: int, apply: bool
) -> tuple[sqlite3.Connection, migrations.MigrationReport]:
    """Connect and create, check or migrate the schema (closing the connection on failure)."""
    conn = connect(path, busy_timeout, synchronous, cache_kib)
    try:
        return conn, schema(conn, path, apply)
    except BaseException:
        conn.close()
        raise


def _set_component(conn: sqlite3.Connection, component: str, version: int) -> None:
    conn.execute(
        "INSERT INTO ctxengine_schema_version (component, version) VALUES (?, ?) "
        "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
        (component, version),
    )


__all__ = ["DDL", "Synchronous", "connect", "open_database", "schema", "write_ahead_log"]
