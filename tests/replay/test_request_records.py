"""Request records (issue 42, ADR 0024): one ``context.request.recorded`` event per model
request, written with the step that records its response, and ``verify_session``
rebuilding each from the log (memory store, both backends; the SQL stores in
``tests/integration/test_replay_verify.py``)."""

from __future__ import annotations

from typing import Any

import pytest

import ctxengine as ce
from ctxengine.core.budget import BudgetPolicy
from ctxengine.errors import UnsupportedFormat
from ctxengine.replay.verify import NO_RECORD, first_difference, verify_session
from ctxengine.runtime.request_records import REQUEST_FORMAT, REQUEST_RECORDED
from ctxengine.stores.events import EVENT_FORMATS, FORMAT_VERSION, NewEvent
from ctxengine.stores.formats import WritePolicy
from enginekit import SMALL, Driver, engine
from storekit import older_reader

SESSION = "s"


async def drive(store: Any, turns: int = 4, output_bytes: int = 0, model: Any = SMALL) -> Driver:
    """``turns`` turns of the scripted model through the session API (tool calls included)."""
    driver = Driver("openai_chat", output_bytes=output_bytes)
    async with engine(store, model=model) as agent:
        await driver.turns(agent.session(SESSION), 1, turns)
    return driver


async def records(store: Any) -> list[ce.Event]:
    return [e for e in await store.events.read(SESSION) if e.type == REQUEST_RECORDED]


def test_the_record_is_format_6() -> None:
    assert FORMAT_VERSION >= REQUEST_FORMAT == EVENT_FORMATS[REQUEST_RECORDED] == 6


async def test_every_request_is_recorded_with_its_hashes(backend: str) -> None:
    store = await ce.open_store("memory://")
    driver = Driver("openai_chat")
    sent = []
    async with engine(store, model=SMALL) as agent:
        for n in (1, 2, 3):
            turn = await agent.session(SESSION).turn(driver.message(n), run_id=f"run-{n}")
            while not turn.done:
                calls = await driver.ask(turn)
                assert turn.last_request is not None
                sent.append((turn.run_id, turn.last_request))
                await driver.answer(turn, calls)
    found = await records(store)
    assert len(found) == len(sent) > 3
    for event, (run_id, request) in zip(found, sent, strict=True):
        payload = event.payload
        assert event.format_version == 6 and event.run_id == run_id
        assert payload["hashes"]["prefix"] == request.metadata["prefix_sha256"]
        assert payload["hashes"]["body"] == request.metadata["body_sha256"]
        assert payload["principal"] == ce.Principal("user", "default").to_dict()
        assert payload["clock"] == "2026-12-04T09:00:00+00:00"
        assert payload["checkpoint"]["format"] == "checkpoint.ref/2"
        regions = [r[0] for r in payload["hashes"]["regions"]]
        assert regions[0] == "prefix" and "current_user" in regions
        assert sum(r[1] for r in payload["hashes"]["regions"][1:]) == len(request.body)
    # The record follows its response's items, in the same commit as the step.
    events = await store.events.read(SESSION)
    at = {e.sequence: e for e in events}
    for event in found:
        before = at[event.sequence - 1]
        assert before.type == "conversation.item.appended" and before.run_id == event.run_id


async def test_a_session_recorded_here_verifies(backend: str) -> None:
    store = await ce.open_store("memory://")
    await drive(store, turns=12, output_bytes=8000)
    events = await store.events.read(SESSION)
    assert any(e.type == "context.compacted" for e in events)  # the records span compactions
    check = await verify_session(store, SESSION)
    assert check.ok and check.reproduced == len(check.requests) == len(await records(store)) > 12
    assert [r.index for r in check.requests] == list(range(len(check.requests)))
    assert all(r.first_differing_region is None and r.reason is None for r in check.requests)


async def test_a_policy_change_names_the_first_differing_region(backend: str) -> None:
    store = await ce.open_store("memory://")
    await drive(store, turns=4, output_bytes=8000)
    # Every current-turn item clipped to the cap's floor: the first request with a tool result
    # in its turn differs there first.
    check = await verify_session(store, SESSION, policy=BudgetPolicy(item_max_ratio=0.001))
    assert not check.ok
    first = next(r for r in check.requests if not r.ok)
    assert first.first_differing_region == "current_turn"
    assert first.reason is not None and "differ" in first.reason
    assert check.unreproducible == ()  # each was rebuilt; it just differs
    # The recorded policy reproduces them all again.
    assert (await verify_session(store, SESSION)).ok


def test_first_difference_names_the_region() -> None:
    rec = [["prefix", 3, "a"], ["history", 4, "b"], ["working_state", 1, "c"]]
    assert first_difference(rec, [list(r) for r in rec]) is None
    assert first_difference(rec, [["prefix", 3, "a"], ["history", 4, "b"], ["working_state", 1, "x"]]) == (
        "working_state"
    )
    assert first_difference(rec, [["prefix", 3, "a"], ["history", 3, "b"]]) == "history"
    assert first_difference(rec, rec[:2]) == "working_state"  # a region the rebuild lacks
    assert first_difference(rec[:2], rec) == "working_state"  # one it adds


async def test_a_deployment_below_format_6_records_nothing_and_runs(backend: str) -> None:
    store = await ce.open_store("memory://", write_policy=WritePolicy(max_version=5))
    driver = await drive(store, turns=3)
    assert driver.bodies and await records(store) == []
    check = await verify_session(store, SESSION)
    # The requests are found from the responses the log holds, and said not reproducible.
    assert len(check.requests) == len(driver.bodies)
    assert not check.ok and check.reproduced == 0
    assert all(r.reason == NO_RECORD and r.first_differing_region is None for r in check.requests)
    assert check.unreproducible == check.requests


