"""``ContextSession`` against the Agents SDK's own ``SQLiteSession`` (issue 41, acceptance 2):
on the same call sequence, where no budget binds, ``get_items`` (every limit), ``pop_item`` and
``clear_session`` return what ``SQLiteSession`` returns; pops and clears are events (the log
keeps every item); the new events are format 5 with a write switch, and an older reader fails
closed on them (ADR 0009)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents import RunConfig, SQLiteSession
from agents.memory import Session

import ctxengine as ce
from agentskit import INSTRUCTIONS, SMALL, ScriptModel, engine_tools, run_turns
from ctxengine.errors import FormatDisabled, UnsupportedFormat
from ctxengine.integrations.openai_agents import ITEM_POPPED, SESSION_CLEARED, ContextSession
from ctxengine.stores import _rows, formats, sqlite_items
from ctxengine.stores.formats import WritePolicy


async def script(session: Any) -> list[Any]:
    """The same calls on either session; what each returned."""
    seen: list[Any] = []
    await run_turns(session, ScriptModel(), 1, 3, RunConfig())
    for limit in (None, 1, 2, 5, 0, -1, 1000):
        seen.append(await session.get_items(limit))
    seen.append(await session.pop_item())
    seen.append(await session.pop_item())
    seen.append(await session.get_items())
    await session.add_items([{"role": "user", "content": "again"}])
    seen.append(await session.get_items(2))
    await session.clear_session()
    seen += [await session.get_items(), await session.pop_item()]
    await run_turns(session, ScriptModel(first_id=500), 4, 4, RunConfig())
    seen += [await session.get_items(), await session.pop_item(), await session.get_items(3)]
    return seen


async def test_the_session_returns_what_the_sdks_sqlite_session_returns(tmp_path: Path) -> None:
    sdk = SQLiteSession("s1", tmp_path / "sdk.db")
    expected = await script(sdk)
    sdk.close()
    # A window no budget binds in (the acceptance's "where no budget binds").
    async with ce.Engine.open(
        f"sqlite:///{tmp_path}/ce.db", model="gpt-4.1", instructions=INSTRUCTIONS, tools=engine_tools()
    ) as engine:
        ours = ContextSession("s1", engine)
        assert isinstance(ours, Session)
        got = await script(ours)
        assert got == expected
        assert len(expected[0]) > 10 and expected[7] is not None
        # Nothing left the log: the pops and the clear are events.
        logged = await engine.store.events.read_items("s1")
        assert len(logged) == len(expected[0]) + 1 + len(expected[-3])
        kinds = [e.type for e in await engine.store.events.read("s1", types=(ITEM_POPPED, SESSION_CLEARED))]
        assert kinds == [ITEM_POPPED, ITEM_POPPED, SESSION_CLEARED, ITEM_POPPED]


async def test_session_settings_limit_is_the_default_limit(tmp_path: Path) -> None:
    async with ce.Engine.open("memory://", model=SMALL) as engine:
        session = ContextSession("s1", engine, session_settings={"limit": 2})
        await session.add_items([{"role": "user", "content": str(i)} for i in range(5)])
        assert [i["content"] for i in await session.get_items()] == ["3", "4"]
        assert len(await session.get_items(4)) == 4


async def test_a_deployment_below_format_5_records_items_and_refuses_pop_and_clear(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/old.db"
    async with ce.Engine.open(
        await ce.open_store(url, write_policy=WritePolicy(max_version=4)), model=SMALL
    ) as engine:
        session = ContextSession("s1", engine)
        sdk_item = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "hi", "annotations": [], "logprobs": []}],
        }
        await session.add_items([{"role": "user", "content": "hello"}, sdk_item])
        # Without the SDK's form (not written), the items come back converted.
        assert await session.get_items() == [
            {"type": "message", "role": "user", "content": "hello"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "hi", "annotations": []}],
            },
        ]
        with pytest.raises(FormatDisabled):
            await session.pop_item()
        with pytest.raises(FormatDisabled):
            await session.clear_session()
        assert len(await session.get_items()) == 2
        await engine.store.close()


async def test_an_older_reader_fails_closed_on_a_popped_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path}/new.db"
    async with ce.Engine.open(url, model=SMALL) as engine:
        session = ContextSession("s1", engine)
        await session.add_items([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
        await session.pop_item()
    # A reader from before format 5 knows neither the version nor the types: the history a
    # run is built from must not come back without the pop (it would show "b" again).
    known = tuple(t for t in _rows.KNOWN_TYPES if not t.startswith("agents."))
    monkeypatch.setattr(_rows, "KNOWN_TYPES", known)
    monkeypatch.setattr(sqlite_items, "FORMAT_VERSION", 4)
    monkeypatch.setattr(formats, "FORMAT_VERSION", 4)
    monkeypatch.setattr(formats, "EVENT_FORMATS", {t: v for t, v in formats.EVENT_FORMATS.items() if v < 5})
    async with ce.Engine.open(url, model=SMALL) as engine:
        with pytest.raises(UnsupportedFormat):
            await engine.store.events.read_items("s1")
