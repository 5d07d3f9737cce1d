"""Issue 37, finding 8: opening a store tells what no retry can fix (``StoreOpenError``, not
retryable) from what a retry can (``StoreUnavailable``); read-only opens create and change
nothing; runaway statements end at the statement timeout (``StatementTimeout``). On real
SQLite files and the harness's PostgreSQL server.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from ctxengine import ModelValidationError, StatementTimeout, StoreError, StoreOpenError, StoreUnavailable
from ctxengine.cli import main
from ctxengine.cli.bench_first import _env
from ctxengine.runtime.loop import CONTEXT_COMPACTED
from ctxengine.stores import migrate_store, open_store
from ctxengine.stores.events import NewEvent
from storekit import StoreCase, postgres_bin

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "golden"))
import goldenkit


def assert_permanent(err: pytest.ExceptionInfo[StoreError]) -> None:
    assert type(err.value) is StoreOpenError, repr(err.value)
    assert not err.value.retryable and not isinstance(err.value, StoreUnavailable)


# --------------------------------------------------------------------------
# SQLite: paths that can never be a store


def _directory(tmp: Path) -> Path:
    (tmp / "dir").mkdir()
    return tmp / "dir"


def _fifo(tmp: Path) -> Path:
    os.mkfifo(tmp / "fifo")
    return tmp / "fifo"


def _dev_zero(tmp: Path) -> Path:
    (tmp / "zero").symlink_to("/dev/zero")
    return tmp / "zero"


def _missing_parent(tmp: Path) -> Path:
    return tmp / "no-such-dir" / "s.db"


def _through_a_file(tmp: Path) -> Path:
    (tmp / "plain").write_text("x")
    return tmp / "plain" / "s.db"


def _not_a_database(tmp: Path) -> Path:
    (tmp / "notes.txt").write_text("these are not the pages you are looking for\n" * 200)
    return tmp / "notes.txt"


def _foreign(tmp: Path) -> Path:
    conn = sqlite3.connect(tmp / "app.db")
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    conn.commit()
    conn.close()
    return tmp / "app.db"


BAD_PATHS: dict[str, Callable[[Path], Path]] = {
    "directory": _directory,
    "fifo": _fifo,
    "symlink to /dev/zero": _dev_zero,
    "missing parent directory": _missing_parent,
    "path through a file": _through_a_file,
    "not a database": _not_a_database,
    "another application's database": _foreign,
}


@pytest.mark.parametrize("read_only", [False, True], ids=["read-write", "read-only"])
@pytest.mark.parametrize("case", list(BAD_PATHS))
async def test_a_sqlite_path_that_can_never_be_a_store_is_a_permanent_error(
    tmp_path: Path, case: str, read_only: bool
) -> None:
    path = BAD_PATHS[case](tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    start = time.monotonic()
    with pytest.raises(StoreError) as err:
        await open_store(f"sqlite:///{path}", read_only=read_only, busy_timeout=5.0)
    assert_permanent(err)
    assert time.monotonic() - start < 5.0  # not a busy wait, not a retry
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing created


async def test_another_applications_database_is_left_as_it_was(tmp_path: Path) -> None:
    path = _foreign(tmp_path)
    before = path.read_bytes()
    with pytest.raises(StoreOpenError, match="not a ctxengine store"):
        await open_store(f"sqlite:///{path}")
    with pytest.raises(StoreOpenError, match="not a ctxengine store"):
        await migrate_store(f"sqlite:///{path}", dry_run=True)
    assert path.read_bytes() == before
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    conn.close()


async def test_a_read_only_open_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(StoreOpenError, match="no such file"):
        await open_store(f"sqlite:///{tmp_path / 'typo.db'}", read_only=True)
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(StoreOpenError, match="holds no ctxengine store"):
        await open_store(f"sqlite:///{empty}", read_only=True)
    with pytest.raises(StoreOpenError, match="holds no ctxengine store"):
        await migrate_store(f"sqlite:///{empty}", dry_run=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"] and empty.stat().st_size == 0


async def test_a_read_only_store_reads_and_refuses_to_write(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = await open_store(url)
    await store.events.append(NewEvent("s", CONTEXT_COMPACTED, {"reason": "x"}, "k1"))
    await store.close()
    reader = await open_store(url, read_only=True)
    try:
        assert [e.sequence for e in await reader.events.read("s")] == [1]
        with pytest.raises(StoreError, match=r"readonly|read-only"):
            await reader.events.append(NewEvent("s", CONTEXT_COMPACTED, {"reason": "y"}, "k2"))
        with pytest.raises(StoreError, match="read-only"):
            await reader.migrate()
    finally:
        await reader.close()


@pytest.mark.parametrize(
    "url", ["sqlite:////tmp/a%00b.db", "sqlite:////tmp/a%ffb.db", "sqlite://relative.db"]
)
async def test_a_bad_sqlite_url_is_a_permanent_error(url: str) -> None:
    with pytest.raises(StoreError) as err:
        await open_store(url)
    assert_permanent(err)


async def test_a_locked_file_stays_transient(tmp_path: Path) -> None:
    """Another process holding the file's lock: "not now", a retry gets past it."""
    path = tmp_path / "s.db"
    store = await open_store(f"sqlite:///{path}")
    await store.close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode = DELETE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreUnavailable) as err:
            await open_store(f"sqlite:///{path}", busy_timeout=0.2)
        assert err.value.retryable
    finally:
        holder.execute("ROLLBACK")
        holder.close()


