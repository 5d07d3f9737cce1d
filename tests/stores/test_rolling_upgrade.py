"""The rolling-upgrade rule (issue 10, ADR 0009): an older reader fails closed, never misbuilds.

A newer worker may write, into a session this code also serves, an event
type or a payload shape this code does not know. Every read path that the
row lies on raises ``UnsupportedFormat`` naming the session, the sequence
and the format version needed; nothing skips the row. Reads that end below
it are unaffected. The write side: a deployment switches new event types
off until every reader is upgraded, and a disabled type is refused with
``FormatDisabled`` before anything is written.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import ctxengine as ce
from ctxengine.errors import FormatDisabled, ModelValidationError, UnsupportedFormat
from ctxengine.stores._rows import EVENT_COLUMNS
from ctxengine.stores.events import FORMAT_VERSION, NewEvent
from ctxengine.stores.formats import WritePolicy
from storekit import postgres_bin

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "golden"))
import goldenkit

SESSION = "golden-demo"
NEXT = 428  # the golden demo session holds 427 events
NEWER = FORMAT_VERSION + 1


def insert_row(url: str, **fields: Any) -> None:
    row = {
        "session_id": SESSION,
        "sequence": NEXT,
        "type": "context.carry.future",
        "payload": json.dumps({"summary": "from a newer worker"}),
        "derivation_key": "newer:1",
        "run_id": None,
        "actor": "runtime",
        "visibility_scope": "session",
        "visibility_id": None,
        "created_at": "2026-03-15T03:00:00+00:00",
        "schema_version": NEWER,
        **fields,
    }
    values = tuple(row[c] for c in EVENT_COLUMNS)
    cols = ", ".join(EVENT_COLUMNS)
    if url.startswith("sqlite://"):
        conn = sqlite3.connect(url[len("sqlite:///") :])
        with conn:
            conn.execute(
                f"INSERT INTO ctxengine_events ({cols}) VALUES ({', '.join('?' * len(values))})", values
            )
        conn.close()
        return
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(
            f"INSERT INTO ctxengine_events ({cols}) VALUES ({', '.join(['%s'] * len(values))})", values
        )


@pytest.fixture(params=("sqlite", "postgres"))
async def golden_url(request: pytest.FixtureRequest, tmp_path: Path, backend: str) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield goldenkit.sqlite_copy(tmp_path)
        return
    bin_dir = postgres_bin()
    assert bin_dir is not None
    with goldenkit.postgres_copy(request.getfixturevalue("postgres_dsn"), bin_dir / "psql") as dsn:
        yield dsn


def assert_names_the_row(err: pytest.ExceptionInfo[UnsupportedFormat]) -> None:
    message = str(err.value)
    assert f"session {SESSION!r}" in message and f"sequence {NEXT}" in message
    assert err.value.needed_version == NEWER and f"format version {NEWER}" in message


@pytest.mark.parametrize(
    "row",
    [
        {"type": "context.carry.future"},  # an event type from the future
        {  # a known type in a newer payload shape
            "type": "conversation.item.appended",
            "payload": json.dumps({"items": [{"type": "user_message", "content": "hi"}]}),
        },
    ],
    ids=["new-type", "new-shape"],
)
async def test_an_older_reader_fails_closed_on_every_path(golden_url: str, row: dict[str, Any]) -> None:
    insert_row(golden_url, **row)
    store = await ce.open_store(golden_url)
    try:
        paths = {
            "read": lambda: store.events.read(SESSION),
            "read(types)": lambda: store.events.read(SESSION, types=["conversation.item.appended"]),
            "read(after)": lambda: store.events.read(SESSION, after=NEXT - 1),
            "session_history": lambda: ce.session_history(store, SESSION, NEXT + 1),
            "latest_before": lambda: store.events.latest_before(
                SESSION, NEXT + 1, "context.working_state.updated", ce.Principal("dana", "acme")
            ),
            "carry_working_state": lambda: ce.carry_working_state(store, SESSION, NEXT + 1, None),
            "planner.current": lambda: ce.ContextPlanner(store).current(SESSION),
        }
        for name, call in paths.items():
            with pytest.raises(UnsupportedFormat) as err:
                await call()
            assert_names_the_row(err), name
        # Below the newer row the session reads as before.
        history = await ce.session_history(store, SESSION, NEXT)
        assert [ce.payload_hash(i.to_dict()) for i in history] == goldenkit.expected("sqlite")["sessions"][
            SESSION
        ]["history"]
    finally:
        await store.close()


async def test_a_disabled_event_type_is_refused_before_anything_is_written(golden_url: str) -> None:
    policy = WritePolicy(disabled=frozenset({"context.compacted"}))
    store = await ce.open_store(golden_url, write_policy=policy)
    try:
        event = NewEvent(SESSION, "context.compacted", {"x": 1}, "disabled:1")
        with pytest.raises(FormatDisabled, match=r"context\.compacted"):
            await store.events.append(event)
        assert len(await store.events.read(SESSION)) == NEXT - 1
        # Other types are written as usual.
        item = await ce.append_item(store, SESSION, ce.UserMessage("still here"))
        assert item.seq == NEXT
    finally:
        await store.close()


def test_write_policy_reads_the_environment_and_rejects_bad_values() -> None:
    assert WritePolicy.from_env({}) == WritePolicy()
    pinned = WritePolicy.from_env(
        {"CTXENGINE_WRITE_FORMAT": "1", "CTXENGINE_DISABLED_EVENTS": "context.compacted, phase.revised"}
    )
    assert pinned.max_version == 1
    assert pinned.disabled == {"context.compacted", "phase.revised"}
    assert not pinned.allows("phase.revised") and pinned.allows("phase.submitted")
    for env in ({"CTXENGINE_WRITE_FORMAT": "two"}, {"CTXENGINE_WRITE_FORMAT": "0"}):
        with pytest.raises(ModelValidationError, match=r"CTXENGINE_WRITE_FORMAT|max_version"):
            WritePolicy.from_env(env)
    with pytest.raises(ModelValidationError, match=r"no\.such\.type"):
        WritePolicy(disabled=frozenset({"no.such.type"}))
    with pytest.raises(ModelValidationError, match="format_version"):
        NewEvent("s", "context.compacted", {}, "k", format_version=NEWER)


async def test_a_deployment_pinned_to_format_1_writes_what_format_1_readers_read(tmp_path: Path) -> None:
    from ctxengine.phases import ProtocolController

    pinned = await ce.open_store(
        f"sqlite:///{tmp_path / 'pinned.db'}", write_policy=WritePolicy(max_version=1)
    )
    try:
        ctl = ProtocolController(pinned)
        assert ctl.protocol_version == 1  # new instances follow the deployment's pin
        await ctl.submit("task", "Summarize the report.")
        [event] = await pinned.events.read("task")
        assert event.format_version == 1 and "protocol_version" not in event.payload
        with pytest.raises(FormatDisabled, match=r"phase\.stopped"):
            await ctl.stop("task")  # a format-2 event type: refused, nothing written
        assert len(await pinned.events.read("task")) == 1
    finally:
        await pinned.close()
    unpinned = await ce.open_store(f"sqlite:///{tmp_path / 'pinned.db'}")
    try:
        ctl = ProtocolController(unpinned)
        assert ctl.protocol_version == 2
        await ctl.submit("task-2", "Summarize the report.")
        [event] = await unpinned.events.read("task-2")
        assert event.format_version == 2 and event.payload["protocol_version"] == 2
        await ctl.stop("task")  # the pin lifted: the old instance can stop now
        assert [e.format_version for e in await unpinned.events.read("task")] == [1, 2]
    finally:
        await unpinned.close()
