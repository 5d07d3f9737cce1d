"""``ContextLoop.record_step`` (issue 13): a step's items, its working-state transitions and
the run's checkpoint commit in one transaction, keyed by run, step and position, so a retry
(in this process or after a crash, in another) writes nothing new; a finished run keeps only
its last checkpoint version; the items' token counts are stored with them.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

import ctxengine as ce
from ctxengine.cli.turns import AGENT, MODEL, POLICY_VERSION, PRINCIPAL, TOOLS, ScriptedWorker
from ctxengine.errors import LeaseLost, ModelValidationError
from ctxengine.runtime.loop import StateUpdate
from ctxengine.runtime.seeding import HISTORY
from ctxengine.stores.events import Store
from storekit import StoreCase

SID = "step-session"


async def started(
    store: Store, run_id: str = "run-1"
) -> tuple[ScriptedWorker, ce.RunContext, ce.Lease, ce.Checkpoint]:
    worker = ScriptedWorker(store)
    await worker.planner.plan(SID, AGENT, PRINCIPAL, MODEL, TOOLS, policy_version=POLICY_VERSION)
    seed = await ce.append_item(store, SID, ce.UserMessage("look it up"), principal=PRINCIPAL)
    assert seed.seq is not None
    run = ce.RunContext(run_id, SID, seed.seq, step=0)
    lease = await store.checkpoints.claim(run_id, "w")
    cp = await worker.loop._seed_checkpoint(run, PRINCIPAL, lease=lease)
    return worker, run, lease, cp


def step_items() -> list[ce.ConversationItem]:
    return [ce.ToolCall("c1", "search", {"q": "vendors"}), ce.ToolResult("c1", "three vendors found")]


async def test_a_step_commits_items_transitions_and_checkpoint_together(store: Store) -> None:
    worker, run, lease, cp = await started(store)
    before = len(await store.events.read(SID))
    updated = await worker.loop.record_step(
        run,
        cp,
        step_items(),
        lease=lease,
        trigger="tool_completed",
        state_updates=[StateUpdate({"objective": "compare vendors"})],
        principal=PRINCIPAL,
    )
    events = (await store.events.read(SID))[before:]
    assert [e.type for e in events] == [
        "context.working_state.updated",
        "conversation.item.appended",
        "conversation.item.appended",
    ]
    assert [e.derivation_key for e in events] == [
        "context.working_state:run-1:0:0",
        "conversation.item:run-1:0:0",
        "conversation.item:run-1:0:1",
    ]
    assert events[0].visibility == ce.Visibility.principal("alice")
    assert updated.working_state.objective == "compare vendors"
    assert [i.seq for i in updated.conversation[-2:]] == [e.sequence for e in events[1:]]
    assert updated.version == 2 and await ce.latest_checkpoint(store, run.run_id) == updated
    # The next run reads the items back exactly, with the counts stored beside them.
    counter = worker.estimator.counter_id(MODEL.model_id, HISTORY)
    rows = await store.events.read_items(SID, events[0].sequence, counter=counter)
    assert [r.sequence for r in rows] == [e.sequence for e in events[1:]] and all(r.tokens for r in rows)
    assert await ce.session_history(store, SID, events[-1].sequence + 1) == [
        *await ce.session_history(store, SID, events[1].sequence),
        *updated.conversation[-2:],
    ]


async def test_a_retried_step_writes_nothing_new(store: Store) -> None:
    worker, run, lease, cp = await started(store)
    first = await worker.loop.record_step(run, cp, step_items(), lease=lease, trigger="tool_completed")
    events = await store.events.read(SID)
    again = await worker.loop.record_step(run, cp, step_items(), lease=lease, trigger="tool_completed")
    assert again == first and await store.events.read(SID) == events
    assert [r["version"] for r in await store.checkpoints.latest_raw(run.run_id)][-1] == 2
    # A different step of the same run is new.
    step = ce.RunContext(run.run_id, SID, run.seed_sequence, step=1)
    later = await worker.loop.record_step(step, first, [ce.AssistantMessage("done")], lease=lease)
    assert later.version == 3 and len(await store.events.read(SID)) == len(events) + 1


async def test_a_step_retried_after_a_crash_writes_nothing_new(
    store_case_factory: Callable[[str], StoreCase],
) -> None:
    case = store_case_factory("sqlite")
    store = await case.open()
    worker, run, lease, cp = await started(store)
    first = await worker.loop.record_step(run, cp, step_items(), lease=lease, trigger="tool_completed")
    events = await store.events.read(SID)
    await case.close_all()
    # A new worker picks the run up: it claims a new lease and repeats the step it never saw acknowledged.
    store = await case.open()
    try:
        fresh = ScriptedWorker(store)
        await fresh.planner.current(SID)
        lease = await store.checkpoints.claim(run.run_id, "w2")
        again = await fresh.loop.record_step(run, cp, step_items(), lease=lease, trigger="tool_completed")
        assert again == first and await store.events.read(SID) == events
    finally:
        await case.close_all()


async def test_a_failed_step_leaves_the_store_as_it_was(store: Store) -> None:
    worker, run, lease, cp = await started(store)
    events = await store.events.read(SID)
    await store.checkpoints.claim(run.run_id, "thief")  # fences this worker's lease
    with pytest.raises(LeaseLost):
        await worker.loop.record_step(run, cp, step_items(), lease=lease, trigger="tool_completed")
    with pytest.raises(ModelValidationError, match="items"):
        await worker.loop.record_step(run, cp, [ce.ToolCall("c", "s", {"x": 2.0**53})], lease=lease)
    assert await store.events.read(SID) == events
    assert [r["version"] for r in await store.checkpoints.latest_raw(run.run_id)] == [1]


async def test_a_finished_run_keeps_only_its_last_checkpoint(store: Store) -> None:
    worker, run, lease, cp = await started(store)
    cp = await worker.loop.record_step(run, cp, step_items(), lease=lease, trigger="tool_completed")
    step = ce.RunContext(run.run_id, SID, run.seed_sequence, step=1)
    done = await worker.loop.record_step(
        step, cp, [ce.AssistantMessage("done")], lease=lease, trigger="final_completion"
    )
    rows = await store.checkpoints.latest_raw(run.run_id)
    assert [r["version"] for r in rows] == [3] and rows[0]["kind"] == "full"
    assert await ce.latest_checkpoint(store, run.run_id) == done
    assert await store.checkpoints.prune(run.run_id, 3) == 0  # versions 1 and 2 are gone already
    # Pruning is configurable.
    worker2, run2, lease2, cp2 = await started(store, "run-2")
    worker2.loop.prune_finished = False
    answer = [ce.AssistantMessage("x")]
    await worker2.loop.record_step(run2, cp2, answer, lease=lease2, trigger="final_completion")
    assert await store.checkpoints.prune("run-2", 2) == 1  # version 1 was kept
