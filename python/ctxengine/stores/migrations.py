"""Schema versions and migrations of the SQL stores (ADR 0009).

``ctxengine_schema_version`` holds two numbers per store:

* ``store``: the **compatibility level**. A reader refuses a store whose
  level it does not know, so only a change an older worker could misread
  may raise it. It is 1, the level of the first release, and every
  migration below keeps it (the first release checks only this row).
* ``store.revision``: the additive migrations applied. Code from before
  revisions were tracked ignores the row and keeps working, which is what
  makes a rolling upgrade possible: the first new worker migrates, the old
  ones go on reading and writing the same tables.

A new store is created at the base schema (revision 1) and then migrated
like any other, so a fresh store and an upgraded one have the same schema.
Migrations are applied under the store's write lock (SQLite ``BEGIN
IMMEDIATE``, a PostgreSQL advisory lock) in one transaction with the
revision bump: two workers starting at once apply each step exactly once.
A migration is appended here and never edited; each ships with a golden
fixture test (``tests/stores/test_migrations.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import StoreError, StoreOpenError
from .migration_stable_plans import KEYED_LOOKUPS, STABLE_PLANS
from .migration_step import Migration

#: The compatibility level this code reads and writes.
COMPAT_LEVEL = 1
#: The schema revision a store created by the first release is at.
BASE_REVISION = 1
#: The table of the two numbers; a database without it holds no ctxengine store.
VERSION_TABLE = "ctxengine_schema_version"
COMPONENT_LEVEL = "store"
COMPONENT_REVISION = "store.revision"


#: Revision 2 (issue 13, ADR 0011): raw token counts travel with the events they count,
#: in a side table (events stay immutable; a count is insert-or-ignore), and the
#: fail-closed check of a typed read finds rows of a newer format through an index
#: instead of a scan of the whole session.
TOKEN_COUNTS = Migration(
    revision=2,
    name="token counts beside events; events indexed by format version",
    sqlite=(
        """
        CREATE TABLE ctxengine_token_counts (
            session_id TEXT    NOT NULL,
            sequence   INTEGER NOT NULL CHECK (sequence >= 1),
            counter    TEXT    NOT NULL,
            count      INTEGER NOT NULL CHECK (count >= 0),
            PRIMARY KEY (session_id, sequence, counter)
        ) WITHOUT ROWID
        """,
        "CREATE INDEX ctxengine_events_by_version ON ctxengine_events (session_id, schema_version, sequence)",
    ),
    postgres=(
        """
        CREATE TABLE ctxengine_token_counts (
            session_id TEXT   NOT NULL,
            sequence   BIGINT NOT NULL CHECK (sequence >= 1),
            counter    TEXT   NOT NULL,
            count      BIGINT NOT NULL CHECK (count >= 0),
            PRIMARY KEY (session_id, sequence, counter)
        )
        """,
        "CREATE INDEX ctxengine_events_by_version ON ctxengine_events (session_id, schema_version, sequence)",
    ),
)

#: Revision 3 (issue 13, ADR 0011): SQLite keeps events and checkpoints in rowid tables with
#: the payload as the last column. In a ``WITHOUT ROWID`` table every row lives in the key
#: b-tree, and a seek that compares against a row whose payload spills to overflow pages
#: reads the whole payload (a 9 MB ``context.compacted`` event cost every lookup near it
#: 10 ms); in a rowid table the keys are in an index of keys only, and a row's columns
#: before its payload are read without walking the payload's pages. The same columns and
#: constraints, rows copied as they are; PostgreSQL's heap tables have neither problem.
ROWID_TABLES = Migration(
    revision=3,
    name="SQLite: events and checkpoints in rowid tables, payload last",
    sqlite=(
        """
        CREATE TABLE ctxengine_events_r3 (
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
        """,
        "INSERT INTO ctxengine_events_r3 (session_id, sequence, type, derivation_key, run_id, actor, "
        "visibility_scope, visibility_id, created_at, schema_version, payload) SELECT session_id, "
        "sequence, type, derivation_key, run_id, actor, visibility_scope, visibility_id, created_at, "
        "schema_version, payload FROM ctxengine_events ORDER BY session_id, sequence",
        "DROP TABLE ctxengine_events",
        "ALTER TABLE ctxengine_events_r3 RENAME TO ctxengine_events",
        "CREATE INDEX ctxengine_events_by_type ON ctxengine_events (session_id, type, sequence)",
        "CREATE INDEX ctxengine_events_by_version ON ctxengine_events (session_id, schema_version, sequence)",
        """
        CREATE TABLE ctxengine_checkpoints_r3 (
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
        """,
        "INSERT INTO ctxengine_checkpoints_r3 (run_id, version, kind, trigger, lease_epoch, created_at, "
        "schema_version, payload) SELECT run_id, version, kind, trigger, lease_epoch, created_at, "
        "schema_version, payload FROM ctxengine_checkpoints ORDER BY run_id, version",
        "DROP TABLE ctxengine_checkpoints",
        "ALTER TABLE ctxengine_checkpoints_r3 RENAME TO ctxengine_checkpoints",
    ),
    postgres=(),
)

#: Revision 4 (issue 13, ADR 0013): PostgreSQL commits a worker's predicted write set (a
#: step's events, their token counts, a claim, one checkpoint version and its prune) in one
#: call of this function: one round trip and no BEGIN/COMMIT instead of six to seven. The
#: worker predicts what the store would answer (the session's next sequence, the run's next
#: version, a fresh lease); the function takes the session lock, checks every prediction
#: before it writes and raises SQLSTATE ``CX001`` (undoing the call whole) when one does not
#: hold, and the worker then takes the general path. SQLite runs in the worker's process and
#: has no round trips to save. The anomaly floor of the typed reads (the first row of a type
#: this code does not know or of a newer format) moves into a function too: as a CTE in each
#: read it cost 0.4 ms of planning per call, three times its execution, because a custom
#: plan was made every time; a PL/pgSQL function keeps one generic plan per connection.
PREDICTED_COMMIT = Migration(
    revision=4,
    name="PostgreSQL: one-call commit of a predicted write set; the anomaly floor as a function",
    sqlite=(),
    postgres=(
        """
        CREATE FUNCTION ctxengine_anomaly_floor(s text, known text[], v integer) RETURNS bigint
        LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $fn$
        DECLARE
            floor bigint;
            newer integer;
        BEGIN
            -- The distinct types of the session by a skip scan of the type index, and the
            -- first row of each one this code does not know.
            WITH RECURSIVE kinds(type) AS (
                SELECT (SELECT MIN(e.type) FROM ctxengine_events e WHERE e.session_id = s)
                UNION ALL
                SELECT (SELECT MIN(e.type) FROM ctxengine_events e
                        WHERE e.session_id = s AND e.type > kinds.type)
                FROM kinds WHERE kinds.type IS NOT NULL
            )
            SELECT MIN((SELECT MIN(e.sequence) FROM ctxengine_events e
                        WHERE e.session_id = s AND e.type = kinds.type))
            INTO floor
            FROM kinds WHERE kinds.type IS NOT NULL AND NOT (kinds.type = ANY(known));
            -- A newer format: asked as the smallest version above v, which only the version
            -- index answers without a scan (as "the first such sequence", a generic plan
            -- walks the primary key and filters every row); its first row only when there is one.
            SELECT MIN(e.schema_version) INTO newer FROM ctxengine_events e
                WHERE e.session_id = s AND e.schema_version > v;
            IF newer IS NOT NULL THEN
                floor := LEAST(floor, (SELECT MIN(e.sequence) FROM ctxengine_events e
                                       WHERE e.session_id = s AND e.schema_version > v));
            END IF;
            RETURN floor;
        END
        $fn$
        """,
        """
        CREATE FUNCTION ctxengine_commit_predicted(
            s text, lock_class integer, first_seq bigint, events json, counts json,
            claim_run text, claim_owner text,
            cp_run text, cp_owner text, cp_epoch bigint, cp_version bigint, cp_kind text,
            cp_trigger text, cp_payload text, cp_format integer, cp_at timestamptz,
            prune_before bigint
        ) RETURNS void LANGUAGE plpgsql AS $fn$
        DECLARE
            last_seq bigint;
            lease_owner text;
            lease_epoch bigint;
            last_version bigint;
            has_full boolean;
        BEGIN
            -- Held to the commit; every statement below starts after it, so it sees every
            -- earlier writer of the session.
            PERFORM pg_advisory_xact_lock(lock_class, hashtext(s));
            -- events: [[key, type, payload, run, actor, scope, id, format, at], ...] (one text
            -- parameter: the driver dumps arrays of arrays item by item); counts: [[seq, counter, n]].
            IF json_array_length(events) > 0 THEN
                IF EXISTS (SELECT 1 FROM ctxengine_events
                           WHERE session_id = s AND derivation_key IN
                               (SELECT b.v->>0 FROM json_array_elements(events) AS b(v))) THEN
                    RAISE EXCEPTION 'ctxengine: an event of the write set is stored already'
                        USING ERRCODE = 'CX001';
                END IF;
                SELECT e.sequence INTO last_seq FROM ctxengine_events e
                    WHERE e.session_id = s ORDER BY e.sequence DESC LIMIT 1;
                IF COALESCE(last_seq, 0) + 1 <> first_seq THEN
                    RAISE EXCEPTION 'ctxengine: the session moved on (next sequence %, predicted %)',
                        COALESCE(last_seq, 0) + 1, first_seq USING ERRCODE = 'CX001';
                END IF;
                INSERT INTO ctxengine_events (session_id, sequence, type, payload, derivation_key,
                    run_id, actor, visibility_scope, visibility_id, created_at, schema_version)
                SELECT s, first_seq + b.ord - 1, b.v->>1, b.v->>2, b.v->>0, b.v->>3, b.v->>4,
                       b.v->>5, b.v->>6, (b.v->>8)::timestamptz, (b.v->>7)::integer
                FROM json_array_elements(events) WITH ORDINALITY AS b(v, ord);
            END IF;
            IF json_array_length(counts) > 0 THEN
                INSERT INTO ctxengine_token_counts (session_id, sequence, counter, count)
                SELECT s, (c.v->>0)::bigint, c.v->>1, (c.v->>2)::bigint
                FROM json_array_elements(counts) AS c(v)
                ON CONFLICT (session_id, sequence, counter) DO NOTHING;
            END IF;
            IF claim_run IS NOT NULL THEN
                INSERT INTO ctxengine_checkpoint_leases (run_id, owner, epoch)
                VALUES (claim_run, claim_owner, 1) ON CONFLICT (run_id) DO NOTHING;
                IF NOT FOUND THEN
                    RAISE EXCEPTION 'ctxengine: run % was claimed before', claim_run
                        USING ERRCODE = 'CX001';
                END IF;
            END IF;
            IF cp_run IS NOT NULL THEN
                SELECT l.owner, l.epoch INTO lease_owner, lease_epoch
                    FROM ctxengine_checkpoint_leases l WHERE l.run_id = cp_run FOR UPDATE;
                SELECT COALESCE(MAX(c.version), 0), COALESCE(bool_or(c.kind = 'full'), false)
                    INTO last_version, has_full FROM ctxengine_checkpoints c WHERE c.run_id = cp_run;
                IF lease_owner IS DISTINCT FROM cp_owner OR lease_epoch IS DISTINCT FROM cp_epoch
                   OR last_version + 1 <> cp_version OR (cp_kind <> 'full' AND NOT has_full) THEN
                    RAISE EXCEPTION 'ctxengine: run % is not at the predicted lease and version', cp_run
                        USING ERRCODE = 'CX001';
                END IF;
                INSERT INTO ctxengine_checkpoints (run_id, version, kind, trigger, payload,
                    lease_epoch, created_at, schema_version)
                VALUES (cp_run, cp_version, cp_kind, cp_trigger, cp_payload, cp_epoch, cp_at, cp_format);
                IF prune_before IS NOT NULL THEN
                    DELETE FROM ctxengine_checkpoints WHERE run_id = cp_run AND version < prune_before;
                END IF;
            END IF;
        END
        $fn$
        """,
    ),
)

#: Every migration, in revision order (revision 2 onwards). Append only.
MIGRATIONS: tuple[Migration, ...] = (
    TOKEN_COUNTS,
    ROWID_TABLES,
    PREDICTED_COMMIT,
    STABLE_PLANS,
    KEYED_LOOKUPS,
)


def latest_revision(migrations: tuple[Migration, ...] | None = None) -> int:
    chain = MIGRATIONS if migrations is None else migrations
    return chain[-1].revision if chain else BASE_REVISION


def pending(revision: int, migrations: tuple[Migration, ...] | None = None) -> tuple[Migration, ...]:
    """The migrations a store at ``revision`` still needs, in order."""
    chain = MIGRATIONS if migrations is None else migrations
    return tuple(m for m in chain if m.revision > revision)


@dataclass(frozen=True, slots=True)
class MigrationReport:
    """What ``migrate`` found and did (``applied`` is empty on a dry run or an up-to-date store)."""

    store: str
    level: int
    from_revision: int
    to_revision: int
    pending: tuple[str, ...]
    applied: tuple[str, ...]
    dry_run: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "level": self.level,
            "from_revision": self.from_revision,
            "to_revision": self.to_revision,
            "pending": list(self.pending),
            "applied": list(self.applied),
            "dry_run": self.dry_run,
        }


def check_level(where: str, level: object) -> int:
    """The store's compatibility level, or a ``StoreError`` when this code cannot read it."""
    if isinstance(level, bool) or not isinstance(level, int) or level < 1:
        raise StoreError(f"{where}: bad schema compatibility level {level!r}")
    if level > COMPAT_LEVEL:
        raise StoreOpenError(
            f"{where} has schema version {level} (its compatibility level); this code understands up "
            f"to {COMPAT_LEVEL}: upgrade ctxengine"
        )
    return level


def check_revision(where: str, revision: object) -> int:
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < BASE_REVISION:
        raise StoreError(f"{where}: bad schema revision {revision!r}")
    return revision


def describe(migration: Migration) -> str:
    return f"{migration.revision}: {migration.name}"


def report(where: str, found: dict[Any, Any], *, apply: bool) -> MigrationReport:
    """What migrating a store whose version rows are ``found`` does (``{}``: a new store,
    created at the base revision first)."""
    if COMPONENT_LEVEL in found:
        level = check_level(where, found[COMPONENT_LEVEL])
        revision = check_revision(where, found.get(COMPONENT_REVISION, BASE_REVISION))
    else:
        level, revision = COMPAT_LEVEL, BASE_REVISION
    todo = pending(revision)
    steps = tuple(describe(m) for m in todo)
    return MigrationReport(
        where,
        level,
        revision,
        todo[-1].revision if todo else revision,
        steps,
        steps if apply else (),
        not apply,
    )


def no_store(where: str) -> StoreOpenError:
    """A location without a store, opened where nothing may be created (read-only, a dry run)."""
    return StoreOpenError(
        f"{where} holds no ctxengine store (`ctxengine migrate` or a store's first open creates one)"
    )


__all__ = [
    "BASE_REVISION",
    "COMPAT_LEVEL",
    "COMPONENT_LEVEL",
    "COMPONENT_REVISION",
    "KEYED_LOOKUPS",
    "MIGRATIONS",
    "PREDICTED_COMMIT",
    "ROWID_TABLES",
    "STABLE_PLANS",
    "TOKEN_COUNTS",
    "VERSION_TABLE",
    "Migration",
    "MigrationReport",
    "check_level",
    "check_revision",
    "describe",
    "latest_revision",
    "no_store",
    "pending",
    "report",
]