async def test_the_write_switch_from_the_environment(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXENGINE_WRITE_FORMAT", "5")
    store = await ce.open_store("memory://")
    await drive(store, turns=2)
    assert await records(store) == []
    monkeypatch.setenv("CTXENGINE_DISABLED_EVENTS", REQUEST_RECORDED)
    monkeypatch.delenv("CTXENGINE_WRITE_FORMAT")
    store = await ce.open_store("memory://")
    await drive(store, turns=2)
    assert await records(store) == []


async def test_records_are_idempotent_on_their_key(backend: str) -> None:
    store = await ce.open_store("memory://")
    await drive(store, turns=2)
    first = (await records(store))[0]
    again = NewEvent(
        first.session_id,
        first.type,
        first.payload,
        first.derivation_key,
        run_id=first.run_id,
        visibility=first.visibility,
        format_version=first.format_version,
    )
    stored, written = await store.events.append_all([again])
    assert written == 0 and stored[0].sequence == first.sequence
    with pytest.raises(ce.IdempotencyConflict):
        await store.events.append(
            NewEvent(first.session_id, first.type, {**first.payload, "surface": "x"}, first.derivation_key)
        )


async def test_a_retried_step_writes_no_second_record(backend: str) -> None:
    from ctxengine.cli.turns import AGENT, PRINCIPAL, ScriptedWorker

    store = await ce.open_store("memory://")
    worker = ScriptedWorker(store, tool_every=0)
    await worker.turn("w", 1)
    loop = worker.loop
    run, lease, checkpoint = await loop.start_run(
        "w", "w-run-2", ce.UserMessage("again"), PRINCIPAL, owner="worker"
    )
    _, checkpoint = await loop.build_with_pressure(run, checkpoint, AGENT, PRINCIPAL, lease=lease)
    reply = [ce.AssistantMessage("done")]
    await loop.record_step(run, checkpoint, reply, lease=lease, trigger="final_completion")
    count = len(await store.events.read("w"))
    # The same step again (a lost acknowledgement), after building its request again.
    _, checkpoint = await loop.build_with_pressure(run, checkpoint, AGENT, PRINCIPAL, lease=lease)
    await loop.record_step(run, checkpoint, reply, lease=lease, trigger="final_completion")
    assert len(await store.events.read("w")) == count
    assert len([e for e in await store.events.read("w") if e.type == REQUEST_RECORDED]) == 2
    assert (await verify_session(store, "w")).ok


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_reader_of_format_5_refuses_a_request_record(
    kind: str, store_case_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = store_case_factory(kind)
    store = await case.open()
    try:
        await drive(store, turns=1)
        events = await store.events.read(SESSION)
        first = next(e.sequence for e in events if e.type == REQUEST_RECORDED)
        older_reader(monkeypatch, 5)
        for read in (
            lambda: store.events.read(SESSION),
            lambda: store.events.read(SESSION, types={REQUEST_RECORDED}),
            lambda: store.events.read(SESSION, types={"conversation.item.appended"}),
            lambda: store.events.read_items(SESSION),
            lambda: ce.session_history(store, SESSION, 10**6),
        ):
            with pytest.raises(UnsupportedFormat) as err:
                await read()
            assert err.value.needed_version == 6 and err.value.sequence == first
        # Below the newer row the session reads as before.
        assert [e.sequence for e in await store.events.read(SESSION, before=first)] == [
            e.sequence for e in events if e.sequence < first
        ]
    finally:
        await case.close_all()
        await store.close()


async def test_region_digests_continued_from_the_window_equal_fresh_ones(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxengine.runtime import request_records

    fresh = request_records.region_digests
    continued = []

    def both(request: Any, memo: Any = None) -> Any:
        out = fresh(request, memo)
        assert out == fresh(request)
        continued.append(memo is not None and memo.region is not None)
        return out

    monkeypatch.setattr(request_records, "region_digests", both)
    store = await ce.open_store("memory://")
    await drive(store, turns=12, output_bytes=8000)  # compactions: the history starts over
    assert any(e.type == "context.compacted" for e in await store.events.read(SESSION))
    assert len(continued) > 12 and all(continued[1:])  # the window's from the second on


async def test_a_record_the_log_does_not_answer_is_reported_not_raised(backend: str) -> None:
    store = await ce.open_store("memory://")
    await drive(store, turns=1)
    first = (await records(store))[0]
    payload = dict(first.payload)
    snapshot = dict(payload["checkpoint"])
    snapshot["checkpoint"] = {**snapshot["checkpoint"], "conversation": [[9_000, 9_001]]}
    payload["checkpoint"] = snapshot
    payload["run"] = {**payload["run"], "step": 99}
    await store.events.append(
        NewEvent(SESSION, REQUEST_RECORDED, payload, "bad-record", run_id=first.run_id, format_version=6)
    )
    del payload["clock"]
    payload["checkpoint"] = first.payload["checkpoint"]
    payload["run"] = {**payload["run"], "step": 100}
    await store.events.append(
        NewEvent(SESSION, REQUEST_RECORDED, payload, "no-clock", run_id=first.run_id, format_version=6)
    )
    check = await verify_session(store, SESSION)
    bad, lacking = check.requests[-2:]
    assert (bad.step, bad.ok, bad.first_differing_region) == (99, False, None)
    assert bad.reason is not None and "CheckpointCorruption" in bad.reason and "9000" in bad.reason
    assert (lacking.step, lacking.ok) == (100, False) and lacking.reason is not None
    assert "clock" in lacking.reason
    assert check.unreproducible == (bad, lacking)
    assert all(r.ok for r in check.requests[:-2])
