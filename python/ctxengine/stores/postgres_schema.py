"""The PostgreSQL store's schema: the base tables and their migration (ADR 0009).

``schema()`` creates a new store at the base revision and applies pending
migrations, all in one transaction under an advisory lock, so concurrent
openers create and migrate once; a dry run reports and rolls back.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection, errors

from . import migrations

Conn = AsyncConnection[Any]
# pg_advisory_xact_lock key serializing schema creation across processes
# (CREATE TABLE IF NOT EXISTS alone races on the catalog).
MIGRATION_LOCK = 0x63747865_6E67  # "ctxeng"

DDL = (
    """
    CREATE TABLE ctxengine_events (
        session_id       TEXT        NOT NULL,
        sequence         BIGINT      NOT NULL CHECK (sequence >= 1),
        type             TEXT        NOT NULL,
        payload          TEXT        NOT NULL,
        derivation_key   TEXT        NOT NULL,
        run_id           TEXT,
        actor            TEXT        NOT NULL,
        visibility_scope TEXT        NOT NULL,
        visibility_id    TEXT,
        created_at       TIMESTAMPTZ NOT NULL,
        schema_version   INTEGER     NOT NULL,
        CONSTRAINT ctxengine_events_sequence_key PRIMARY KEY (session_id, sequence),
        CONSTRAINT ctxengine_events_derivation_key UNIQUE (session_id, derivation_key)
    )
    """,
    "CREATE INDEX ctxengine_events_by_type ON ctxengine_events (session_id, type, sequence)",
    """
    CREATE TABLE ctxengine_checkpoint_leases (
        run_id TEXT   NOT NULL PRIMARY KEY,
        owner  TEXT   NOT NULL,
        epoch  BIGINT NOT NULL
    )
    """,
    """
    CREATE TABLE ctxengine_checkpoints (
        run_id         TEXT        NOT NULL,
        version        BIGINT      NOT NULL CHECK (version >= 1),
        kind           TEXT        NOT NULL,
        trigger        TEXT        NOT NULL,
        payload        TEXT        NOT NULL,
        lease_epoch    BIGINT      NOT NULL,
        created_at     TIMESTAMPTZ NOT NULL,
        schema_version INTEGER     NOT NULL,
        PRIMARY KEY (run_id, version)
    )
    """,
)


class _DryRun(Exception):
    """Raised inside the schema transaction of a dry run so that it rolls back."""

    def __init__(self, report: migrations.MigrationReport) -> None:
        super().__init__("dry run")
        self.report = report


async def schema(conn: Conn, where: str, apply: bool) -> migrations.MigrationReport:
    """Create or check the schema and, when ``apply``, migrate it, under an advisory lock.

    ``apply=False`` is a dry run: it reports and rolls everything back.
    """
    current = await _up_to_date(conn, where, dry_run=not apply)
    if current is not None:
        return current
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS ctxengine_schema_version "
                "(component TEXT NOT NULL PRIMARY KEY, version INTEGER NOT NULL)"
            )
            found = dict(await _fetchall(conn, "SELECT component, version FROM ctxengine_schema_version"))
            if migrations.COMPONENT_LEVEL not in found:
                for statement in DDL:
                    await conn.execute(statement)
                level, revision = migrations.COMPAT_LEVEL, migrations.BASE_REVISION
                await _set_component(conn, migrations.COMPONENT_LEVEL, level)
                await _set_component(conn, migrations.COMPONENT_REVISION, revision)
            else:
                level = migrations.check_level(where, found[migrations.COMPONENT_LEVEL])
                revision = migrations.check_revision(
                    where, found.get(migrations.COMPONENT_REVISION, migrations.BASE_REVISION)
                )
            if migrations.COMPONENT_REVISION not in found:
                # A store from before revisions were tracked is at the base revision.
                await _set_component(conn, migrations.COMPONENT_REVISION, revision)
            todo = migrations.pending(revision)
            for migration in todo:
                for statement in migration.postgres:
                    await conn.execute(statement)
                await _set_component(conn, migrations.COMPONENT_REVISION, migration.revision)
            report = migrations.MigrationReport(
                where,
                level,
                revision,
                todo[-1].revision if todo else revision,
                tuple(migrations.describe(m) for m in todo),
                tuple(migrations.describe(m) for m in todo) if apply else (),
                not apply,
            )
            if not apply:
                raise _DryRun(report)
    except _DryRun as dry:
        return dry.report
    return report


async def _up_to_date(conn: Conn, where: str, *, dry_run: bool) -> migrations.MigrationReport | None:
    """The report of a store already at the latest revision, read without the migration lock
    (one statement: what every worker opening a store pays); ``None`` when anything is left
    to create or migrate, which then happens under the lock."""
    try:
        found = dict(await _fetchall(conn, "SELECT component, version FROM ctxengine_schema_version"))
    except errors.UndefinedTable:
        return None
    if migrations.COMPONENT_LEVEL not in found or migrations.COMPONENT_REVISION not in found:
        return None
    level = migrations.check_level(where, found[migrations.COMPONENT_LEVEL])
    revision = migrations.check_revision(where, found[migrations.COMPONENT_REVISION])
    if migrations.pending(revision):
        return None
    return migrations.MigrationReport(where, level, revision, revision, (), (), dry_run)


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


__all__ = ["DDL", "MIGRATION_LOCK", "schema"]
