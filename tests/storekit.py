"""Store test kit: a throwaway PostgreSQL server and isolated store locations.

Used by ``conftest.py`` (fixtures) and the store tests (types, helpers). The
server kit itself lives in ``ctxengine.cli.pgserver`` (the benchmark harness
starts one too) and is re-exported here.
"""

from __future__ import annotations

import sqlite3
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import psycopg

from ctxengine.cli.pgserver import PostgresServer, _free_port, postgres_bin
from ctxengine.model.clock import Clock
from ctxengine.stores import MemoryStore, open_store
from ctxengine.stores._rows import EVENT_COLUMNS
from ctxengine.stores.events import Store

STORE_KINDS = ("memory", "sqlite", "postgres")
#: Re-exported for the tests (the kit lives in ctxengine.cli.pgserver).
__all__ = [
    "STORE_KINDS",
    "PostgresServer",
    "StoreCase",
    "_free_port",
    "older_reader",
    "postgres_bin",
    "schema_dsn",
]


def schema_dsn(dsn: str, schema: str) -> str:
    """``dsn`` with every connection's search_path set to ``schema``."""
    return f"{dsn}?options={quote(f'-csearch_path={schema}', safe='')}"


# --------------------------------------------------------------------------
# store cases


@dataclass
class StoreCase:
    """One isolated store location of one kind, which can be opened (and reopened)."""

    kind: str
    url: str
    sqlite_path: str | None = None
    postgres_dsn: str | None = None
    memory: MemoryStore | None = None
    opened: list[Store] = field(default_factory=list)

    async def open(self, clock: Clock | None = None) -> Store:
        """A store on this location. Memory has no file to reopen, so it is the same object."""
        if self.kind == "memory":
            if self.memory is None:
                self.memory = MemoryStore(clock=clock)
            return self.memory
        store = await open_store(self.url, clock=clock)
        self.opened.append(store)
        return store

    async def close_all(self) -> None:
        for store in self.opened:
            await store.close()
        self.opened.clear()

    def raw_execute(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        """Run SQL directly against the file or database (``?`` placeholders), bypassing the store."""
        if self.kind == "sqlite":
            assert self.sqlite_path is not None
            conn = sqlite3.connect(self.sqlite_path, timeout=30)
            try:
                with conn:
                    conn.execute(sql, params)
            finally:
                conn.close()
        elif self.kind == "postgres":
            assert self.postgres_dsn is not None
            with psycopg.connect(self.postgres_dsn, autocommit=True) as pg:
                pg.execute(sql.replace("?", "%s"), params)
        else:
            raise NotImplementedError("the memory store has no SQL")

    def inject_event_row(self, **values: Any) -> None:
        """Write an event row as is, however wrong, straight into the storage."""
        row = {
            "session_id": "s",
            "sequence": 1,
            "type": "context.plan.created",
            "payload": "{}",
            "derivation_key": f"injected:{uuid.uuid4().hex}",
            "run_id": None,
            "actor": "runtime",
            "visibility_scope": "session",
            "visibility_id": None,
            "created_at": datetime(2025, 1, 1, tzinfo=UTC),
            "schema_version": 1,
        }
        row.update(values)
        ordered = tuple(row[column] for column in EVENT_COLUMNS)
        if self.kind == "memory":
            assert self.memory is not None
            self.memory._inject_row(ordered)
            return
        if self.kind == "sqlite":
            ordered = tuple(v.isoformat() if isinstance(v, datetime) else v for v in ordered)
        columns = ", ".join(EVENT_COLUMNS)
        placeholders = ", ".join("?" * len(ordered))
        self.raw_execute(f"INSERT INTO ctxengine_events ({columns}) VALUES ({placeholders})", ordered)


def older_reader(monkeypatch: Any, version: int) -> None:
    """Make this process read as a build whose newest format is ``version`` (``monkeypatch``:
    pytest's), for the older-reader tests of each stored shape (ADR 0009)."""
    import sys

    from ctxengine.stores import sqlite_items
    from ctxengine.stores.events import FORMAT_VERSION

    for name, module in list(sys.modules.items()):
        if name.startswith("ctxengine.stores") and isinstance(getattr(module, "FORMAT_VERSION", None), int):
            monkeypatch.setattr(module, "FORMAT_VERSION", version)
    # SQLite's anomaly probe has the version written into its text.
    baked = f"schema_version > {FORMAT_VERSION}"
    assert baked in sqlite_items.ANOMALY_FLOOR
    floor = sqlite_items.ANOMALY_FLOOR.replace(baked, f"schema_version > {version}")
    monkeypatch.setattr(sqlite_items, "ANOMALY_FLOOR", floor)
