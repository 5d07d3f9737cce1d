"""Statements of a SQLite store's connection bounded by a deadline (ADR 0010).

SQLite calls a connection's progress handler every ``PROGRESS_STEPS`` virtual-machine
instructions; once ``time.monotonic()`` is past ``Connection.deadline.at`` the handler
answers "stop" and the statement fails with ``SQLITE_INTERRUPT``, which the store reports
as ``StatementTimeout``. An infinite recursive view or trigger in a crafted file therefore
ends. The store sets the deadline around each call on its worker thread (``bounded``, the
store's ``statement_timeout``); migrations run without one (``unbounded``): copying the
rows of a large store may take longer than any statement of a worker should.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager

#: Virtual-machine instructions between two looks at the clock: well under a millisecond
#: of work, so the look costs nothing measurable and a deadline is met within milliseconds.
PROGRESS_STEPS = 100_000


class Deadline:
    """When the connection's statements stop (``time.monotonic()``; ``inf``: never)."""

    __slots__ = ("at",)

    def __init__(self) -> None:
        self.at = math.inf

    def passed(self) -> bool:
        return time.monotonic() > self.at


class Connection(sqlite3.Connection):
    """A store's connection: its statements are interrupted past ``deadline.at``."""

    deadline: Deadline


@contextmanager
def bounded(conn: sqlite3.Connection, seconds: float | None) -> Iterator[None]:
    """Statements run on ``conn`` inside the block stop ``seconds`` from now (``None``: never)."""
    deadline = getattr(conn, "deadline", None)
    if deadline is None or seconds is None:
        yield
        return
    saved, deadline.at = deadline.at, time.monotonic() + seconds
    try:
        yield
    finally:
        deadline.at = saved


@contextmanager
def unbounded(conn: sqlite3.Connection) -> Iterator[None]:
    """No deadline inside the block (a migration), the one before after it."""
    deadline = getattr(conn, "deadline", None)
    if deadline is None:
        yield
        return
    saved, deadline.at = deadline.at, math.inf
    try:
        yield
    finally:
        deadline.at = saved


__all__ = ["PROGRESS_STEPS", "Connection", "Deadline", "bounded", "unbounded"]
