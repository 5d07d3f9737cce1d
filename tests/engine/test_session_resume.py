"""Resuming a run from its id alone (issue 41, acceptance 4, in process; the fresh-process
test is ``tests/integration/test_session_resume_process.py``): a run interrupted anywhere in
its turn and continued by another engine on the same store, which knows nothing but the run
id, sends the same requests, byte for byte, as a run that was never interrupted, compactions
after the interruption included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ctxengine as ce
from ctxengine.engine import Turn
from ctxengine.runtime.loop_pressure import CONTEXT_COMPACTED
from enginekit import SMALL, Driver, engine

WIRE = "openai_chat"
#: Enough turns for a compaction after the interruption (builder version 3 compacts before
#: truncating history under pressure, ADR 0027, so the next one comes a turn or two later).
TURNS = 22
#: The turn interrupted: the model calls two tools in it (``fake_provider``'s rule).
STOPPED = 16
STOPS = ("started", "built", "called", "answered-one", "finished")


def driver() -> Driver:
    return Driver(WIRE, output_bytes=5_000)


async def uninterrupted(url: str) -> tuple[list[str], list[int]]:
    d = driver()
    async with engine(url, model=SMALL) as agent:
        await d.turns(agent.session("s1"), 1, TURNS)
        compacted = await agent.store.events.read("s1", types=(CONTEXT_COMPACTED,))
    return d.bodies, [e.sequence for e in compacted]


async def until(d: Driver, turn: Turn, stop: str) -> None:
    """Take ``turn`` as far as ``stop``."""
    if stop == "started":
        return
    if stop == "built":
        body = await turn.request(WIRE)
        d.bodies.append(json.dumps(body, sort_keys=True))
        return
    calls = await d.ask(turn)
    assert len(calls) == 2, "the interrupted turn should call two tools"
    if stop == "answered-one":
        await d.answer(turn, calls[:1])
    elif stop == "finished":
        await d.finish(turn)


@pytest.mark.parametrize("stop", STOPS)
async def test_a_run_resumed_from_its_id_sends_the_same_requests(tmp_path: Path, stop: str) -> None:
    whole, compactions = await uninterrupted(f"sqlite:///{tmp_path}/whole.db")
    url = f"sqlite:///{tmp_path}/resumed.db"
    first = driver()
    async with engine(url, model=SMALL) as agent:
        await first.turns(agent.session("s1"), 1, STOPPED - 1)
        await until(
            first, await agent.session("s1").turn(first.message(STOPPED), run_id=f"run-{STOPPED}"), stop
        )
        before = agent.owner
        early = len(await agent.store.events.read("s1", types=(CONTEXT_COMPACTED,)))
    second = Driver(WIRE, output_bytes=5_000, model=first.model)
    async with engine(url, model=SMALL) as agent:
        assert agent.owner != before
        turn = await agent.resume(f"run-{STOPPED}")
        assert (turn.session_id, turn.done) == ("s1", stop == "finished")
        assert len(turn.pending) == {"called": 2, "answered-one": 1}.get(stop, 0)
        await second.finish(turn)
        await second.turns(agent.session(turn.session_id), STOPPED + 1, TURNS)
        compacted = await agent.store.events.read("s1", types=(CONTEXT_COMPACTED,))
    sent = first.bodies + second.bodies
    if stop == "built":  # the request built before the interruption was never answered: built again
        assert second.bodies[0] == first.bodies[-1]
        sent = first.bodies[:-1] + second.bodies
    assert sent == whole
    assert [e.sequence for e in compacted] == compactions
    assert len(compacted) > early > 0, "compactions before and after the interruption"


async def test_a_resumed_run_fences_the_worker_that_held_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/fenced.db"
    d = driver()
    async with engine(url, model=SMALL) as old, engine(url, model=SMALL) as new:
        stalled = await old.session("s1").turn(d.message(STOPPED), run_id="r")
        calls = await d.ask(stalled)
        resumed = await new.resume("r")
        assert resumed.pending == calls
        with pytest.raises(ce.LeaseLost):
            await stalled.tool_result(calls[0], "late")
        await d.finish(resumed)
        assert resumed.done
