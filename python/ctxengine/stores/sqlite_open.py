"""The SQLite store's file opened: the path checked, the connection made, its statements
bounded, and what cannot be opened told apart from what cannot be opened right now (ADR 0010).

Permanent (``StoreOpenError``), found before SQLite is asked: a NUL in the path; a path
that names a directory, a FIFO or a device (a symlink to ``/dev/zero``) instead of a
regular file; a directory that does not exist; a file that does not exist where nothing
may be created (a read-only open). Permanent, found at the open: a file that is not a
database; a database of another application (it is refused before anything is written:
never switched to WAL, no tables added); a directory or file the process may not write
(asked only after the open failed). Anything else stays what ``driver_errors`` makes it:
a lock, a busy file, an I/O error are ``StoreUnavailable``.

A read-only open (``read_only=True``: ``ctxengine inspect``, ``migrate --dry-run``) uses
SQLite's ``mode=ro`` and ``PRAGMA query_only``: it creates no file, migrates nothing and
never changes the journal mode. A WAL database on a read-only mount has no ``-shm`` file
and cannot get one; there it is opened ``immutable`` (nothing can write it there).

Every statement of the connection stops at a deadline (``sqlite_deadline``).
"""

from __future__ import annotations

import os
import sqlite3
import stat
from urllib.parse import quote

from ..errors import StoreOpenError
from . import migrations
from .sqlite_deadline import PROGRESS_STEPS, Connection, Deadline, bounded
from .sqlite_schema import Synchronous, schema, write_ahead_log

_CANTOPEN = 14
_NOTADB = 26
_READONLY = 8


def check_path(where: str, path: str, read_only: bool) -> None:
    """``StoreOpenError`` for a path no retry can open; silent for one SQLite may open."""
    if "\x00" in path:
        raise StoreOpenError(f"{where}: the path contains a NUL character")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise StoreOpenError(f"{where}: the path is not valid UTF-8 (a lone surrogate)") from None
    if path == ":memory:":
        return
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if read_only:
            raise StoreOpenError(f"{where}: no such file (a read-only open creates nothing)") from None
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise StoreOpenError(f"{where}: the directory {parent!r} does not exist") from None
        return
    except OSError as exc:  # a path through a file, a loop of links, a name too long, no access
        raise StoreOpenError(f"{where}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise StoreOpenError(f"{where}: is {_kind(mode)}, not a regular file")


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a file")


def _connect(path: str, busy_timeout: float, read_only: bool) -> Connection:
    # isolation_level=None: the module never opens transactions behind our back, so every
    # transaction here is the BEGIN IMMEDIATE we issue.
    if not read_only or path == ":memory:":
        conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None, factory=Connection)
    else:
        # An absolute path with one leading slash: "file://x" would name an authority.
        uri = f"file:{quote('/' + os.path.abspath(path).lstrip('/'), safe='/')}?mode=ro"
        try:
            conn = sqlite3.connect(
                uri, timeout=busy_timeout, isolation_level=None, uri=True, factory=Connection
            )
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.OperationalError as exc:
            # A WAL database whose -shm cannot be created: a read-only mount.
            if _code(exc) != _CANTOPEN or os.access(os.path.dirname(os.path.abspath(path)), os.W_OK):
                raise
            uri += "&immutable=1"
            conn = sqlite3.connect(
                uri, timeout=busy_timeout, isolation_level=None, uri=True, factory=Connection
            )
    conn.deadline = Deadline()
    conn.set_progress_handler(conn.deadline.passed, PROGRESS_STEPS)
    return conn


def _code(exc: sqlite3.Error) -> int:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else -1


def _tables(conn: sqlite3.Connection) -> tuple[bool, bool]:
    """(the file holds a ctxengine store, it holds tables of anything else)."""
    names = {
        name
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite^_%' ESCAPE '^'"
        )
    }
    return migrations.VERSION_TABLE in names, bool(names - {migrations.VERSION_TABLE})


def _raise_explained(where: str, path: str, read_only: bool, exc: sqlite3.Error) -> None:
    """``StoreOpenError`` for an error at the open that no retry can get past."""
    explained = _explain(where, path, read_only, exc)
    if explained is not None:
        raise explained from exc


def _explain(where: str, path: str, read_only: bool, exc: sqlite3.Error) -> StoreOpenError | None:
    code = _code(exc)
    if code == _NOTADB:
        return StoreOpenError(f"{where}: not a SQLite database ({exc})")
    if code not in (_CANTOPEN, _READONLY) or path == ":memory:":
        return None
    directory = os.path.dirname(os.path.abspath(path))
    if not os.access(path, os.R_OK):
        return StoreOpenError(f"{where}: the file is not readable ({exc})")
    if not read_only and not os.access(directory, os.W_OK):
        return StoreOpenError(
            f"{where}: the directory {directory!r} is not writable, and a store writes its -wal and "
            f"-shm files there; open it read-only to read it ({exc})"
        )
    if not read_only and os.path.exists(path) and not os.access(path, os.W_OK):
        return StoreOpenError(f"{where}: the file is not writable; open it read-only to read it ({exc})")
    return None


def open_database(
    path: str,
    busy_timeout: float,
    synchronous: Synchronous,
    cache_kib: int,
    apply: bool,
    read_only: bool = False,
    statement_timeout: float | None = None,
) -> tuple[Connection, migrations.MigrationReport]:
    """Check the path, connect, and create, check or migrate the schema (a read-only open only
    checks it); the connection is closed on failure."""
    where = f"SQLite store {path!r}"
    check_path(where, path, read_only)
    try:
        conn = _connect(path, busy_timeout, read_only)
    except sqlite3.Error as exc:
        _raise_explained(where, path, read_only, exc)
        raise
    try:
        with bounded(conn, statement_timeout):
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            is_store, other = _tables(conn)
            if other and not is_store:
                raise StoreOpenError(
                    f"{where}: not a ctxengine store (the database holds other tables and no "
                    f"{migrations.VERSION_TABLE}); nothing was changed"
                )
            if read_only:
                conn.execute("PRAGMA query_only = 1")
            else:
                write_ahead_log(conn, busy_timeout)
                conn.execute(f"PRAGMA synchronous = {synchronous}")
            conn.execute(f"PRAGMA cache_size = -{int(cache_kib)}")
            return conn, schema(conn, path, apply and not read_only, not read_only)
    except sqlite3.Error as exc:
        conn.close()
        _raise_explained(where, path, read_only, exc)
        raise
    except BaseException:
        conn.close()
        raise


__all__ = ["check_path", "open_database"]
