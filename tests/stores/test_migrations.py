"""Schema migrations from the golden fixtures (issue 10, ADR 0009; squashed in issue 36).

The stores in ``tests/golden`` are at revision 1. The migration to the current schema is
applied to a copy of each (SQLite and the PostgreSQL dump): after it, everything the golden
test checks still holds and every row reads back as it was; running it again changes
nothing; a dry run changes nothing; the migrated schema equals a new store's, which is
created at the current revision in one step. The revisions 2 to 5 that only development
builds wrote are refused, naming the revision. The machinery is also exercised with a
migration injected by the test, so these tests bite before the next schema change ships.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import ctxengine as ce
from ctxengine.errors import StoreError, StoreOpenError
from ctxengine.stores import migrate_store, migrations
from storekit import postgres_bin

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "golden"))
import goldenkit

#: A harmless additive change standing in for a real one.
INJECTED = migrations.Migration(
    revision=migrations.latest_revision() + 1,
    name="test: index events by run",
    sqlite=("CREATE INDEX ctxengine_test_events_by_run ON ctxengine_events (run_id)",),
    postgres=("CREATE INDEX ctxengine_test_events_by_run ON ctxengine_events (run_id)",),
)


def schema_of(url: str) -> list[tuple[Any, ...]]:
    """The store's tables, columns, indexes and schema-version rows, comparable across runs."""
    if url.startswith("sqlite://"):
        conn = sqlite3.connect(url[len("sqlite:///") :])
        try:
            objects = conn.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' "
                "ORDER BY type, name"
            ).fetchall()
            versions = conn.execute("SELECT component, version FROM ctxengine_schema_version").fetchall()
        finally:
            conn.close()
        return sorted([*objects, *(("version", *v) for v in versions)])
    with psycopg.connect(url) as pg:
        columns = pg.execute(
            "SELECT table_name, column_name, data_type, is_nullable, column_default "
            "FROM information_schema.columns WHERE table_schema = current_schema()"
        ).fetchall()
        indexes = pg.execute(
            "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()"
        ).fetchall()
        functions = pg.execute(
            "SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p "
            "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = current_schema()"
        ).fetchall()
        versions = pg.execute("SELECT component, version FROM ctxengine_schema_version").fetchall()
    return sorted(
        [
            *(("column", *c) for c in columns),
            *(("index", *i) for i in indexes),
            *(("function", *f) for f in functions),
            *(("version", *v) for v in versions),
        ],
        key=repr,
    )


