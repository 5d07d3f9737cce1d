"""The PostgreSQL store's schema (``postgres_ddl``): created or migrated under a lock (ADR 0009).

``schema()`` creates a new store at the current schema, or applies a store's pending
migrations, in one transaction under an advisory lock, so concurrent
openers create and migrate once; a dry run only reads and writes nothing.
"""

from __future__ import annotations

import math
from typing import Any

from psycopg import AsyncConnection, errors

from . import migrations, postgres_ddl

Conn = AsyncConnection[Any]
# pg_advisory_xact_lock key serializing schema creation across processes
# (CREATE TABLE IF NOT EXISTS alone races on the catalog).
MIGRATION_LOCK = 0x63747865_6E67  # "ctxeng"

#: A new store's statements (the current schema).
DDL = postgres_ddl.CURRENT


def connection_settings(statement_timeout: float | None, read_only: bool) -> str:
    """What every connection of a store sets first (one round trip; ``""``: nothing).

    ``statement_timeout`` (seconds; ``None``: the server's own setting): a statement that
    runs longer is cancelled, ``StatementTimeout``. ``read_only``: every transaction is
    read-only (``default_transaction_read_only``), and the store neither creates nor
    migrates its schema: an older revision is read as it is, a schema without a store is
    ``StoreOpenError``.
    """
    settings = []
    if statement_timeout is not None:
        settings.append(f"SET statement_timeout = {math.ceil(statement_timeout * 1000)}")
    if read_only:
        settings.append("SET default_transaction_read_only = on")
    return "; ".join(settings)


async def schema(conn: Conn, where: str, apply: bool, create: bool = True) -> migrations.MigrationReport:
    """Create or check the schema and, when ``apply``, migrate it, under an advisory lock.

    ``apply=False`` (a dry run, a read-only open, ``migrate=False``) only reads the version
    rows: it writes nothing and reports what applying would do. A schema without a store is
    a new one when ``create``, else ``StoreOpenError``. Migrations run without the
    connection's statement timeout (``SET LOCAL``): they may take long on a large store.
    """
    found = await _components(conn)
    if not apply:
        if found is None and not create:
            raise migrations.no_store(where)
        return migrations.report(where, found or {}, apply=False)
    if found is not None and migrations.COMPONENT_REVISION in found:
        current = migrations.report(where, found, apply=True)
        if not current.pending:  # what every worker opening a store pays: one statement, no lock
            return current
    async with conn.transaction():
        await conn.execute("SET LOCAL statement_timeout = 0")
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {migrations.VERSION_TABLE} "
            "(component TEXT NOT NULL PRIMARY KEY, version INTEGER NOT NULL)"
        )
        found = dict(await _fetchall(conn, f"SELECT component, version FROM {migrations.VERSION_TABLE}"))
        if migrations.COMPONENT_LEVEL not in found:  # a new store: the current schema at once
            for statement in DDL:
                await conn.execute(statement)
            await _set_component(conn, migrations.COMPONENT_LEVEL, migrations.COMPAT_LEVEL)
            await _set_component(conn, migrations.COMPONENT_REVISION, migrations.SCHEMA_REVISION)
        elif migrations.COMPONENT_REVISION not in found:  # from before revisions were tracked
            await _set_component(conn, migrations.COMPONENT_REVISION, migrations.BASE_REVISION)
        report = migrations.report(where, found, apply=True)
        for migration in migrations.pending(report.from_revision):
            for statement in migration.postgres:
                await conn.execute(statement)
            await _set_component(conn, migrations.COMPONENT_REVISION, migration.revision)
    return report


async def _components(conn: Conn) -> dict[Any, Any] | None:
    """The version rows, or ``None`` when the schema has no version table (one statement)."""
    try:
        return dict(await _fetchall(conn, f"SELECT component, version FROM {migrations.VERSION_TABLE}"))
    except errors.UndefinedTable:
        return None


async def _set_component(conn: Conn, component: str, version: int) -> None:
    await conn.execute(
        "INSERT INTO ctxengine_schema_version (component, version) VALUES (%s, %s) "
        "ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version",
        (component, version),
    )


async def _fetchall(conn: Conn, sql: str) -> list[tuple[Any, ...]]:
    cur = await conn.execute(sql)
    rows: list[tuple[Any, ...]] = await cur.fetchall()
    return rows


__all__ = ["DDL", "MIGRATION_LOCK", "connection_settings", "schema"]
