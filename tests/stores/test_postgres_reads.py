"""PostgreSQL reads that must stay on their indexes whatever the planner is told (issue 13):
a typed read and the anomaly floor read index entries in proportion to what they return,
not to the session's length. Counted with the server's per-transaction statistics."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from ctxengine.model.clock import FixedClock
from ctxengine.stores import _rows as store_rows
from ctxengine.stores import postgres_items
from ctxengine.stores.events import FORMAT_VERSION, NewEvent, Store
from storekit import StoreCase

SID = "reads"
CLOCK = datetime(2026, 11, 30, 9, tzinfo=UTC)
PLAN = "context.plan.created"


def _event(key: str, event_type: str = "conversation.item.appended") -> NewEvent:
    return NewEvent(SID, event_type, {"kind": "user", "text": key}, key)


async def _session(case: StoreCase, events: int) -> Store:
    store = await case.open(FixedClock(CLOCK))
    await store.events.append(NewEvent(SID, PLAN, {"plan": {}}, "plan"))
    for start in range(0, events, 1_000):
        await store.events.append_all([_event(f"e{i}") for i in range(start, start + 1_000)])
    return store


#: This transaction's index entries returned by the events table's indexes, and rows
#: returned by its sequential scans.
INDEX_ENTRIES = (
    "SELECT COALESCE(SUM(pg_stat_get_xact_tuples_returned(indexrelid)), 0) FROM pg_index "
    "WHERE indrelid = 'ctxengine_events'::regclass"
)
SCANNED = "SELECT pg_stat_get_xact_tuples_returned('ctxengine_events'::regclass)"


async def test_a_typed_read_walks_its_types_not_the_session(
    store_case_factory: Callable[[str], StoreCase],
) -> None:
    """The plan read of every turn asks for plan events after the last one it saw: through
    the type index that is nothing, through the sequence index it was the whole session."""
    case = store_case_factory("postgres")
    store = await _session(case, 3_000)
    try:
        assert case.postgres_dsn is not None
        async with await psycopg.AsyncConnection.connect(case.postgres_dsn, autocommit=True) as aconn:
            async with aconn.transaction():
                rows, tail = await postgres_items.read_typed(
                    aconn, SID, 1, None, (PLAN, "context.epoch.rotated")
                )
                assert (rows, tail) == ([], 3_001)
                read = await (await aconn.execute(INDEX_ENTRIES)).fetchone()
                scanned = await (await aconn.execute(SCANNED)).fetchone()
        assert read is not None and scanned is not None and scanned[0] == 0
        assert read[0] < 100, f"{read[0]} index entries read for an empty typed read"
        # And the store's read answers what it must.
        assert [e.type for e in await store.events.read(SID, 0, [PLAN])] == [PLAN]
    finally:
        await store.close()


async def test_the_anomaly_floor_reads_index_entries_not_the_session(
    store_case_factory: Callable[[str], StoreCase],
) -> None:
    """``ctxengine_anomaly_floor`` runs on a generic plan (planned once per connection): each of
    its questions must be one an index answers at its first entry. Asked as "the first
    sequence of a newer format", a generic plan walked the primary key and filtered every
    row of the session (40 ms at 100,000 events)."""
    case = store_case_factory("postgres")
    store = await _session(case, 3_000)
    try:
        assert case.postgres_dsn is not None
        known = list(store_rows.KNOWN_TYPES)
        with psycopg.connect(case.postgres_dsn, autocommit=True) as conn, conn.transaction():
            for _ in range(8):  # past any custom-plan phase
                floor = conn.execute(
                    "SELECT ctxengine_anomaly_floor(%s, %s, %s)", (SID, known, FORMAT_VERSION)
                ).fetchone()
                assert floor == (None,)
            read = conn.execute(INDEX_ENTRIES).fetchone()
            scanned = conn.execute(SCANNED).fetchone()
        assert read is not None and scanned is not None
        assert scanned[0] == 0
        assert read[0] < 200, f"{read[0]} index entries read for 8 floors of a 3,000-event session"
        # And it still finds what it must: a row of a newer format, and a row of an unknown type.
        case.raw_execute(
            "UPDATE ctxengine_events SET schema_version = 99 WHERE session_id = ? AND sequence = 2500", (SID,)
        )
        case.raw_execute(
            "UPDATE ctxengine_events SET type = 'x.unknown' WHERE session_id = ? AND sequence = 2700", (SID,)
        )
        with psycopg.connect(case.postgres_dsn, autocommit=True) as conn:
            row = conn.execute("SELECT ctxengine_anomaly_floor(%s, %s, %s)", (SID, known, FORMAT_VERSION))
            assert row.fetchone() == (2500,)
            row = conn.execute("SELECT ctxengine_anomaly_floor(%s, %s, %s)", (SID, known, 99))
            assert row.fetchone() == (2700,)
    finally:
        await store.close()


async def test_plans_made_on_a_young_table_stay_on_their_indexes_as_it_grows(
    store_case_factory: Callable[[str], StoreCase],
) -> None:
    """A connection plans a function's statements on its first calls and keeps those plans.
    Planned while the table was a few rows long (a new deployment: no statistics, every
    session-prefixed index costs the same), the anomaly floor's walk over the types and the
    predicted commit's check for stored keys (revision 4) read every row of the session once
    it had grown: a turn cost more the longer the session. Revision 5 asks both questions so
    that one index answers them at its first entries, whatever was estimated."""
    from ctxengine.stores import postgres_predicted
    from ctxengine.stores.postgres import SESSION_LOCK_CLASS
    from ctxengine.stores.prediction import Prediction

    case = store_case_factory("postgres")
    store = await case.open(FixedClock(CLOCK))
    await store.events.append(NewEvent(SID, PLAN, {"plan": {}}, "plan"))
    await store.events.append_all([_event(f"e{i}") for i in range(10)])
    assert case.postgres_dsn is not None
    known = list(store_rows.KNOWN_TYPES)
    at = datetime(2026, 11, 30, 9, tzinfo=UTC)

    def commit(conn: psycopg.Connection[Any], next_sequence: int, key: str) -> None:
        new = _event(key)
        prediction = Prediction(SID, next_sequence, f"run-{key}", 1)
        prediction.append_all([new], [store_rows.payload_text(new.payload)], at)
        conn.execute(postgres_predicted.CALL, postgres_predicted.params(prediction, SESSION_LOCK_CLASS))

    try:
        with psycopg.connect(case.postgres_dsn, autocommit=True) as conn:
            for i in range(8):  # planned now, on a table of a dozen rows
                conn.execute("SELECT ctxengine_anomaly_floor(%s, %s, %s)", (SID, known, FORMAT_VERSION))
                commit(conn, 12 + i, f"young-{i}")
            for start in range(0, 3_000, 1_000):  # the session grows (another connection)
                await store.events.append_all([_event(f"g{i}") for i in range(start, start + 1_000)])
            with conn.transaction():
                conn.execute("SELECT ctxengine_anomaly_floor(%s, %s, %s)", (SID, known, FORMAT_VERSION))
                floor_read = conn.execute(INDEX_ENTRIES).fetchone()
            with conn.transaction():
                commit(conn, 3_020, "grown")
                commit_read = conn.execute(INDEX_ENTRIES).fetchone()
        assert floor_read is not None and floor_read[0] < 50, f"the floor read {floor_read} index entries"
        assert commit_read is not None and commit_read[0] < 50, f"the commit read {commit_read} index entries"
        # The commit still refuses a stored key, and writes nothing.
        with psycopg.connect(case.postgres_dsn, autocommit=True) as conn:
            with pytest.raises(psycopg.Error) as err:
                commit(conn, 3_021, "grown")
            assert err.value.sqlstate == postgres_predicted.MISSED
        assert (await store.events.read(SID))[-1].derivation_key == "grown"
    finally:
        await store.close()


async def test_a_commit_planned_on_young_tables_looks_runs_up_by_key_once_they_grow(
    store_case_factory: Callable[[str], StoreCase],
) -> None:
    """Planned while the lease and checkpoint tables were a page long, the predicted commit's
    lookups by run (its lease, its last version, the prune) kept scans of them (revision 5);
    revision 6 plans the function with scans off, so they stay lookups as the tables grow."""
    from ctxengine.stores import postgres_predicted
    from ctxengine.stores.events import Lease
    from ctxengine.stores.postgres import SESSION_LOCK_CLASS
    from ctxengine.stores.prediction import Prediction

    case = store_case_factory("postgres")
    store = await case.open(FixedClock(CLOCK))
    await store.events.append(NewEvent(SID, PLAN, {"plan": {}}, "plan"))
    assert case.postgres_dsn is not None
    at = datetime(2026, 11, 30, 9, tzinfo=UTC)
    scanned = (
        "SELECT pg_stat_get_xact_tuples_returned('ctxengine_checkpoints'::regclass) "
        "+ pg_stat_get_xact_tuples_returned('ctxengine_checkpoint_leases'::regclass)"
    )

    def first_write(conn: psycopg.Connection[Any], next_sequence: int, run: str) -> None:
        new = _event(f"seeded-{run}")
        prediction = Prediction(SID, next_sequence, run, 1)
        prediction.append_all([new], [store_rows.payload_text(new.payload)], at)
        prediction.claim(run, "w")
        prediction.write_checkpoint(run, Lease("w", 1, run), "full", "seeded", '{"x":1}', at, 1)
        prediction.prune(run, 1)
        conn.execute(postgres_predicted.CALL, postgres_predicted.params(prediction, SESSION_LOCK_CLASS))

    try:
        with psycopg.connect(case.postgres_dsn, autocommit=True) as conn:
            first_write(conn, 2, "young-0")
            conn.execute("ANALYZE ctxengine_checkpoints")  # as autovacuum would: a page long
            conn.execute("ANALYZE ctxengine_checkpoint_leases")
            for i in range(1, 9):  # planned now, on what the statistics say are one-page tables
                first_write(conn, 2 + i, f"young-{i}")
            case.raw_execute(
                "INSERT INTO ctxengine_checkpoint_leases (run_id, owner, epoch) "
                "SELECT 'other-' || g, 'w', 1 FROM generate_series(1, 3000) AS g"
            )
            case.raw_execute(
                "INSERT INTO ctxengine_checkpoints (run_id, version, kind, trigger, payload, lease_epoch, "
                "created_at, schema_version) SELECT 'other-' || g, 1, 'full', 'seeded', '{}', 1, now(), 1 "
                "FROM generate_series(1, 3000) AS g"
            )
            with conn.transaction():
                first_write(conn, 11, "grown")
                read = conn.execute(scanned).fetchone()
        assert read is not None and read[0] < 50, f"{read} rows of the lease and checkpoint tables scanned"
        assert [c["version"] for c in await store.checkpoints.latest_raw("grown")] == [1]
    finally:
        await store.close()
