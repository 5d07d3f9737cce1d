"""Bad arguments and unreachable stores get typed errors, the same on every store (issue 11).

Each case once reached the driver and came back as its own exception type
(``UndefinedFunction``, ``OverflowError``, ``DataError``,
``UnicodeEncodeError``, ``ProgramLimitExceeded``, ``sqlite3.OperationalError``,
``PoolTimeout`` after 30 s), differently per adapter.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from ctxengine.errors import CanonicalizationError, ModelValidationError, StoreError, StoreUnavailable
from ctxengine.stores import open_store
from ctxengine.stores.events import NewEvent, Store
from storekit import _free_port

TYPE = "context.working_state.updated"
HUGE = "s" * 1_000_000

BAD_CALLS: dict[str, Callable[[Store], Awaitable[Any]]] = {
    "read(int session)": lambda s: s.events.read(5),  # type: ignore[arg-type]
    "read(after=2**70)": lambda s: s.events.read("s", after=2**70),
    "read(before=-2**70)": lambda s: s.events.read("s", before=-(2**70)),
    "read(huge session)": lambda s: s.events.read(HUGE),
    "read(NUL session)": lambda s: s.events.read("a\x00b"),
    "read(surrogate session)": lambda s: s.events.read("a\ud800"),
    "latest_before(2**70)": lambda s: s.events.latest_before("s", 2**70, TYPE),
    "append(NUL session)": lambda s: s.events.append(NewEvent("a\x00b", TYPE, {}, "k")),
    "append(surrogate key)": lambda s: s.events.append(NewEvent("s", TYPE, {}, "k\udfff")),
    "append(huge session)": lambda s: s.events.append(NewEvent(HUGE, TYPE, {}, "k")),
    "append(surrogate payload)": lambda s: s.events.append(NewEvent("s", TYPE, {"x": "\ud800"}, "k")),
    "append(NaN payload)": lambda s: s.events.append(NewEvent("s", TYPE, {"x": float("nan")}, "k")),
    "claim(huge run)": lambda s: s.checkpoints.claim(HUGE, "w"),
    "latest_raw(NUL run)": lambda s: s.checkpoints.latest_raw("r\x00"),
}


@pytest.mark.parametrize("call", sorted(BAD_CALLS))
async def test_bad_arguments_are_typed_errors_on_every_store(store: Store, call: str) -> None:
    # A payload that is not canonical JSON names its JSON path; every other bad argument its field.
    expected = CanonicalizationError if "payload" in call else ModelValidationError
    with pytest.raises(expected) as err:
        await BAD_CALLS[call](store)
    assert err.type.__module__ == "ctxengine.errors"
    assert await store.events.read("s") == []  # nothing was written


async def test_a_locked_sqlite_file_is_store_unavailable_after_its_bounded_wait(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    store = await open_store(f"sqlite:///{path}", busy_timeout=0.2)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="locked") as err:
            await store.events.append(NewEvent("s", TYPE, {}, "k"))
        assert time.monotonic() - started < 5
        assert err.value.retryable
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    event = await store.events.append(NewEvent("s", TYPE, {}, "k"))  # and it works once free
    assert event.sequence == 1
    await store.close()


async def test_an_unreachable_postgres_is_store_unavailable_within_its_timeout() -> None:
    dsn = f"postgresql://postgres@127.0.0.1:{_free_port()}/postgres"
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as err:
        await asyncio.wait_for(open_store(dsn, timeout=1.5), timeout=30)
    assert time.monotonic() - started < 10  # bounded by the timeout, not 30 s of silence
    assert isinstance(err.value, StoreError) and err.value.retryable
    assert "127.0.0.1" in str(err.value) and "password" not in str(err.value)


@pytest.mark.parametrize("cache_kib", [0, 15, -256, 2.5, True, "256", 1 << 23])
async def test_a_bad_sqlite_page_cache_size_is_refused(tmp_path: Path, cache_kib: object) -> None:
    with pytest.raises(ModelValidationError, match="cache_kib"):
        await open_store(f"sqlite:///{tmp_path / 'c.db'}", cache_kib=cache_kib)


@pytest.mark.parametrize(("cache_kib", "pages"), [(None, -256), (64, -64), (4096, -4096)])
async def test_the_sqlite_page_cache_is_the_size_asked(
    tmp_path: Path, cache_kib: int | None, pages: int
) -> None:
    """A connection's page cache (``PRAGMA cache_size``, negative: KiB) is small by default,
    so that a long scan recycles its pages instead of growing the worker's memory."""
    options = {} if cache_kib is None else {"cache_kib": cache_kib}
    store = await open_store(f"sqlite:///{tmp_path / 'c.db'}", **options)
    try:
        conn = store._conn  # type: ignore[attr-defined]
        asked = await store._run(lambda: conn.execute("PRAGMA cache_size").fetchone())  # type: ignore[attr-defined]
        assert asked == (pages,)
    finally:
        await store.close()
