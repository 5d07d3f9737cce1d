"""Issue 39, acceptance 2 (ADR 0019): ``record_step`` and ``start_run`` refuse a tool result
without its call, a second result for one call and a call id reused while its earlier call
is open, with a typed error naming the call id and nothing written (on every store); a call
id reused after its pair completed records, builds and renders valid payloads; a seed
keeps such pairs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

import ctxengine as ce
from ctxengine.cli.turns import AGENT, MODEL, POLICY_VERSION, PRINCIPAL, TOOLS, ScriptedWorker
from ctxengine.errors import OrphanedToolPair
from ctxengine.providers import check_wire_pairs, to_anthropic_messages, to_openai_chat, to_openai_responses
from ctxengine.runtime.checkpoints import latest_checkpoint
from ctxengine.runtime.seeding import whole_pairs
from ctxengine.stores.events import Store

SID = "door-session"


def call(call_id: str, n: int = 0) -> ce.ToolCall:
    return ce.ToolCall(call_id, "search", {"q": f"query {n}"})


def result(call_id: str, n: int = 0) -> ce.ToolResult:
    return ce.ToolResult(call_id, f"found {n}")


async def started(store: Store) -> tuple[ScriptedWorker, Any]:
    worker = ScriptedWorker(store)
    await worker.planner.plan(SID, AGENT, PRINCIPAL, MODEL, TOOLS, policy_version=POLICY_VERSION)
    return worker, await worker.loop.start_run(
        SID, "run-1", ce.UserMessage("look it up"), PRINCIPAL, owner="w"
    )


async def refused(
    store: Store, worker: ScriptedWorker, run: Any, cp: Any, lease: Any, items: list[Any]
) -> OrphanedToolPair:
    """Record ``items`` as the next step: refused, and nothing written."""
    before = await store.events.read(SID)
    with pytest.raises(OrphanedToolPair) as caught:
        await worker.loop.record_step(replace(run, step=run.step + 1), cp, items, lease=lease)
    assert await store.events.read(SID) == before
    latest = await latest_checkpoint(store, run.run_id)
    assert latest is not None and latest.version == cp.version
    return caught.value


async def test_a_result_without_its_call_is_refused(store: Store) -> None:
    worker, (run, lease, cp) = await started(store)
    err = await refused(store, worker, run, cp, lease, [ce.AssistantMessage("calling"), result("ghost")])
    assert (err.call_id, err.index) == ("ghost", 1)
    assert str(err).startswith(
        "tool pair 'ghost' at item 1: record_step: items[1]: a tool result without its call"
    )
    # The run is not poisoned: its next step records and builds.
    cp = await worker.loop.record_step(run, cp, [call("c1"), result("c1")], lease=lease)
    await worker.loop.build_with_pressure(run, cp, AGENT, PRINCIPAL, lease=lease)


async def test_a_second_result_for_one_call_is_refused(store: Store) -> None:
    worker, (run, lease, cp) = await started(store)
    err = await refused(store, worker, run, cp, lease, [call("c1"), result("c1"), result("c1", 2)])
    assert (err.call_id, err.index) == ("c1", 2)
    assert "a second result for call 'c1'" in str(err)
    # ... and across steps: the first result in an earlier step of the run.
    cp = await worker.loop.record_step(run, cp, [call("c1"), result("c1")], lease=lease)
    err = await refused(store, worker, run, cp, lease, [result("c1", 2)])
    assert (err.call_id, err.index) == ("c1", 0)
    assert "a second result for call 'c1'" in str(err)


async def test_a_call_id_reused_while_its_call_is_open_is_refused(store: Store) -> None:
    worker, (run, lease, cp) = await started(store)
    err = await refused(store, worker, run, cp, lease, [call("c1"), call("c1", 2)])
    assert (err.call_id, err.index) == ("c1", 1)
    assert "reused while its earlier call is still open" in str(err)
    # The call open from an earlier step counts too; its result in a later step is accepted.
    cp = await worker.loop.record_step(run, cp, [call("c1")], lease=lease)
    err = await refused(store, worker, run, cp, lease, [call("c1", 2), result("c1", 2)])
    assert (err.call_id, err.index) == ("c1", 0)
    cp = await worker.loop.record_step(replace(run, step=1), cp, [result("c1")], lease=lease)
    assert [type(i).__name__ for i in cp.conversation[-2:]] == ["ToolCall", "ToolResult"]


async def test_a_run_cannot_start_on_a_tool_result(store: Store) -> None:
    worker = ScriptedWorker(store)
    await worker.planner.plan(SID, AGENT, PRINCIPAL, MODEL, TOOLS, policy_version=POLICY_VERSION)
    with pytest.raises(OrphanedToolPair) as caught:
        await worker.loop.start_run(SID, "run-1", result("ghost"), PRINCIPAL, owner="w")  # type: ignore[arg-type]
    assert (caught.value.call_id, caught.value.index) == ("ghost", 0)
    assert "start_run: message" in str(caught.value)
    assert await store.events.read(SID, types=[ce.runtime.session.ITEM_APPENDED]) == []
    assert await store.checkpoints.latest_raw("run-1") == []


async def test_a_call_id_reused_after_completion_records_and_renders(store: Store, backend: str) -> None:
    """The SWE-agent shape: one id four times, each pair complete before the next; then a
    second run over that history. Every request is valid on the three wires, with ids unique
    within each request."""
    worker, (run, lease, cp) = await started(store)
    for k in range(4):
        run = replace(run, step=k)
        cp = await worker.loop.record_step(run, cp, [call("call_0", k), result("call_0", k)], lease=lease)
        request, cp = await worker.loop.build_with_pressure(run, cp, AGENT, PRINCIPAL, lease=lease)
        bodies = {
            "openai_chat": to_openai_chat(request, model="m"),
            "openai_responses": to_openai_responses(request, model="m"),
            "anthropic_messages": to_anthropic_messages(request, model="m"),
        }
        for wire, body in bodies.items():
            check_wire_pairs(body, wire)
        ids = [
            b["id"]
            for m in bodies["anthropic_messages"]["messages"]
            for b in m["content"]
            if b["type"] == "tool_use"
        ]
        assert ids == ["call_0"] + [f"call_0~{n}" for n in range(2, k + 2)]
    cp = await worker.loop.record_step(
        replace(run, step=9), cp, [ce.AssistantMessage("done")], lease=lease, trigger="final_completion"
    )
    # A later run seeds the history with every pair kept.
    second = await worker.loop.start_run(SID, "run-2", ce.UserMessage("again"), PRINCIPAL, owner="w")
    calls = [i for i in second.checkpoint.conversation if isinstance(i, ce.ToolCall)]
    assert [c.call_id for c in calls] == ["call_0"] * 4
    request, _ = await worker.loop.build_with_pressure(
        second.run, second.checkpoint, AGENT, PRINCIPAL, lease=second.lease
    )
    check_wire_pairs(to_anthropic_messages(request, model="m"), "anthropic_messages")


def test_a_seed_keeps_pairs_whose_id_recurs(backend: str) -> None:
    items = [
        ce.UserMessage("q"),
        call("a"),
        result("a"),
        ce.AssistantMessage("x"),
        call("a", 1),
        result("a", 1),
    ]
    assert whole_pairs(items) == tuple(items)
    # A call whose id is open is superseded by the later one: a result answers the nearest.
    items = [ce.UserMessage("q"), call("a"), ce.AssistantMessage("x"), call("a", 1), result("a", 1)]
    assert whole_pairs(items) == (items[0], items[2], items[3], items[4])
