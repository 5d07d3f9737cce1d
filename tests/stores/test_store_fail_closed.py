"""The store contract: corrupt rows, newer schemas and unknown store URLs are refused, typed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from contract_events import PLAN, new
from ctxengine.errors import StoreCorruption, StoreError, UnsupportedFormat
from ctxengine.model import Principal
from ctxengine.stores import open_store
from ctxengine.stores.events import Store
from storekit import StoreCase

# --------------------------------------------------------------------------
# fail closed on corrupt rows

CORRUPTIONS: dict[str, dict[str, Any]] = {
    "bad-json": {"payload": "{not json"},
    "not-an-object": {"payload": "[1, 2]"},
    "unknown-type": {"type": "context.plan.exploded"},
    "newer-schema": {"schema_version": 999},
    "bad-visibility": {"visibility_scope": "galaxy"},
}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
async def test_corrupt_rows_raise_store_corruption(
    store_case: StoreCase, store: Store, corruption: str
) -> None:
    await store.events.append(new("sess-c", "ok"))
    store_case.inject_event_row(session_id="sess-c", sequence=2, **CORRUPTIONS[corruption])
    # A row from a newer writer is not corrupt: it needs an upgrade (ADR 0009).
    expected = UnsupportedFormat if corruption == "newer-schema" else StoreCorruption
    with pytest.raises(expected) as err:
        await store.events.read("sess-c")
    assert "sess-c" in str(err.value) and "sequence 2" in str(err.value)
    if isinstance(err.value, StoreCorruption):
        assert (err.value.session_id, err.value.sequence) == ("sess-c", 2)
    else:
        assert err.value.needed_version == 999 and "version 999" in str(err.value)
    # No read path skips the row: typed reads and latest_before fetch it too.
    with pytest.raises(expected):
        await store.events.read("sess-c", types=[PLAN])
    with pytest.raises(expected):
        await store.events.latest_before("sess-c", 3, PLAN, Principal("p", "t"))
    with pytest.raises(expected):
        await store.events.latest_before("sess-c", 3, PLAN)
    # Rows below the corrupt one still read.
    assert [e.sequence for e in await store.events.read("sess-c", before=2)] == [1]


@pytest.mark.parametrize(
    "bad", [{"payload": "nope"}, {"kind": "partial"}, {"trigger": "lunch"}, {"schema_version": 999}]
)
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_corrupt_checkpoint_rows_raise_store_corruption(
    store_case_factory: Callable[[str], StoreCase], kind: str, bad: dict[str, Any]
) -> None:
    case = store_case_factory(kind)
    store = await case.open()
    lease = await store.checkpoints.claim("run-9", "w")
    await store.checkpoints.write("run-9", {"ok": 1}, trigger="compaction", lease=lease)
    row = {"kind": "delta", "trigger": "tool_completed", "payload": "{}", "schema_version": 1, **bad}
    case.raw_execute(
        "INSERT INTO ctxengine_checkpoints (run_id, version, kind, trigger, payload, lease_epoch, "
        "created_at, schema_version) VALUES ('run-9', 2, ?, ?, ?, 1, ?, ?)",
        (row["kind"], row["trigger"], row["payload"], "2025-01-01T00:00:00+00:00", row["schema_version"]),
    )
    if bad.get("schema_version") == 999:
        with pytest.raises(UnsupportedFormat) as newer:
            await store.checkpoints.latest_raw("run-9")
        assert "run-9" in str(newer.value) and newer.value.needed_version == 999
    else:
        with pytest.raises(StoreCorruption) as err:
            await store.checkpoints.latest_raw("run-9")
        assert "run-9" in str(err.value) and err.value.sequence == 2
    await case.close_all()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_store_schema_newer_than_the_code_is_refused(
    store_case_factory: Callable[[str], StoreCase], kind: str
) -> None:
    case = store_case_factory(kind)
    await (await case.open()).close()
    case.raw_execute("UPDATE ctxengine_schema_version SET version = 999 WHERE component = 'store'")
    with pytest.raises(StoreError, match="schema version 999"):
        await case.open()


async def test_open_store_rejects_unknown_urls(tmp_path: Any) -> None:
    with pytest.raises(StoreError, match="unknown store URL scheme 'mysql'"):
        await open_store("mysql://root:secret@db/x")
    with pytest.raises(StoreError, match=r"sqlite:////absolute/path\.db"):
        await open_store("sqlite://relative.db")
    store = await open_store("sqlite:///:memory:")
    assert (await store.events.append(new("s", "k"))).sequence == 1
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.events.read("s")


async def test_open_store_accepts_the_postgres_scheme_alias(
    store_case_factory: Callable[[str], StoreCase],
) -> None:
    case = store_case_factory("postgres")
    assert case.url.startswith("postgresql://")
    store = await open_store("postgres://" + case.url.split("://", 1)[1])
    try:
        assert (await store.events.append(new("s", "k"))).sequence == 1
    finally:
        await store.close()
