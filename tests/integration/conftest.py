"""Fixtures of the integration tests: the golden stores, opened with today's code."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import ctxengine as ce
from storekit import postgres_bin

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "golden"))
import goldenkit

GOLDEN_STORES = ("sqlite", "postgres")


@pytest.fixture(params=GOLDEN_STORES)
async def golden(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> AsyncIterator[tuple[str, Any]]:
    """A fresh copy of a golden store, opened with today's code: (kind, store)."""
    kind: str = request.param
    if kind == "sqlite":
        store = await ce.open_store(goldenkit.sqlite_copy(tmp_path))
        try:
            yield kind, store
        finally:
            await store.close()
        return
    server = request.getfixturevalue("postgres_dsn")
    bin_dir = postgres_bin()
    assert bin_dir is not None
    with goldenkit.postgres_copy(server, bin_dir / "psql") as dsn:
        store = await ce.open_store(dsn)
        try:
            yield kind, store
        finally:
            await store.close()
