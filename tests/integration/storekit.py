"""Store test kit: a throwaway PostgreSQL server and isolated store locations.

Used by ``conftest.py`` (fixtures) and the store tests (types, helpers).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import sqlite3
import subprocess
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg

from ctxengine.model.clock import Clock
from ctxengine.stores import MemoryStore, open_store
from ctxengine.stores._rows import EVENT_COLUMNS
from ctxengine.stores.events import Store

STORE_KINDS = ("memory", "sqlite", "postgres")


def postgres_bin() -> Path | None:
    """The newest installed server bin directory holding initdb and pg_ctl."""
    override = os.environ.get("CTXENGINE_PG_BIN")
    candidates = [override] if override else []
    candidates += sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: [int(x) if x.isdigit() else 0 for x in Path(p).parent.name.split(".")],
        reverse=True,
    )
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(str(Path(on_path).parent))
    for candidate in candidates:
        path = Path(candidate)
        if (path / "initdb").exists() and (path / "pg_ctl").exists():
            return path
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class PostgresServer:
    bin: Path
    root: Path
    port: int = 0
    #: Commit only after the WAL reached the kernel: what a crash test of acknowledged writes needs.
    durable: bool = False

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin / argv[0]), *argv[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        # cwd: the server user must be able to enter the working directory.
        return subprocess.run(
            command, cwd=self.root, capture_output=True, text=True, check=check, timeout=120
        )

    def start(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
            "--locale=C", "--no-sync",
        )  # fmt: skip
        last_error = ""
        for _ in range(3):  # a free port can be taken between probe and bind
            self.port = _free_port()
            result = self._pg_ctl_start()
            if result.returncode == 0:
                return
            last_error = result.stderr + (self.log.read_text() if self.log.exists() else "")
        raise RuntimeError(f"PostgreSQL did not start:\n{last_error}")

    def _pg_ctl_start(self) -> subprocess.CompletedProcess[str]:
        durability = (
            "-c synchronous_commit=on"
            if self.durable
            # Durability of the test cluster itself does not matter.
            else "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=200 {durability}"
        )
        return self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", options, "start",
            check=False,
        )  # fmt: skip

    def stop(self) -> None:
        """An immediate shutdown: the server processes exit as in a crash."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)

    def restart(self) -> None:
        """Start again on the same port and data (crash recovery runs first)."""
        result = self._pg_ctl_start()
        if result.returncode != 0:
            raise RuntimeError(f"PostgreSQL did not restart:\n{result.stderr}")


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
