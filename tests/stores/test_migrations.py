"""Schema migrations from the golden fixtures (issue 10, ADR 0009).

Every migration is applied to a copy of each golden store (SQLite and the
PostgreSQL dump): after it, everything the golden test checks still holds;
running it again changes nothing; a dry run changes nothing; the migrated
schema equals a fresh store's. The machinery is also exercised with a
migration injected by the test, so these tests bite before the first real
schema change ships.
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
from ctxengine.errors import StoreError
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
        versions = pg.execute("SELECT component, version FROM ctxengine_schema_version").fetchall()
    return sorted(
        [
            *(("column", *c) for c in columns),
            *(("index", *i) for i in indexes),
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


async def test_revision_2_gives_golden_sessions_token_counts_and_carries(golden_url: tuple[str, str]) -> None:
    """The first real migration (issue 13): a golden store, migrated, takes turns of a new
    session with the features revision 2 serves (counts stored beside items, carries), and a
    golden session still reads as recorded."""
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


async def test_revision_3_moves_sqlite_payloads_out_of_the_key_btree(tmp_path: Path) -> None:
    """Revision 3 (issue 13): the golden SQLite store's events and checkpoints end up in
    rowid tables (keys in an index of keys only) with the payload as the last column, every
    row copied as it was: the same rows, column by column, before and after."""
    url = goldenkit.sqlite_copy(tmp_path)
    path = url[len("sqlite:///") :]

    def rows() -> dict[str, list[tuple[Any, ...]]]:
        conn = sqlite3.connect(path)
        try:
            return {
                "events": conn.execute(
                    "SELECT session_id, sequence, type, payload, derivation_key, run_id, actor, "
                    "visibility_scope, visibility_id, created_at, schema_version FROM ctxengine_events "
                    "ORDER BY session_id, sequence"
                ).fetchall(),
                "checkpoints": conn.execute(
                    "SELECT run_id, version, kind, trigger, payload, lease_epoch, created_at, schema_version "
                    "FROM ctxengine_checkpoints ORDER BY run_id, version"
                ).fetchall(),
            }
        finally:
            conn.close()

    before = rows()
    assert before["events"] and before["checkpoints"]
    await migrate_store(url)
    assert rows() == before
    conn = sqlite3.connect(path)
    try:
        for table in ("ctxengine_events", "ctxengine_checkpoints"):
            (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()
            assert "WITHOUT ROWID" not in sql.upper()
            columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            assert columns[-1] == "payload"
    finally:
        conn.close()
