"""The SQLite store's schema as statements: a new store's, and the way there from revision 1.

A new store is created at the current schema at once (``CURRENT``). A store from before
schema revisions were tracked (revision 1, what ``tests/golden`` holds) takes ``FROM_BASE``:
its events and checkpoints move into tables created by the very statements a new store's
are, rows copied as they are, so both end with the same schema, byte for byte in
``sqlite_master``. What the current schema is, and why:

* Events and checkpoints live in rowid tables with the payload as the last column. In a
  ``WITHOUT ROWID`` table every row is a cell of the key b-tree, and a seek that compares
  against a row whose payload spills to overflow pages reads the whole payload (a 9 MB
  ``context.compacted`` event cost every lookup near it 10 ms); in a rowid table the keys
  are in an index of keys only, and a row's columns before its payload are read without
  walking the payload's pages (ADR 0011).
* Events are indexed by type (typed reads, ``latest_before``) and by format version (the
  fail-closed check of a typed read finds rows of a newer format without a scan).
* Raw token counts travel beside the events they count, in a side table (events stay
  immutable; a count is insert-or-ignore).
"""

from __future__ import annotations

EVENTS = """
    CREATE TABLE ctxengine_events (
        session_id       TEXT    NOT NULL,
        sequence         INTEGER NOT NULL CHECK (sequence >= 1),
        type             TEXT    NOT NULL,
        derivation_key   TEXT    NOT NULL,
        run_id           TEXT,
        actor            TEXT    NOT NULL,
        visibility_scope TEXT    NOT NULL,
        visibility_id    TEXT,
        created_at       TEXT    NOT NULL,
        schema_version   INTEGER NOT NULL,
        payload          TEXT    NOT NULL,
        PRIMARY KEY (session_id, sequence),
        UNIQUE (session_id, derivation_key)
    )
    """
EVENT_INDEXES = (
    "CREATE INDEX ctxengine_events_by_type ON ctxengine_events (session_id, type, sequence)",
    "CREATE INDEX ctxengine_events_by_version ON ctxengine_events (session_id, schema_version, sequence)",
)
LEASES = """
    CREATE TABLE ctxengine_checkpoint_leases (
        run_id TEXT    NOT NULL PRIMARY KEY,
        owner  TEXT    NOT NULL,
        epoch  INTEGER NOT NULL
    )
    """
CHECKPOINTS = """
    CREATE TABLE ctxengine_checkpoints (
        run_id         TEXT    NOT NULL,
        version        INTEGER NOT NULL CHECK (version >= 1),
        kind           TEXT    NOT NULL,
        trigger        TEXT    NOT NULL,
        lease_epoch    INTEGER NOT NULL,
        created_at     TEXT    NOT NULL,
        schema_version INTEGER NOT NULL,
        payload        TEXT    NOT NULL,
        PRIMARY KEY (run_id, version)
    )
    """
TOKEN_COUNTS = """
    CREATE TABLE ctxengine_token_counts (
        session_id TEXT    NOT NULL,
        sequence   INTEGER NOT NULL CHECK (sequence >= 1),
        counter    TEXT    NOT NULL,
        count      INTEGER NOT NULL CHECK (count >= 0),
        PRIMARY KEY (session_id, sequence, counter)
    ) WITHOUT ROWID
    """

_EVENT_COLUMNS = (
    "session_id, sequence, type, derivation_key, run_id, actor, visibility_scope, visibility_id, "
    "created_at, schema_version, payload"
)
_CHECKPOINT_COLUMNS = "run_id, version, kind, trigger, lease_epoch, created_at, schema_version, payload"

#: A new store: the current schema.
CURRENT: tuple[str, ...] = (EVENTS, *EVENT_INDEXES, LEASES, CHECKPOINTS, TOKEN_COUNTS)

#: Revision 1 to the current schema. The old tables are renamed away first (their indexes go
#: with them when they are dropped), so the new ones are created by ``CURRENT``'s statements.
FROM_BASE: tuple[str, ...] = (
    "ALTER TABLE ctxengine_events RENAME TO ctxengine_events_r1",
    EVENTS,
    f"INSERT INTO ctxengine_events ({_EVENT_COLUMNS}) SELECT {_EVENT_COLUMNS} FROM ctxengine_events_r1 "
    "ORDER BY session_id, sequence",
    "DROP TABLE ctxengine_events_r1",
    *EVENT_INDEXES,
    "ALTER TABLE ctxengine_checkpoints RENAME TO ctxengine_checkpoints_r1",
    CHECKPOINTS,
    f"INSERT INTO ctxengine_checkpoints ({_CHECKPOINT_COLUMNS}) SELECT {_CHECKPOINT_COLUMNS} "
    "FROM ctxengine_checkpoints_r1 ORDER BY run_id, version",
    "DROP TABLE ctxengine_checkpoints_r1",
    TOKEN_COUNTS,
)

__all__ = ["CURRENT", "FROM_BASE"]
