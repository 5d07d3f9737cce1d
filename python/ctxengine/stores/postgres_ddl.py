"""The PostgreSQL store's schema as statements: a new store's, and the way there from revision 1.

A new store is created at the current schema at once (``CURRENT``); a store from before
schema revisions were tracked (revision 1, what ``tests/golden`` holds) takes ``FROM_BASE``,
the statements ``CURRENT`` adds to revision 1's tables. What it adds, and why:

* Raw token counts beside the events they count, in a side table (events stay immutable; a
  count is insert-or-ignore), and an index of events by format version (the fail-closed
  check of a typed read finds rows of a newer format without a scan; ADR 0011).
* ``ctxengine_commit_predicted``: one call commits a worker's predicted write set (a step's
  events, their token counts, a claim, one checkpoint version and its prune) where the
  general path takes six or seven round trips. It takes the session lock, checks every
  prediction before it writes, and raises SQLSTATE ``CX001`` (undoing the call whole) when
  one does not hold; the worker then takes the general path (ADR 0013).
* ``ctxengine_anomaly_floor``: the typed reads' first row of a type this code does not know
  or of a newer format, in a function so that a connection plans it once (as a CTE of each
  read it cost 0.4 ms of planning per call).

Both functions are asked so that one index answers each statement whatever the planner
estimates, and plan with sequential scans off: planned on young tables (no statistics, one
page), a connection kept plans that read a whole session, or every row of the lease and
checkpoint tables, once they had grown (ADR 0013, items 9 and 11).
"""

from __future__ import annotations

#: Revision 1's tables (what stores from before schema revisions were tracked hold, ``tests/golden``).
BASE: tuple[str, ...] = (
    """
    CREATE TABLE ctxengine_events (
        session_id       TEXT        NOT NULL,
        sequence         BIGINT      NOT NULL CHECK (sequence >= 1),
        type             TEXT        NOT NULL,
        payload          TEXT        NOT NULL,
        derivation_key   TEXT        NOT NULL,
        run_id           TEXT,
        actor            TEXT        NOT NULL,
        visibility_scope TEXT        NOT NULL,
        visibility_id    TEXT,
        created_at       TIMESTAMPTZ NOT NULL,
        schema_version   INTEGER     NOT NULL,
        CONSTRAINT ctxengine_events_sequence_key PRIMARY KEY (session_id, sequence),
        CONSTRAINT ctxengine_events_derivation_key UNIQUE (session_id, derivation_key)
    )
    """,
    "CREATE INDEX ctxengine_events_by_type ON ctxengine_events (session_id, type, sequence)",
    """
    CREATE TABLE ctxengine_checkpoint_leases (
        run_id TEXT   NOT NULL PRIMARY KEY,
        owner  TEXT   NOT NULL,
        epoch  BIGINT NOT NULL
    )
    """,
    """
    CREATE TABLE ctxengine_checkpoints (
        run_id         TEXT        NOT NULL,
        version        BIGINT      NOT NULL CHECK (version >= 1),
        kind           TEXT        NOT NULL,
        trigger        TEXT        NOT NULL,
        payload        TEXT        NOT NULL,
        lease_epoch    BIGINT      NOT NULL,
        created_at     TIMESTAMPTZ NOT NULL,
        schema_version INTEGER     NOT NULL,
        PRIMARY KEY (run_id, version)
    )
    """,
)

TOKEN_COUNTS = """
    CREATE TABLE ctxengine_token_counts (
        session_id TEXT   NOT NULL,
        sequence   BIGINT NOT NULL CHECK (sequence >= 1),
        counter    TEXT   NOT NULL,
        count      BIGINT NOT NULL CHECK (count >= 0),
        PRIMARY KEY (session_id, sequence, counter)
    )
    """
EVENTS_BY_VERSION = (
    "CREATE INDEX ctxengine_events_by_version ON ctxengine_events (session_id, schema_version, sequence)"
)

ANOMALY_FLOOR = """
    CREATE FUNCTION ctxengine_anomaly_floor(s text, known text[], v integer) RETURNS bigint
    LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $fn$
    DECLARE
        floor bigint;
        newer integer;
    BEGIN
        -- The distinct types of the session by a skip scan of the type index, and the
        -- first row of each one this code does not know.
        -- Every step asks for the least type above the last one (the first above ''),
        -- which only the type index answers at its first entry: a first step without a
        -- lower bound got a generic plan that read every row of the session.
        WITH RECURSIVE kinds(type) AS (
            SELECT ''::text
            UNION ALL
            SELECT (SELECT MIN(e.type) FROM ctxengine_events e
                    WHERE e.session_id = s AND e.type > kinds.type)
            FROM kinds WHERE kinds.type IS NOT NULL
        )
        SELECT MIN((SELECT MIN(e.sequence) FROM ctxengine_events e
                    WHERE e.session_id = s AND e.type = kinds.type))
        INTO floor
        FROM kinds WHERE kinds.type IS NOT NULL AND kinds.type <> '' AND NOT (kinds.type = ANY(known));
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
    """

COMMIT_PREDICTED = """
    CREATE FUNCTION ctxengine_commit_predicted(
        s text, lock_class integer, first_seq bigint, events json, counts json,
        claim_run text, claim_owner text,
        cp_run text, cp_owner text, cp_epoch bigint, cp_version bigint, cp_kind text,
        cp_trigger text, cp_payload text, cp_format integer, cp_at timestamptz,
        prune_before bigint
    ) RETURNS void LANGUAGE plpgsql SET enable_seqscan = off AS $fn$
    DECLARE
        last_seq bigint;
        lease_owner text;
        lease_epoch bigint;
        last_version bigint;
        has_full boolean;
        inserted bigint;
    BEGIN
        -- Held to the commit; every statement below starts after it, so it sees every
        -- earlier writer of the session.
        PERFORM pg_advisory_xact_lock(lock_class, hashtext(s));
        -- events: [[key, type, payload, run, actor, scope, id, format, at], ...] (one text
        -- parameter: the driver dumps arrays of arrays item by item); counts: [[seq, counter, n]].
        IF json_array_length(events) > 0 THEN
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
            FROM json_array_elements(events) WITH ORDINALITY AS b(v, ord)
            ON CONFLICT (session_id, derivation_key) DO NOTHING;
            -- A key stored already is met by the insert itself, on the key index (no plan
            -- to choose; a join to find it let a generic plan read every key of the
            -- session): fewer rows in than sent is a refusal, and the raise undoes them.
            GET DIAGNOSTICS inserted = ROW_COUNT;
            IF inserted <> json_array_length(events) THEN
                RAISE EXCEPTION 'ctxengine: an event of the write set is stored already'
                    USING ERRCODE = 'CX001';
            END IF;
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
    """

#: Revision 1 to the current schema.
FROM_BASE: tuple[str, ...] = (TOKEN_COUNTS, EVENTS_BY_VERSION, ANOMALY_FLOOR, COMMIT_PREDICTED)

#: A new store: the current schema.
CURRENT: tuple[str, ...] = (*BASE, *FROM_BASE)

__all__ = ["BASE", "CURRENT", "FROM_BASE"]
