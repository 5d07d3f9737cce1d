"""Checkpoints as references into the log (issue 13, format 3, ADR 0011; issue 36).

A run's checkpoints hold the items the log already has as spans over the events between
items (one per run of items) and ranges, not a copy of the window; every version
materializes to exactly the checkpoint that was written (logged items, inline ones,
summaries, states); a reference or span the log does not answer fails closed naming the
run and version; a deployment pinned below format 3 writes the first formats; the rows are
stamped with the format version they need, and a reader that knows only version 2 refuses
a span row. The reference formats without spans (``checkpoint.ref/1``,
``checkpoint.refdelta/1``), which only development builds before 0.2.0 wrote, are refused
naming the format.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace

import pytest

import ctxengine as ce
from ctxengine.errors import CheckpointCorruption
from ctxengine.runtime.checkpoints import write_checkpoint
from ctxengine.stores import formats
from ctxengine.stores.events import Store
from ctxengine.stores.formats import WritePolicy
from storekit import StoreCase

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


async def _open(store_case: StoreCase, policy: WritePolicy) -> Store:
    if store_case.kind == "memory":
        return ce.MemoryStore(write_policy=policy)
    return await ce.open_store(store_case.url, write_policy=policy)


async def test_every_version_materializes_exactly_and_copies_no_logged_item(store_case: StoreCase) -> None:
    store = await _open(store_case, WritePolicy())
    try:
        items = await logged(store, 30)
        # The log's item sequences, as a worker's history window knows them (spans need them).
        seqs = [item.seq for item in items if item.seq is not None]
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
            written = await write_checkpoint(
                store, RUN, cp, trigger=trigger, lease=lease, session_id=SID, items=seqs
            )
            assert written == version
            assert await ce.latest_checkpoint(store, RUN) == replace(cp, version=version)
            rows = await store.checkpoints.latest_raw(RUN)
            assert rows[0]["payload"]["format"] == "checkpoint.ref/2"
            assert {r["payload"]["format"] for r in rows[1:]} <= {"checkpoint.refdelta/2"}
            text = json.dumps([r["payload"] for r in rows])
            assert "message 1" not in text and "x" * 50 not in text  # references, not copies
            assert "not in the log" in text  # what the log does not hold is copied
            segments = rows[0]["payload"]["checkpoint"]["conversation"]
            # The items between the log's other events: one span.
            assert [len(s) for s in segments if isinstance(s, list)] == [3]
    finally:
        await store.close()


async def test_a_reference_the_log_does_not_answer_fails_closed(store: Store) -> None:
    items = await logged(store, 3)
    cases = (
        ([[999, 1000]], "holds no conversation item"),
        ([[items[0].seq, items[0].seq + 2]], "holds no conversation item"),  # type: ignore[operator]
        ([[0, 1]], "bad segment"),
        (["x"], "bad segment"),
    )
    for i, (bad, why) in enumerate(cases):
        run = f"{RUN}-{i}"
        lease = await store.checkpoints.claim(run, "w")
        shell = ce.Checkpoint(run).to_dict()  # version 1, as the row
        version = await store.checkpoints.write(
            run,
            {"format": "checkpoint.ref/2", "session_id": SID, "checkpoint": {**shell, "conversation": bad}},
            trigger="compaction",
            lease=lease,
        )
        with pytest.raises(CheckpointCorruption, match=why) as err:
            await ce.latest_checkpoint(store, run)
        assert (err.value.session_id, err.value.sequence) == (run, version)


@pytest.mark.parametrize("max_version", [1, 2])
async def test_a_deployment_pinned_below_format_3_writes_the_first_formats(
    store_case: StoreCase, max_version: int
) -> None:
    pinned = WritePolicy(max_version=max_version)
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
                RUN, {"format": "checkpoint.ref/2"}, trigger="compaction", lease=lease
            )
    finally:
        await store.close()


@pytest.mark.parametrize(("max_version", "stamp"), [(3, 3), (2, 1)])
async def test_reference_rows_are_stamped_with_the_format_version_they_need(
    store_case_factory,  # type: ignore[no-untyped-def]
    max_version: int,
    stamp: int,
) -> None:
    case: StoreCase = store_case_factory("sqlite")
    store = await ce.open_store(case.url, write_policy=WritePolicy(max_version=max_version))
    try:
        items = await logged(store, 2)
        lease = await store.checkpoints.claim(RUN, "w")
        for session in (SID, None):
            cp = ce.Checkpoint(RUN, conversation=tuple(items))
            await write_checkpoint(store, RUN, cp, trigger="compaction", lease=lease, session_id=session)
    finally:
        await store.close()
        await case.close_all()
    assert case.sqlite_path is not None
    conn = sqlite3.connect(case.sqlite_path)
    try:
        stamped = conn.execute("SELECT version, schema_version FROM ctxengine_checkpoints ORDER BY version")
        assert stamped.fetchall() == [(1, stamp), (2, 1)]
    finally:
        conn.close()


async def test_a_span_the_log_does_not_answer_fails_closed(store: Store) -> None:
    items = await logged(store, 6)
    seqs = [item.seq for item in items if item.seq is not None]
    assert seqs[1] - seqs[0] == 2  # a non-item event between the first two items
    first, last = seqs[0], seqs[-1]

    async def write(fmt: str, conversation: list[object], run: str) -> None:
        lease = await store.checkpoints.claim(run, "w")
        shell = ce.Checkpoint(run).to_dict()  # version 1, as the row
        payload = {"format": fmt, "session_id": SID, "checkpoint": {**shell, "conversation": conversation}}
        assert await store.checkpoints.write(run, payload, trigger="compaction", lease=lease) == 1

    bad_spans = (
        ([[first, last, len(seqs) - 1]], "holds 6 items there"),  # another count of items
        ([[first + 1, last, len(seqs) - 1]], "holds 5 items there"),  # starts at a non-item event
        ([[first, last, last - first + 1]], "bad segment"),  # as many items as events: a range
        ([[last, first, 2]], "bad segment"),
        ([[first, last, 1]], "bad segment"),
        ([[first, last, True]], "bad segment"),
        ([[first, last, len(seqs), 0]], "bad segment"),
    )
    for i, (bad, why) in enumerate(bad_spans):
        await write("checkpoint.ref/2", bad, f"{RUN}-{i}")
        with pytest.raises(CheckpointCorruption, match=why) as err:
            await ce.latest_checkpoint(store, f"{RUN}-{i}")
        assert (err.value.session_id, err.value.sequence) == (f"{RUN}-{i}", 1)
    # The span itself reads back.
    await write("checkpoint.ref/2", [[first, last, len(seqs)]], f"{RUN}-good")
    assert (await ce.latest_checkpoint(store, f"{RUN}-good")).conversation == tuple(items)  # type: ignore[union-attr]


async def test_a_reader_of_format_2_refuses_a_span_chain(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = await logged(store, 4)
    lease = await store.checkpoints.claim(RUN, "w")
    seqs = [item.seq for item in items if item.seq is not None]
    cp = ce.Checkpoint(RUN, conversation=tuple(items))
    await write_checkpoint(store, RUN, cp, trigger="compaction", lease=lease, session_id=SID, items=seqs)
    monkeypatch.setattr(formats, "FORMAT_VERSION", 2)  # what a worker from before format 3 knows
    with pytest.raises(ce.UnsupportedFormat):
        await ce.latest_checkpoint(store, RUN)


async def test_a_seeded_summary_is_stored_as_its_carrys_sequence(store: Store) -> None:
    from ctxengine.cli.turns import PRINCIPAL
    from ctxengine.runtime.carry import CARRY_RECORDED, stored_carry
    from sessionkit import session_with_carries

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
    await worker.loop.writes.write(run, changed, "tool_completed", lease)
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
            {"format": "checkpoint.ref/2", "session_id": SID, "checkpoint": {**shell, "summary_carry": bad}},
            trigger="compaction",
            lease=lease,
        )
        with pytest.raises(CheckpointCorruption) as err:
            await ce.latest_checkpoint(store, RUN)
        assert (err.value.session_id, err.value.sequence) == (RUN, version)


async def test_a_runs_version_1_is_one_span_however_long_the_session(store: Store) -> None:
    """Each turn logs a ``checkpoint.seeded`` event between its items; a worker's runs still
    write their window as one span, the step's own items included (they are known before
    they are committed), and another worker reads every version back exactly."""
    from ctxengine.cli.turns import ScriptedWorker

    worker = ScriptedWorker(store, owner="w", tool_every=2)
    worker.loop.prune_finished = False
    for turn in range(1, 13):
        await worker.turn(SID, turn)
    for turn in (3, 12):
        rows = await store.checkpoints.latest_raw(f"{SID}-run-{turn}")
        assert [r["payload"]["format"] for r in rows] == ["checkpoint.ref/2"]  # the final, full
        segments = rows[0]["payload"]["checkpoint"]["conversation"]
        assert len(segments) == 1 and len(segments[0]) == 3
    other = ScriptedWorker(store, owner="x")
    reads = []
    real = store.events.read_items

    async def counted(*args: object, **kwargs: object) -> object:
        reads.append(args)
        return await real(*args, **kwargs)  # type: ignore[arg-type]

    for turn in (3, 12):
        run = f"{SID}-run-{turn}"
        reads.clear()
        store.events.read_items = counted  # type: ignore[method-assign]
        try:
            read = await ce.latest_checkpoint(store, run)
        finally:
            del store.events.read_items
        assert len(reads) == 1  # the span's items once: expanding it and resolving it
        assert read is not None
        seqs = [item.seq for item in read.conversation]
        span = await other.loop.windows.span(SID, 0, max(s for s in seqs if s is not None), None)
        assert [item.seq for item in span.items[: span.end]] == seqs  # every item up to the run's last


async def test_a_chain_in_a_retired_reference_format_is_refused_naming_it(store: Store) -> None:
    """``checkpoint.ref/1`` and ``checkpoint.refdelta/1`` (format version 2) were written only by
    development builds before 0.2.0: reading such a chain fails closed naming the format and
    what to do, and so does a delta written on it; a full snapshot starts the chain over."""
    items = await logged(store, 4)
    seqs = [item.seq for item in items if item.seq is not None]
    lease = await store.checkpoints.claim(RUN, "w")
    shell = ce.Checkpoint(RUN).to_dict()
    await store.checkpoints.write(
        RUN,
        {
            "format": "checkpoint.ref/1",
            "session_id": SID,
            "checkpoint": {**shell, "conversation": [[seqs[0], seqs[0]]]},
        },
        trigger="compaction",
        lease=lease,
    )
    delta = {
        "format": "checkpoint.refdelta/1",
        "base_version": 1,
        "set": {"version": 2},
        "conversation": {"keep": 1, "append": []},
    }
    await store.checkpoints.write(RUN, delta, trigger="tool_completed", lease=lease, kind="delta")
    retired = r"'checkpoint\.ref/1' was written only by development builds before ctxengine 0\.2\.0"
    with pytest.raises(CheckpointCorruption, match=retired) as err:
        await ce.latest_checkpoint(store, RUN)
    assert (err.value.session_id, err.value.sequence) == (RUN, 1)
    assert "start the run again" in str(err.value)
    cp = ce.Checkpoint(RUN, conversation=tuple(items))
    # A delta in the first formats needs the retired base: refused, nothing written.
    with pytest.raises(CheckpointCorruption, match=retired):
        await write_checkpoint(store, RUN, cp, trigger="tool_completed", lease=lease)
    # A reference chain changes format only at a full snapshot, which needs no base.
    await write_checkpoint(store, RUN, cp, trigger="tool_completed", lease=lease, session_id=SID, items=seqs)
    assert await ce.latest_checkpoint(store, RUN) == replace(cp, version=3)
