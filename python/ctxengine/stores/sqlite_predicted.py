"""A predicted write set committed in one trip to SQLite's worker thread (ADR 0013).

SQLite has no round trips to save, but every statement of a transaction is a
hop from the event loop to the store's worker thread and back (BEGIN, the
claim, the append, the checkpoint, COMMIT: five hops, a tenth of a
millisecond or more each). Inside ``SQLiteStore._predicted(...)`` the write
operations answer with the prediction and queue the write (``Prediction``);
the block's exit runs ``commit`` on the worker thread: one ``BEGIN
IMMEDIATE``, the ordinary operations in the order PostgreSQL's function
takes them (claim, events, counts, checkpoint, prune), each answer compared
with its prediction, then ``COMMIT``. An answer that differs, or an
operation that refuses (a lease that is not current, a key stored with other
bytes), rolls everything back and raises ``StorePredictionMissed``: the
caller runs the same block in an ordinary transaction, which gives the
outcome its own way.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from itertools import groupby
from typing import Any, TypeVar

from ..errors import ContextError
from ._sql import SqlOps
from .prediction import Prediction
from .sqlite_items import in_write_txn

R = TypeVar("R")


def commit(
    conn: sqlite3.Connection,
    own: bool,
    prediction: Prediction,
    ops: SqlOps,
    committing: Callable[[], None] | None = None,
) -> None:
    """All of ``prediction`` written in one transaction, or nothing and
    ``StorePredictionMissed``. Runs on the store's worker thread as an operation of its own
    (``_alone``); ``committing`` is called once every write is in and the ``COMMIT`` starts."""

    def body() -> None:
        _write(conn, prediction, ops)
        if committing is not None:
            committing()

    in_write_txn(conn, own, body)


def _write(conn: sqlite3.Connection, p: Prediction, ops: SqlOps) -> None:
    if p.claim_owner is not None and _answer(p, "claim", ops.claim, conn, p.run_id, p.claim_owner) != 1:
        raise p.miss(f"the run {p.run_id!r} was claimed before")
    sequence = p.next_sequence
    # One batch per append the block made (consecutive events of one timestamp).
    for at, batch in groupby(p.events, key=lambda event: event[2]):
        queued = list(batch)
        news, texts = [new for new, _, _ in queued], [text for _, text, _ in queued]
        for new, (row, fresh) in zip(
            news, _answer(p, "append", ops.append_all, conn, news, texts, at), strict=True
        ):
            if not fresh:
                raise p.miss(f"the key {new.derivation_key!r} is stored already")
            if row[1] != sequence:
                raise p.miss(f"the session moved on (sequence {row[1]}, predicted {sequence})")
            sequence += 1
    for counter, counts in groupby(p.counts, key=lambda count: count[1]):
        ops.put_counts(conn, False, p.session_id, counter, [(seq, n) for seq, _, n in counts])
    if p.checkpoint is not None:
        lease, kind, trigger, text, at, fmt = p.checkpoint
        args = (p.run_id, lease, kind, trigger, text, at, fmt)
        version = _answer(p, "lease and version", ops.write_checkpoint, conn, *args)
        if version != p.version:
            raise p.miss(f"lease and version: the run is at version {version - 1}, not {p.version - 1}")
    if p.prune_before is not None:
        ops.prune(conn, False, p.run_id, p.prune_before)


def _answer(p: Prediction, what: str, fn: Callable[..., R], conn: sqlite3.Connection, *args: Any) -> R:
    """``fn``'s answer inside the transaction; a refusal is a miss (the ordinary path, run
    next, meets it again and reports it as it would have)."""
    try:
        return fn(conn, False, *args)
    except ContextError as exc:
        raise p.miss(f"{what}: {exc}") from None


__all__ = ["commit"]