@pytest.fixture(params=("sqlite", "postgres"))
def golden_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(kind, URL) of a fresh, not yet opened copy of a golden store."""
    kind: str = request.param
    if kind == "sqlite":
        yield kind, goldenkit.sqlite_copy(tmp_path)
        return
    server = request.getfixturevalue("postgres_dsn")
    bin_dir = postgres_bin()
    assert bin_dir is not None
    with goldenkit.postgres_copy(server, bin_dir / "psql") as dsn:
        yield kind, dsn


@pytest.fixture
def fresh_url(request: pytest.FixtureRequest, golden_url: tuple[str, str], tmp_path: Path) -> Iterator[str]:
    """A URL for a brand-new store of the same kind as ``golden_url``."""
    kind, url = golden_url
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    name = f"fresh_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    fresh = url.rsplit("/", 1)[0] + f"/{name}"
    try:
        yield fresh
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(params=["shipped", "injected"])
def chain(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> tuple[migrations.Migration, ...]:
    """The migrations under test: the shipped ones, and the shipped ones plus a test migration."""
    if request.param == "injected":
        monkeypatch.setattr(migrations, "MIGRATIONS", (*migrations.MIGRATIONS, INJECTED))
    return migrations.MIGRATIONS


async def check_golden(url: str, kind: str) -> None:
    store = await ce.open_store(url)
    try:
        want = goldenkit.expected(kind)
        got = await goldenkit.read_back(store, want["runs"])
        assert got["sessions"] == want["sessions"]
        assert got["phases"] == want["phases"]
    finally:
        await store.close()


async def test_golden_stores_migrate_and_still_read(
    golden_url: tuple[str, str], chain: tuple[migrations.Migration, ...], backend: str
) -> None:
    kind, url = golden_url
    before = schema_of(url)
    dry = await migrate_store(url, dry_run=True)
    assert dry.pending == tuple(migrations.describe(m) for m in chain)
    assert dry.applied == () and dry.dry_run
    assert schema_of(url) == before, "a dry run changed the schema"

    report = await migrate_store(url)
    assert report.from_revision == migrations.BASE_REVISION
    assert report.to_revision == migrations.latest_revision()
    assert report.applied == dry.pending
    migrated = schema_of(url)
    await check_golden(url, kind)

    again = await migrate_store(url)
    assert again.applied == () and again.from_revision == again.to_revision == migrations.latest_revision()
    assert schema_of(url) == migrated, "running the migrations twice changed the schema"


async def test_a_migrated_store_has_a_fresh_stores_schema(
    golden_url: tuple[str, str], fresh_url: str, chain: tuple[migrations.Migration, ...]
) -> None:
    _, url = golden_url
    await migrate_store(url)
    store = await ce.open_store(fresh_url)
    await store.close()
    assert schema_of(url) == schema_of(fresh_url)


async def test_open_store_migrates_once_under_concurrent_openers(golden_url: tuple[str, str]) -> None:
    kind, url = golden_url
    chain = (*migrations.MIGRATIONS, INJECTED)
    original = migrations.MIGRATIONS
    migrations.MIGRATIONS = chain
    try:
        stores = await asyncio.gather(*(ce.open_store(url) for _ in range(4)))
        for store in stores:
            await store.close()
        assert (await migrate_store(url)).applied == ()
    finally:
        migrations.MIGRATIONS = original
    assert ("version", "store.revision", INJECTED.revision) in schema_of(url)
    await check_golden(url, kind)


async def test_a_store_with_pending_migrations_refuses_work_without_migrate(
    golden_url: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, url = golden_url
    monkeypatch.setattr(migrations, "MIGRATIONS", (*migrations.MIGRATIONS, INJECTED))
    store = await ce.open_store(url, migrate=False)
    try:
        with pytest.raises(StoreError, match="ctxengine migrate") as err:
            await store.events.read("golden-demo")
        assert INJECTED.name in str(err.value)
        with pytest.raises(StoreError, match="ctxengine migrate"):
            async with store.transaction():
                pass
        await store.migrate()
        assert len(await store.events.read("golden-demo")) == 427
    finally:
        await store.close()


async def test_cli_migrate_dry_run_then_apply(
    golden_url: tuple[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ctxengine.cli import main

    _, url = golden_url
    monkeypatch.setattr(migrations, "MIGRATIONS", (*migrations.MIGRATIONS, INJECTED))
    before = schema_of(url)
    assert await asyncio.to_thread(main, ["migrate", url, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"would apply migration {migrations.describe(INJECTED)}" in out
    assert schema_of(url) == before
    assert await asyncio.to_thread(main, ["migrate", url]) == 0
    assert f"applied migration {migrations.describe(INJECTED)}" in capsys.readouterr().out
    assert await asyncio.to_thread(main, ["migrate", url]) == 0
    assert "up to date" in capsys.readouterr().out


async def test_a_migrated_golden_store_takes_turns_with_counts_and_carries(
    golden_url: tuple[str, str],
) -> None:
    """A golden store, migrated, takes turns of a new session with the features the current
    schema serves (counts stored beside items, carries), and a golden session still reads as
    recorded."""
    from ctxengine.cli.turns import ScriptedWorker
    from ctxengine.model import ResolvedModel
    from ctxengine.runtime.carry import CARRY_RECORDED
    from ctxengine.runtime.seeding import HISTORY

    kind, url = golden_url
    await migrate_store(url)
    store = await ce.open_store(url)
    try:
        worker = ScriptedWorker(store, model=ResolvedModel("bench", "model-16k", 16_000, 2_048, 2_048))
        for turn in range(1, 46):
            await worker.turn("after-upgrade", turn)
        assert await store.events.read("after-upgrade", types=[CARRY_RECORDED])
        counter = worker.estimator.counter_id(worker.model.model_id, HISTORY)
        rows = await store.events.read_items("after-upgrade", counter=counter)
        assert rows and all(row.tokens is not None for row in rows)
    finally:
        await store.close()
    await check_golden(url, kind)


EVENT_COLUMNS = (
    "session_id, sequence, type, payload, derivation_key, run_id, actor, visibility_scope, "
    "visibility_id, created_at, schema_version"
)
CHECKPOINT_COLUMNS = "run_id, version, kind, trigger, payload, lease_epoch, created_at, schema_version"


def rows_of(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every stored row of the store, column by column, in key order."""
    queries = {
        "events": f"SELECT {EVENT_COLUMNS} FROM ctxengine_events ORDER BY session_id, sequence",
        "checkpoints": f"SELECT {CHECKPOINT_COLUMNS} FROM ctxengine_checkpoints ORDER BY run_id, version",
        "leases": "SELECT run_id, owner, epoch FROM ctxengine_checkpoint_leases ORDER BY run_id",
    }
    if url.startswith("sqlite://"):
        conn = sqlite3.connect(url[len("sqlite:///") :])
        try:
            return {name: conn.execute(sql).fetchall() for name, sql in queries.items()}
        finally:
            conn.close()
    with psycopg.connect(url) as pg:
        return {name: pg.execute(sql).fetchall() for name, sql in queries.items()}


