"""The SQLite statements of checkpoints and their leases (``SqlOps``; see ``sqlite.py``).

They run on the store's worker thread: ``fn(conn, own_transaction, *args)``.
"""

from __future__ import annotations

import sqlite3

from . import _rows
from .events import Lease, RawCheckpoint
from .sqlite_items import in_write_txn

_CHECKPOINT_COLS = _rows.CHECKPOINT_COLUMN_LIST


def claim(conn: sqlite3.Connection, own: bool, run_id: str, owner: str) -> int:
    def body() -> int:
        row = conn.execute(
            "SELECT epoch FROM ctxengine_checkpoint_leases WHERE run_id = ?", (run_id,)
        ).fetchone()
        epoch = 1 if row is None else int(row[0]) + 1
        conn.execute(
            "INSERT INTO ctxengine_checkpoint_leases (run_id, owner, epoch) VALUES (?, ?, ?) "
            "ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, epoch = excluded.epoch",
            (run_id, owner, epoch),
        )
        return epoch

    return in_write_txn(conn, own, body)


def write_checkpoint(
    conn: sqlite3.Connection,
    own: bool,
    run_id: str,
    lease: Lease,
    kind: str,
    trigger: str,
    text: str,
    created_at: str,
    fmt: int,
) -> int:
    def body() -> int:
        current = conn.execute(
            "SELECT owner, epoch FROM ctxengine_checkpoint_leases WHERE run_id = ?", (run_id,)
        ).fetchone()
        _rows.check_lease(run_id, lease, None if current is None else (current[0], current[1]))
        if kind == "delta":
            base = conn.execute(
                "SELECT 1 FROM ctxengine_checkpoints WHERE run_id = ? AND kind = 'full' LIMIT 1", (run_id,)
            ).fetchone()
            if base is None:
                raise _rows.no_base_for_delta(run_id)
        (last,) = conn.execute(
            "SELECT COALESCE(MAX(version), 0) FROM ctxengine_checkpoints WHERE run_id = ?", (run_id,)
        ).fetchone()
        version = int(last) + 1
        conn.execute(
            "INSERT INTO ctxengine_checkpoints (run_id, version, kind, trigger, payload, lease_epoch, "
            "created_at, schema_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (run_id, version, kind, trigger, text, lease.epoch, created_at, fmt),
        )
        return version

    return in_write_txn(conn, own, body)


def latest_raw(conn: sqlite3.Connection, own: bool, run_id: str) -> list[RawCheckpoint]:
    rows = conn.execute(
        f"SELECT {_CHECKPOINT_COLS} FROM ctxengine_checkpoints WHERE run_id = ? AND version >= "
        "(SELECT MAX(version) FROM ctxengine_checkpoints WHERE run_id = ? AND kind = 'full') "
        "ORDER BY version",
        (run_id, run_id),
    ).fetchall()
    return [_rows.decode_checkpoint(run_id, row) for row in rows]


def delete(conn: sqlite3.Connection, own: bool, run_id: str) -> None:
    def body() -> None:
        conn.execute("DELETE FROM ctxengine_checkpoints WHERE run_id = ?", (run_id,))
        # The lease row stays, one epoch on and owned by no one: a later claim
        # continues the epochs, so every lease handed out so far stays fenced.
        conn.execute(
            "UPDATE ctxengine_checkpoint_leases SET owner = ?, epoch = epoch + 1 WHERE run_id = ?",
            (_rows.FENCED_OWNER, run_id),
        )

    in_write_txn(conn, own, body)


__all__ = ["claim", "delete", "latest_raw", "write_checkpoint"]
