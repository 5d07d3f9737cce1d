"""Schema revision 5 (PostgreSQL): the two functions of revision 4, with plans that stay on
their indexes however the planner estimates (issue 13, ADR 0013).

A connection keeps one generic plan per statement of a PL/pgSQL function, made from the
estimates of its first calls. On a table the server has not analyzed yet (a new
deployment, a benchmark), every session looks one row long, every index that starts with
``session_id`` costs the same, and the tie went to an index that answers by reading the
whole session: the first step of the anomaly floor's walk over a session's types, and the
check that no event of a write set is stored already. Both grew with the session, turn by
turn, on every connection that planned them early. Revision 5 asks both questions so that
one index answers them whatever the estimates: every step of the walk has a lower bound on
the type, and the key check is the insert's own conflict on the key index. Same answers,
same refusals (SQLSTATE ``CX001``); SQLite plans its statements itself and is unchanged.
"""

from __future__ import annotations

from .migration_step import Migration

STABLE_PLANS = Migration(
    revision=5,
    name="PostgreSQL: the anomaly floor and the predicted commit on plans that do not walk a session",
    sqlite=(),
    postgres=(
        """
        CREATE OR REPLACE FUNCTION ctxengine_anomaly_floor(s text, known text[], v integer) RETURNS bigint
        LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $fn$
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
        """,
        """
        CREATE OR REPLACE FUNCTION ctxengine_commit_predicted(
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
        """,
    ),
)

#: Revision 6: the same two functions plan with sequential scans off. Every statement in them
#: is a lookup by key (a run's lease, its checkpoints' last version, a prune by run and
#: version, the session's tail), and planned on a one-page table a scan is the cheaper plan:
#: kept by the connection, it read every row of the table once it had grown (0.01 -> 0.06 ms
#: per lookup over a 400-run benchmark, and on with every run). With scans off each takes its
#: index whatever the table's size when it was planned.
KEYED_LOOKUPS = Migration(
    revision=6,
    name="PostgreSQL: the functions' lookups by key take their indexes however young the tables",
    sqlite=(),
    postgres=(
        "ALTER FUNCTION ctxengine_commit_predicted(text, integer, bigint, json, json, text, text, text, "
        "text, bigint, bigint, text, text, text, integer, timestamptz, bigint) SET enable_seqscan = off",
        "ALTER FUNCTION ctxengine_anomaly_floor(text, text[], integer) SET enable_seqscan = off",
    ),
)

__all__ = ["KEYED_LOOKUPS", "STABLE_PLANS"]
