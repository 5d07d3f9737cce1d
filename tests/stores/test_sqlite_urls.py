"""SQLite store URLs read as SQLAlchemy reads them (issue 40): three slashes and a relative
path, relative to the working directory; four slashes, an absolute path."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxengine.errors import StoreOpenError
from ctxengine.stores import open_store
from ctxengine.stores.sqlite import SQLiteStore


async def _opened_path(url: str) -> str:
    store = await open_store(url)
    try:
        assert isinstance(store, SQLiteStore)
        return str(store.path)
    finally:
        await store.close()


async def test_three_slashes_are_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    assert await _opened_path("sqlite:///relative.db") == str(tmp_path / "relative.db")
    assert await _opened_path("sqlite:///sub/a%20b.db") == str(tmp_path / "sub" / "a b.db")
    assert (tmp_path / "relative.db").is_file() and (tmp_path / "sub" / "a b.db").is_file()
    assert not Path("/relative.db").exists()


async def test_four_slashes_are_an_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    target = tmp_path / "absolute.db"
    assert await _opened_path(f"sqlite:///{target}") == str(target)
    assert target.is_file() and not list(elsewhere.iterdir())


async def test_the_relative_path_is_fixed_at_the_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A later chdir does not move the store: the path is resolved when the store opens."""
    monkeypatch.chdir(tmp_path)
    store = await open_store("sqlite:///fixed.db")
    try:
        (tmp_path / "other").mkdir()
        monkeypatch.chdir(tmp_path / "other")
        assert isinstance(store, SQLiteStore) and str(store.path) == str(tmp_path / "fixed.db")
    finally:
        await store.close()


@pytest.mark.parametrize("url", ["sqlite:///:memory:", "sqlite://:memory:"])
async def test_memory_urls_stay_a_private_database(url: str) -> None:
    assert await _opened_path(url) == ":memory:"


@pytest.mark.parametrize(
    "url", ["sqlite://", "sqlite:///", "sqlite:////", "sqlite://relative.db", "sqlite:x.db"]
)
async def test_a_url_without_a_path_names_the_forms(url: str) -> None:
    with pytest.raises(StoreOpenError) as err:
        await open_store(url)
    message = str(err.value)
    assert "sqlite:///relative.db" in message and "sqlite:////absolute/path.db" in message