async def test_the_migration_keeps_every_row_as_it_was(golden_url: tuple[str, str]) -> None:
    """A revision-1 store (the golden SQLite file and PostgreSQL dump) migrates to the current
    schema with every event, checkpoint and lease row as it was, column by column."""
    kind, url = golden_url
    before = rows_of(url)
    assert before["events"] and before["checkpoints"] and before["leases"]
    report = await migrate_store(url)
    assert (report.from_revision, report.to_revision) == (1, migrations.SCHEMA_REVISION)
    assert rows_of(url) == before
    await check_golden(url, kind)


async def test_sqlite_payloads_move_out_of_the_key_btree(tmp_path: Path) -> None:
    """On SQLite the golden store's events and checkpoints end up in rowid tables (keys in an
    index of keys only) with the payload as the last column (ADR 0011)."""
    url = goldenkit.sqlite_copy(tmp_path)
    await migrate_store(url)
    conn = sqlite3.connect(url[len("sqlite:///") :])
    try:
        for table in ("ctxengine_events", "ctxengine_checkpoints"):
            (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()
            assert "WITHOUT ROWID" not in sql.upper()
            columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            assert columns[-1] == "payload"
    finally:
        conn.close()


async def test_a_new_store_is_created_at_the_current_schema_in_one_step(
    fresh_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new store runs no migration: it is created at the current revision at once (the
    migration from revision 1 is replaced by one that would fail if it ran)."""
    failing = migrations.Migration(
        migrations.SCHEMA_REVISION,
        "must not run",
        sqlite=("SELECT no_such_column",),
        postgres=("SELECT no_such_column",),
    )
    monkeypatch.setattr(migrations, "MIGRATIONS", (failing,))
    store = await ce.open_store(fresh_url)
    await store.close()
    report = await migrate_store(fresh_url)
    assert (report.from_revision, report.to_revision, report.applied) == (
        migrations.SCHEMA_REVISION,
        migrations.SCHEMA_REVISION,
        (),
    )
    versions = [row for row in schema_of(fresh_url) if row[0] == "version"]
    assert versions == [("version", "store", 1), ("version", "store.revision", migrations.SCHEMA_REVISION)]


def set_revision(url: str, revision: int) -> None:
    sql = "UPDATE ctxengine_schema_version SET version = {mark} WHERE component = 'store.revision'"
    if url.startswith("sqlite://"):
        conn = sqlite3.connect(url[len("sqlite:///") :])
        try:
            conn.execute(sql.format(mark="?"), (revision,))
            conn.commit()
        finally:
            conn.close()
        return
    with psycopg.connect(url) as pg:
        pg.execute(sql.format(mark="%s"), (revision,))


@pytest.mark.parametrize("revision", [2, 3, 4, 5])
async def test_a_store_at_an_unreleased_revision_is_refused_naming_it(
    fresh_url: str, revision: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """Revisions 2 to 5 were written only by development builds before 0.2.0: opening such a
    store (to migrate it, read-only, or by a dry run) fails with ``StoreOpenError`` naming the
    revision and what to do, and changes nothing."""
    from ctxengine.cli import main

    store = await ce.open_store(fresh_url)
    await store.close()
    set_revision(fresh_url, revision)
    before = schema_of(fresh_url)
    why = rf"schema revision {revision}, which only development builds before ctxengine 0\.2\.0 wrote"
    for opening in (
        lambda: ce.open_store(fresh_url),
        lambda: ce.open_store(fresh_url, read_only=True),
        lambda: migrate_store(fresh_url, dry_run=True),
        lambda: migrate_store(fresh_url),
    ):
        with pytest.raises(StoreOpenError, match=why) as err:
            await opening()
        assert "create the store anew" in str(err.value)
    assert await asyncio.to_thread(main, ["migrate", fresh_url, "--dry-run"]) == 2
    assert f"schema revision {revision}" in capsys.readouterr().err
    assert schema_of(fresh_url) == before
