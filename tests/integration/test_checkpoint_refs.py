"""Checkpoints as references into the log (issue 13, format 2, ADR 0011).

A run's checkpoints hold the items the log already has as sequence ranges, not a copy
of the window; every version materializes to exactly the checkpoint that was written
(logged items, inline ones, summaries, states); a reference the log does not answer
fails closed naming the run and version; a deployment pinned to format 1 writes the
old formats; and the rows are stamped with format version 2.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace

import pytest
from storekit import StoreCase

import ctxengine as ce
from ctxengine.errors import CheckpointCorruption
from ctxengine.runtime.checkpoints import write_checkpoint
from ctxengine.stores.events import Store
from ctxengine.stores.formats import WritePolicy

SID = "ref-session"
RUN = "ref-run"


async def logged(store: Store, n: int) -> list[ce.ConversationItem]:
    items: list[ce.ConversationItem] = []
    for i in range(n):
        if i % 3 == 1:
            await store.events.append(
                ce.NewEvent(SID, "context.compacted", {"between": i}, f"gap:{i}")
            )  # a non-item event: the ranges break around it
        items.append(await ce.append_item(store, SID, ce.UserMessage(f"message {i} " + "x" * 50)))
    return items


async def test_every_version_materializes_exactly_and_copies_no_logged_item(store: Store) -> None:
    items = await logged(store, 30)
    lease = await store.checkpoints.claim(RUN, "w")
    inline = ce.AssistantMessage("not in the log")  # seq None: stored inline
    for version in range(1, 20):
        if version % 4:
            conversation: tuple[ce.ConversationItem, ...] = (*items[: 10 + version], inline)
        else:
            conversation = tuple(items[version : 10 + version])
        cp = ce.Checkpoint(
            RUN,
            conversation=conversation,
            working_state=ce.WorkingState(next_action=f"step {version}"),
            compacted_summary="summary" if version > 5 else None,
            # Notes come and go: a reference delta clears a field left out when empty.
            notes=(f"note {version}",) if version % 3 == 0 else (),
        )
        trigger = "compaction" if version == 9 else "tool_completed"
        written = await write_checkpoint(store, RUN, cp, trigger=trigger, lease=lease, session_id=SID)
        assert written == version
        assert await ce.latest_checkpoint(store, RUN) == replace(cp, version=version)
        rows = await store.checkpoints.latest_raw(RUN)
        formats = [r["payload"]["format"] for r in rows]
        assert formats[0] == "checkpoint.ref/1" and set(formats[1:]) <= {"checkpoint.refdelta/1"}
        text = json.dumps([r["payload"] for r in rows])
        assert "message 1" not in text and "x" * 50 not in text  # references, not copies
        assert "not in the log" in text  # what the log does not hold is copied


async def test_a_reference_the_log_does_not_answer_fails_closed(store: Store) -> None:
    items = await logged(store, 3)
    lease = await store.checkpoints.claim(RUN, "w")
    shell = ce.Checkpoint(RUN).to_dict()
    for bad in ([[999, 1000]], [[items[0].seq, items[0].seq + 2]], [[0, 1]], ["x"]):
        version = await store.checkpoints.write(
            RUN,
            {"format": "checkpoint.ref/1", "session_id": SID, "checkpoint": {**shell, "conversation": bad}},
            trigger="compaction",
            lease=lease,
        )
        with pytest.raises(CheckpointCorruption) as err:
            await ce.latest_checkpoint(store, RUN)
        assert (err.value.session_id, err.value.sequence) == (RUN, version)


async def test_a_deployment_pinned_to_format_1_writes_the_old_formats(store_case: StoreCase) -> None:
    pinned = WritePolicy(max_version=1)
    store: Store = (
        ce.MemoryStore(write_policy=pinned)
        if store_case.kind == "memory"
        else await ce.open_store(store_case.url, write_policy=pinned)
    )
    try:
        items = await logged(store, 4)
        lease = await store.checkpoints.claim(RUN, "w")
        for version in (1, 2):
            cp = ce.Checkpoint(RUN, conversation=tuple(items[: version + 1]))
            await write_checkpoint(store, RUN, cp, trigger="tool_completed", lease=lease, session_id=SID)
        rows = await store.checkpoints.latest_raw(RUN)
        assert [r["payload"]["format"] for r in rows] == ["checkpoint.full/1", "checkpoint.delta/1"]
        with pytest.raises(ce.FormatDisabled):
            await store.checkpoints.write(
                RUN, {"format": "checkpoint.ref/1"}, trigger="compaction", lease=lease
            )
    finally:
        await store.close()


async def test_reference_rows_are_stamped_with_format_version_2(
    store_case_factory,  # type: ignore[no-untyped-def]
) -> None:
    case: StoreCase = store_case_factory("sqlite")
    store = await case.open()
    try:
        items = await logged(store, 2)
        lease = await store.checkpoints.claim(RUN, "w")
        for session in (SID, None):
            cp = ce.Checkpoint(RUN, conversation=tuple(items))
            await write_checkpoint(store, RUN, cp, trigger="compaction", lease=lease, session_id=session)
    finally:
        await case.close_all()
    assert case.sqlite_path is not None
    conn = sqlite3.connect(case.sqlite_path)
    try:
        stamped = conn.execute("SELECT version, schema_version FROM ctxengine_checkpoints ORDER BY version")
        assert stamped.fetchall() == [(1, 2), (2, 1)]
    finally:
        conn.close()


async def test_a_seeded_summary_is_stored_as_its_carrys_sequence(store: Store) -> None:
    from sessionkit import session_with_carries

    from ctxengine.cli.turns import PRINCIPAL
    from ctxengine.runtime.carry import CARRY_RECORDED, stored_carry

    worker = await session_with_carries(store, SID)
    carry = stored_carry((await store.events.read(SID, types=[CARRY_RECORDED]))[-1])
    run, lease, seeded = await worker.loop.start_run(SID, RUN, ce.UserMessage("next"), PRINCIPAL, owner="w")
    assert seeded.compacted_summary == carry.summary and seeded.summary_elided == carry.elided
    rows = await store.checkpoints.latest_raw(RUN)
    shell = rows[0]["payload"]["checkpoint"]
    assert (shell["summary_carry"], shell["compacted_summary"], shell["summary_elided"]) == (
        carry.sequence,
        None,
        [],
    )
    assert carry.summary not in json.dumps(rows[0]["payload"])  # the carry's text is not copied
    assert await ce.latest_checkpoint(store, RUN) == seeded
    # A summary that is no longer the carry's (a compaction in the run) is stored as itself.
    changed = replace(seeded, compacted_summary="a newer summary", summary_source_event_ids=(1, 2))
    await worker.loop._write(run, changed, "tool_completed", lease)
    assert await ce.latest_checkpoint(store, RUN) == replace(changed, version=2)
    delta = (await store.checkpoints.latest_raw(RUN))[-1]["payload"]
    assert delta["set"]["summary_carry"] is None and delta["set"]["compacted_summary"] == "a newer summary"


async def test_a_summary_reference_the_log_does_not_answer_fails_closed(store: Store) -> None:
    items = await logged(store, 3)
    lease = await store.checkpoints.claim(RUN, "w")
    shell = {**ce.Checkpoint(RUN).to_dict(), "conversation": []}
    for bad in (items[1].seq, 10_000, "7", 0):
        version = await store.checkpoints.write(
            RUN,
            {"format": "checkpoint.ref/1", "session_id": SID, "checkpoint": {**shell, "summary_carry": bad}},
            trigger="compaction",
            lease=lease,
        )
        with pytest.raises(CheckpointCorruption) as err:
            await ce.latest_checkpoint(store, RUN)
        assert (err.value.session_id, err.value.sequence) == (RUN, version)
