"""Shared fixtures: the behavioural suite runs under both backends; stores of every kind.

``postgres_dsn`` starts a throwaway PostgreSQL cluster (initdb + pg_ctl on a
temporary directory and a free loopback port) once per test session, when a
test first asks for it. The server binaries refuse to run as root, which CI
is, so as root the data directory is handed to the ``postgres`` user and the
binaries run through ``runuser``. Without the binaries the PostgreSQL cases
skip, unless ``CTXENGINE_REQUIRE_POSTGRES=1`` (``make test`` sets it), when
they fail.

``store_case`` is parametrized over memory, SQLite (a temporary file) and
PostgreSQL (a fresh schema per case, so tests never see each other's rows):
a test taking ``store`` is the conformance suite, run once per store
(``tests/stores/``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, settings

import ctxengine
from ctxengine.core import backends
from ctxengine.model.clock import FixedClock
from ctxengine.stores.events import Store
from storekit import STORE_KINDS, PostgresServer, StoreCase, postgres_bin, schema_dsn

# `make test` runs two workers on two cores: how fast hypothesis generates inputs on a busy
# machine is not what any test here checks, so neither its generation health check nor a
# per-example deadline may fail a run (tests that care set their own settings).
settings.register_profile("ctxengine", suppress_health_check=[HealthCheck.too_slow], deadline=None)
settings.load_profile("ctxengine")


@pytest.fixture(params=backends.BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test once per backend; the active backend is restored afterwards."""
    previous = backends.backend()
    ctxengine.use_backend(request.param)
    try:
        yield request.param
    finally:
        ctxengine.use_backend(previous)


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A DSN for a throwaway PostgreSQL server, started once per session."""
    required = os.environ.get("CTXENGINE_REQUIRE_POSTGRES") == "1"
    bin_dir = postgres_bin()
    if bin_dir is None:
        message = "PostgreSQL server binaries (initdb, pg_ctl) not found under /usr/lib/postgresql/*/bin"
        if required:
            pytest.fail(f"{message}, and CTXENGINE_REQUIRE_POSTGRES=1")
        pytest.skip(message)
    # Under /tmp itself: pytest's own temp tree is private to root, and the
    # server user must be able to reach its data directory.
    server = PostgresServer(bin_dir, Path(tempfile.mkdtemp(prefix="ctxengine-pg-")))
    try:
        server.start()
    except (RuntimeError, subprocess.SubprocessError, OSError, LookupError) as exc:
        shutil.rmtree(server.root, ignore_errors=True)
        detail = getattr(exc, "stderr", "") or str(exc)
        if required:
            pytest.fail(f"could not start PostgreSQL: {detail}")
        pytest.skip(f"could not start PostgreSQL: {detail}")
    try:
        yield server.dsn
    finally:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)


@pytest.fixture
def store_case_factory(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[str], StoreCase]]:
    """Makes fresh, isolated store locations of a kind; drops them afterwards."""
    schemas: list[tuple[str, str]] = []

    def make(kind: str) -> StoreCase:
        if kind == "memory":
            return StoreCase("memory", "memory://")
        if kind == "sqlite":
            path = str(tmp_path_factory.mktemp("sqlite") / "events.db")
            return StoreCase("sqlite", f"sqlite:///{path}", sqlite_path=path)
        if kind == "postgres":
            base = request.getfixturevalue("postgres_dsn")
            schema = f"t_{uuid.uuid4().hex[:16]}"
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(f"CREATE SCHEMA {schema}")
            schemas.append((base, schema))
            dsn = schema_dsn(base, schema)
            return StoreCase("postgres", dsn, postgres_dsn=dsn)
        raise ValueError(f"unknown store kind {kind!r}")

    yield make
    for base, schema in schemas:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture(params=STORE_KINDS)
def store_case(request: pytest.FixtureRequest, store_case_factory: Callable[[str], StoreCase]) -> StoreCase:
    kind: str = request.param
    return store_case_factory(kind)


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(datetime(2025, 6, 1, 12, 0, tzinfo=UTC))


@pytest.fixture
async def store(store_case: StoreCase, clock: FixedClock) -> AsyncIterator[Store]:
    """An open, empty store of each kind, on a fixed clock."""
    opened = await store_case.open(clock)
    try:
        yield opened
    finally:
        await store_case.close_all()
        await opened.close()
