"""The session API refuses calls out of order with typed errors that name the run, the call and
what the turn waits for (issue 41); nothing is written by a refused call."""

from __future__ import annotations

import pytest

import ctxengine as ce
from ctxengine.engine import Engine
from enginekit import Driver, engine, output_of

CHAT_TEXT = {"choices": [{"message": {"role": "assistant", "content": "Hello."}}]}


async def _events(agent: Engine) -> int:
    return len(await agent.store.events.read("s1"))


async def test_a_response_before_a_request_is_a_turn_state_error() -> None:
    async with engine("memory://") as agent:
        turn = await agent.session("s1").turn("hi", run_id="r1")
        before = await _events(agent)
        with pytest.raises(ce.TurnStateError) as caught:
            await turn.record(CHAT_TEXT)
        assert (caught.value.run_id, caught.value.call, caught.value.state) == (
            "r1",
            "record()",
            "awaiting a request",
        )
        assert await _events(agent) == before


async def test_a_second_response_to_one_request_is_a_turn_state_error() -> None:
    d = Driver("openai_chat")
    async with engine("memory://") as agent:
        turn = await agent.session("s1").turn(d.message(8), run_id="r1")  # two calls
        calls = await d.ask(turn)
        assert calls
        with pytest.raises(ce.TurnStateError, match="awaiting tool results"):
            await turn.record(CHAT_TEXT)


async def test_calls_on_a_finished_turn_are_turn_state_errors() -> None:
    async with engine("memory://") as agent:
        turn = await agent.session("s1").turn("hi")
        await turn.request()
        assert await turn.record(CHAT_TEXT) == () and turn.done and turn.text == "Hello."
        for call in (turn.request(), turn.record(CHAT_TEXT), turn.tool_result("c1", "x")):
            with pytest.raises(ce.TurnStateError) as caught:
                await call
            assert caught.value.state == "finished"


async def test_a_request_before_every_call_is_answered_is_an_orphaned_tool_pair() -> None:
    d = Driver("openai_chat")
    async with engine("memory://") as agent:
        turn = await agent.session("s1").turn(d.message(8))
        first, second = await d.ask(turn)
        await turn.tool_result(first, output_of(first))
        before = await _events(agent)
        with pytest.raises(ce.OrphanedToolPair) as caught:
            await turn.request()
        assert caught.value.call_id == second.call_id
        assert await _events(agent) == before
        await turn.tool_result(second.call_id, {"temperature": 18})  # by id, and a JSON value
        await d.finish(turn)


async def test_a_result_no_call_waits_for_is_an_orphaned_tool_pair() -> None:
    d = Driver("openai_chat")
    async with engine("memory://") as agent:
        turn = await agent.session("s1").turn(d.message(8))
        first, _ = await d.ask(turn)
        with pytest.raises(ce.OrphanedToolPair, match="waiting: "):
            await turn.tool_result("call_unknown", "x")
        await turn.tool_result(first, "once")
        with pytest.raises(ce.OrphanedToolPair) as caught:
            await turn.tool_result(first, "twice")
        assert caught.value.call_id == first.call_id
        with pytest.raises(ce.ModelValidationError, match="trust"):
            await turn.tool_result(turn.pending[0], "x", trust="nobody")


async def test_a_new_turn_while_a_call_is_unanswered_is_an_orphaned_tool_pair() -> None:
    d = Driver("anthropic_messages")
    async with engine("memory://", model="claude-sonnet-4-5") as agent:
        session = agent.session("s1")
        turn = await session.turn(d.message(8))
        calls = await d.ask(turn)
        before = await _events(agent)
        with pytest.raises(ce.OrphanedToolPair) as caught:
            await session.turn("never mind")
        assert caught.value.call_id == calls[0].call_id
        assert await _events(agent) == before
        await d.finish(turn)
        await session.turn("and now?")  # answered: the next turn starts


async def test_an_unknown_run_id_is_run_not_found(tmp_path: object) -> None:
    async with engine(f"sqlite:///{tmp_path}/runs.db") as agent:
        with pytest.raises(ce.RunNotFound) as caught:
            await agent.resume("no-such-run")
        assert caught.value.run_id == "no-such-run" and isinstance(caught.value, LookupError)
        # A run with checkpoints that start_run or pick_up did not begin is not resumable either.
        lease = await agent.store.checkpoints.claim("raw", "w")
        await ce.write_checkpoint(agent.store, "raw", ce.Checkpoint("raw"), trigger="seeded", lease=lease)
        with pytest.raises(ce.RunNotFound, match="session_id="):
            await agent.resume("raw")
        with pytest.raises(ce.RunNotFound, match=r"holds no run\.checkpoint\.seeded"):
            await agent.resume("raw", session_id="s1")


async def test_what_does_not_read_as_a_response_is_a_conversion_error() -> None:
    async with engine("memory://") as agent:
        turn = await agent.session("s1").turn("hi")
        await turn.request()
        for bad, field in (
            ({"choices": []}, "choices"),
            ({"foo": 1}, "<response>"),
            (42, "<response>"),
            (
                {"choices": [{"message": {"role": "assistant", "content": [{"type": "image_url"}]}}]},
                "content[0].type",
            ),
        ):
            with pytest.raises(ce.ConversionError) as caught:
                await turn.record(bad)
            assert caught.value.field == field
        await turn.record(CHAT_TEXT)  # the request still waits for its response


async def test_configuration_errors_name_the_argument() -> None:
    with pytest.raises(ce.ModelValidationError, match="no model named 'gpt-99'"):
        await Engine.open("memory://", model="gpt-99")
    with pytest.raises(ce.ModelValidationError, match=r"tools\[1\]"):
        await Engine.open("memory://", model="gpt-4o", tools=[{"name": "ok", "description": ""}, {"name": 3}])
    with pytest.raises(ce.PolicyError, match=r"history\.nope"):
        await Engine.open("memory://", model="gpt-4o", policy={"history": {"nope": 1}})
    async with engine("memory://") as agent:
        turn = await agent.session("s1").turn("hi")
        with pytest.raises(ValueError, match="unknown wire format 'grpc'"):
            await turn.request("grpc")