OPEN = """
import asyncio, sys
from ctxengine.stores import open_store
async def main(url, mode):
    try:
        store = await open_store(url, read_only=mode == "ro")
    except Exception as exc:
        print(type(exc).__name__, exc.retryable)
        return
    events = await store.events.read("s")
    await store.close()
    print("opened", len(events))
for url, mode in zip(sys.argv[1::2], sys.argv[2::2]):
    asyncio.run(main(url, mode))
"""


def _unshare_works() -> bool:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False).returncode == 0


def _open_in_read_only_directory(source: Path, mount: Path, *opens: str) -> list[str]:
    """Run OPEN on ``opens`` (url, mode, ...) with ``mount`` a read-only view of ``source``: a
    read-only bind mount in a private mount namespace (root writes through any mode bits), or
    the directory's mode bits for anyone else."""
    script = [sys.executable, "-c", OPEN, *opens]
    if os.geteuid() == 0:
        command = [
            "unshare", "-m", "sh", "-c",
            'mount --bind "$0" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"',
            str(source), str(mount), *script,
        ]  # fmt: skip
    else:
        source.chmod(0o555)
        command = script
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=_env(), timeout=60, check=False)
    finally:
        source.chmod(0o755)
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\n")[:-1]


@pytest.mark.skipif(
    os.geteuid() == 0 and not _unshare_works(), reason="as root, needs unshare -m to mount read-only"
)
def test_a_read_only_directory_is_a_permanent_error_for_a_writer_only(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    asyncio.run(_one_event_store(source / "s.db"))
    mount = tmp_path / "ro" if os.geteuid() == 0 else source
    mount.mkdir(exist_ok=True)
    found = _open_in_read_only_directory(
        source, mount, f"sqlite:///{mount / 'new.db'}", "rw", f"sqlite:///{mount / 's.db'}", "rw",
        f"sqlite:///{mount / 's.db'}", "ro",
    )  # fmt: skip
    assert found == ["StoreOpenError False", "StoreOpenError False", "opened 1"]
    assert sorted(p.name for p in source.iterdir()) == ["s.db"]


async def _one_event_store(path: Path) -> None:
    store = await open_store(f"sqlite:///{path}")
    await store.events.append(NewEvent("s", CONTEXT_COMPACTED, {"reason": "x"}, "k1"))
    await store.close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = DELETE")  # no -wal/-shm to create beside it
    conn.close()


# --------------------------------------------------------------------------
# runaway statements: the statement timeout


async def test_an_infinite_sqlite_view_ends_at_the_statement_timeout(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = await open_store(f"sqlite:///{path}")
    await store.close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TABLE ctxengine_events")
    conn.execute(
        "CREATE VIEW ctxengine_events AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
        "SELECT 's' AS session_id, n AS sequence, 'x' AS type, '{}' AS payload, 'k' AS derivation_key, "
        "NULL AS run_id, 'a' AS actor, 'session' AS visibility_scope, NULL AS visibility_id, "
        "'' AS created_at, 1 AS schema_version FROM r WHERE n < 0"
    )
    conn.close()
    for read_only in (True, False):
        store = await open_store(f"sqlite:///{path}", read_only=read_only, statement_timeout=0.3)
        try:
            start = time.monotonic()
            with pytest.raises(StatementTimeout) as err:
                await store.events.read("s")
            assert 0.3 <= time.monotonic() - start < 5.0
            assert err.value.limit == 0.3 and not err.value.retryable
            assert "statement timeout of 0.3 s" in str(err.value)
            # The connection is still good for what does end.
            assert await store.checkpoints.latest_raw("run") == []
        finally:
            await store.close()


async def test_the_statement_timeout_is_checked() -> None:
    for bad in (0, -1, float("nan"), True, "60", 10**6):
        with pytest.raises(ModelValidationError, match="statement_timeout"):
            await open_store("sqlite:///:memory:", statement_timeout=bad)


# --------------------------------------------------------------------------
# PostgreSQL


def _other_database(dsn: str, name: str) -> str:
    return dsn.rsplit("/", 1)[0] + f"/{name}"


async def test_a_postgres_database_that_does_not_exist_is_a_permanent_error(postgres_dsn: str) -> None:
    start = time.monotonic()
    with pytest.raises(StoreError) as err:
        await open_store(_other_database(postgres_dsn, "no_such_database"), timeout=10.0)
    assert_permanent(err)
    assert "does not exist" in str(err.value)
    assert time.monotonic() - start < 5.0  # at once, not after the pool's timeout


async def test_a_postgres_role_that_does_not_exist_is_a_permanent_error(postgres_dsn: str) -> None:
    with pytest.raises(StoreError) as err:
        await open_store(postgres_dsn.replace("postgres@", "no_such_role@", 1), timeout=10.0)
    assert_permanent(err)


async def test_a_malformed_postgres_dsn_is_a_permanent_error() -> None:
    for dsn in (
        "postgresql://[::1",
        "postgresql://127.0.0.1:notaport/db",
        "postgresql://h/db?no_such_option=1",
    ):
        with pytest.raises(StoreError) as err:
            await open_store(dsn, timeout=2.0)
        assert_permanent(err)


async def test_a_postgres_server_that_is_down_stays_transient() -> None:
    with socket.socket() as probe:  # a free port: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(StoreUnavailable) as err:
        await open_store(f"postgresql://postgres@127.0.0.1:{port}/postgres", timeout=2.0)
    assert err.value.retryable


def test_cli_names_a_missing_postgres_database(postgres_dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    # The server's message quotes the name as it is: the CLI shows its ESC, never sends it.
    assert main(["inspect", "--store", _other_database(postgres_dsn, "no_such%1b%5b2Jdb"), "s"]) == 2
    err = capsys.readouterr().err
    assert "StoreOpenError" in err and "no_such\\x1b[2Jdb" in err and "\x1b" not in err


@pytest.fixture
def empty_schema(store_case_factory: Callable[[str], StoreCase]) -> StoreCase:
    return store_case_factory("postgres")


def _tables(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
    return sorted(r[0] for r in rows)


async def test_read_only_postgres_opens_create_nothing(empty_schema: StoreCase) -> None:
    dsn = empty_schema.url
    with pytest.raises(StoreOpenError, match="holds no ctxengine store"):
        await open_store(dsn, read_only=True)
    with pytest.raises(StoreOpenError, match="holds no ctxengine store"):
        await migrate_store(dsn, dry_run=True)
    assert _tables(dsn) == []


async def test_a_read_only_postgres_store_refuses_to_write(empty_schema: StoreCase) -> None:
    dsn = empty_schema.url
    store = await open_store(dsn)
    await store.events.append(NewEvent("s", CONTEXT_COMPACTED, {"reason": "x"}, "k1"))
    await store.close()
    reader = await open_store(dsn, read_only=True)
    try:
        assert len(await reader.events.read("s")) == 1
        with pytest.raises(StoreError, match="read-only"):
            await reader.events.append(NewEvent("s", CONTEXT_COMPACTED, {"reason": "y"}, "k2"))
    finally:
        await reader.close()


@pytest.fixture
def golden_postgres(postgres_dsn: str) -> Iterator[str]:
    bin_dir = postgres_bin()
    assert bin_dir is not None
    with goldenkit.postgres_copy(postgres_dsn, bin_dir / "psql") as dsn:
        yield dsn


def _version_rows(dsn: str) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn) as conn:
        return sorted(conn.execute("SELECT component, version FROM ctxengine_schema_version").fetchall())


def test_inspect_reads_an_older_postgres_store_as_it_is(
    golden_postgres: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rows, tables = _version_rows(golden_postgres), _tables(golden_postgres)
    assert main(["inspect", "--store", golden_postgres, "golden-demo", "--json"]) == 0
    assert '"events": 427' in capsys.readouterr().out
    assert main(["migrate", golden_postgres, "--dry-run"]) == 0
    assert "would apply migration" in capsys.readouterr().out
    assert _version_rows(golden_postgres) == rows and _tables(golden_postgres) == tables


async def test_an_infinite_postgres_view_ends_at_the_statement_timeout(
    empty_schema: StoreCase, capsys: pytest.CaptureFixture[str]
) -> None:
    dsn = empty_schema.url
    store = await open_store(dsn)
    await store.close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE ctxengine_events CASCADE")
        conn.execute(
            "CREATE VIEW ctxengine_events AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
            "SELECT 's'::text AS session_id, n::bigint AS sequence, 'x'::text AS type, "
            "'{}'::text AS payload, 'k'::text AS derivation_key, NULL::text AS run_id, 'a'::text AS actor, "
            "'session'::text AS visibility_scope, NULL::text AS visibility_id, now() AS created_at, "
            "1 AS schema_version FROM r WHERE n < 0"
        )
    store = await open_store(dsn, read_only=True, statement_timeout=0.3)
    try:
        start = time.monotonic()
        with pytest.raises(StatementTimeout) as err:
            await store.events.read("s")
        assert time.monotonic() - start < 5.0 and err.value.limit == 0.3
    finally:
        await store.close()
    code = await asyncio.to_thread(main, ["inspect", "--store", dsn, "s", "--statement-timeout", "0.3"])
    assert code == 2 and "StatementTimeout" in capsys.readouterr().err


def test_a_fresh_postgres_database_is_not_left_behind(postgres_dsn: str) -> None:
    """A read-only open of a database that exists but holds no store leaves it empty."""
    name = f"empty_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        dsn = _other_database(postgres_dsn, name)
        with pytest.raises(StoreOpenError):
            asyncio.run(open_store(dsn, read_only=True))
        assert _tables(dsn) == []
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
