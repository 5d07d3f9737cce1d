"""The session API end to end (issue 41): turns with tool calls through ``Engine``, on memory,
SQLite and PostgreSQL, against a scripted model answering in each provider's own shape (dicts
and the official SDKs' objects): every request pair-safe and within budget, and what the log
holds afterwards is the conversation, with the provider's usage and cache counts."""

from __future__ import annotations

import asyncio
import json

import pytest

import ctxengine as ce
from ctxengine.engine import WIRES, Engine
from ctxengine.runtime.loop_pressure import CONTEXT_COMPACTED
from ctxengine.runtime.usage import USAGE_REPORTED
from enginekit import CLOCK, SMALL, TOOLS, WIRE_MODELS, Driver, engine, output_of
from storekit import StoreCase

WIRE_NAMES = sorted(WIRES)


@pytest.mark.parametrize("sdk", [False, True], ids=["dicts", "sdk"])
@pytest.mark.parametrize("wire", WIRE_NAMES)
async def test_turns_with_tools_on_every_store(store_case: StoreCase, wire: str, sdk: bool) -> None:
    driver = Driver(wire, sdk=sdk)
    async with engine(store_case.url, model=WIRE_MODELS[wire]) as agent:
        session = agent.session("s1")
        turns = await driver.turns(session, 1, 6)
        history = await ce.session_history(agent.store, "s1", 1 << 62)
        usage = await agent.store.events.read("s1", types=(USAGE_REPORTED,))
    assert all(t.done and t.text and t.text.startswith("Done: ") for t in turns)
    # The model called tools (in parallel too) in some turns and answered straight away in others.
    calls = [i for i in history if isinstance(i, ce.ToolCall)]
    results = {i.call_id for i in history if isinstance(i, ce.ToolResult)}
    assert calls and {c.call_id for c in calls} == results
    assert len(driver.bodies) > len(turns)
    users = [i for i in history if isinstance(i, ce.UserMessage)]
    assert [ce.engine.messages.text_of(u) for u in users] == [driver.message(n) for n in range(1, 7)]
    # One usage event per request, with the provider's cache counts.
    assert len(usage) == len(driver.bodies)
    assert any(e.payload["cached_read"] for e in usage)
    if wire != "openai_chat":  # the reasoning the model returned is in the log, verbatim
        assert any(isinstance(i, ce.ReasoningItem) for i in history)


async def test_steps_number_themselves_and_the_run_is_in_the_log() -> None:
    driver = Driver("openai_chat")
    async with engine("memory://") as agent:
        session = agent.session("s1")
        turn = await session.turn("What is the weather in Paris?", run_id="r1")
        assert (turn.run.step, turn.pending, turn.done, turn.text) == (0, (), False, None)
        calls = await driver.ask(turn)
        assert turn.run.step == 1 and turn.pending == calls and calls
        await driver.answer(turn, calls)
        assert turn.run.step == 1 + len(calls) and turn.pending == ()
        await driver.finish(turn)
        keys = [e.derivation_key for e in await agent.store.events.read("s1") if e.run_id == "r1"]
    steps = sorted({int(k.split(":")[2]) for k in keys if k.startswith("conversation.item:r1:")})
    assert steps == list(range(turn.run.step))


@pytest.mark.parametrize("store_url", ["memory://", "sqlite"])
async def test_a_small_window_compacts_inside_request_and_stays_in_budget(
    store_url: str, backend: str, tmp_path: object
) -> None:
    url = store_url if store_url == "memory://" else f"sqlite:///{tmp_path}/small.db"
    driver = Driver("anthropic_messages", output_bytes=1_500)
    policy = {"history": {"floor_tokens": 2_000}}
    async with engine(url, model=SMALL, policy=policy) as agent:
        await driver.turns(agent.session("s1"), 1, 25)
        compacted = await agent.store.events.read("s1", types=(CONTEXT_COMPACTED,))
    assert compacted  # the driver checked every request against its capacity


async def test_a_new_policy_starts_a_new_plan_epoch() -> None:
    store = ce.MemoryStore(clock=CLOCK)
    driver = Driver("openai_chat")
    async with engine(store) as first:
        await driver.turns(first.session("s1"), 1, 1)
        epoch = (await first.planner.current("s1")).epoch
    async with engine(store, policy={"history": {"floor_tokens": 4_000}}) as second:
        await driver.turns(second.session("s1"), 2, 2)
        plan = await second.planner.current("s1")
    assert plan.epoch == epoch + 1 and plan.policy_version == second.policy_version != first.policy_version
    assert second.policy.history_floor_tokens == 4_000


async def test_an_engine_on_an_open_store_leaves_it_open() -> None:
    store = await ce.open_store("memory://")
    async with engine(store) as agent:
        assert agent.store is store
    await store.events.read("any")  # still usable
    await store.close()


def test_the_blocking_twin_sends_what_the_engine_sends(tmp_path: object) -> None:
    asynchronous = Driver("openai_responses")

    async def run() -> None:
        async with engine(f"sqlite:///{tmp_path}/async.db") as agent:
            await asynchronous.turns(agent.session("s1"), 1, 3)

    asyncio.run(run())
    blocking = Driver("openai_responses")
    with Engine.open_sync(f"sqlite:///{tmp_path}/sync.db", model="gpt-4o", tools=TOOLS, clock=CLOCK) as agent:
        session = agent.session("s1")
        for n in range(1, 4):
            turn = session.turn(blocking.message(n), run_id=f"run-{n}")
            while not turn.done:
                body = turn.request("openai_responses")
                blocking.bodies.append(json.dumps(body, sort_keys=True))
                for call in turn.record(blocking.model.respond(body, "openai_responses")):
                    turn.tool_result(call, output_of(call))
        resumed = agent.resume("run-3")
        assert resumed.done and resumed.text == turn.text
    assert blocking.bodies == asynchronous.bodies
    agent.close()  # a second close does nothing
