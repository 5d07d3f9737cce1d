"""A worker process for the model-backed compaction replay test (``test_compaction_replay.py``).

    python compaction_worker.py URL first           turns of session s1 with a scripted summarizer
                                                    until a run's first request compacts; that
                                                    request is built, then the process dies
    python compaction_worker.py URL rebuild RUN_ID  with no summarizer (a router that fails if
                                                    called): the run picked up from its id and
                                                    its request built; and the run's version 1
                                                    rebuilt from the log and compacted again from
                                                    the recorded summaries

Each prints one JSON object.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from compactionkit import NoRouter, ScriptedRouter
from ctxengine.providers import to_openai_chat
from ctxengine.runtime.loop_pressure import (
    CONTEXT_COMPACTED,
    MAX_COMPACTIONS_PER_STEP,
    LogSummaries,
    compacts_early,
)
from ctxengine.stores.formats import WritePolicy
from enginekit import SMALL, Driver, engine

WIRE = "openai_chat"
MAX_TURNS = 40


def summary_of(request: Any) -> str:
    through = request.metadata["through"]
    return f"Through event {through}: the user asked for weather and notes; the assistant answered each."


async def compacted_in(agent: Any, run_id: str) -> int:
    events = await agent.store.events.read("s1", types=(CONTEXT_COMPACTED,))
    return sum(1 for event in events if event.run_id == run_id)


async def first(url: str) -> None:
    d = Driver(WIRE, output_bytes=3_000)
    router = ScriptedRouter(text=summary_of)
    agent = await engine(url, model=SMALL, summarizer=router)
    for n in range(1, MAX_TURNS):
        turn = await agent.session("s1").turn(d.message(n), run_id=f"run-{n}")
        body = await turn.request(WIRE)
        if await compacted_in(agent, turn.run_id):
            out = {"run_id": turn.run_id, "body": json.dumps(body, sort_keys=True), "calls": len(router.seen)}
            sys.stdout.write(json.dumps(out) + "\n")
            sys.stdout.flush()
            os._exit(0)  # killed mid-run: no close, its lease still held
        calls = await turn.record(d.model.respond(body, WIRE))
        await d.answer(turn, calls)
        while not turn.done:
            await d.answer(turn, await d.ask(turn))
    raise SystemExit("no run compacted")


async def rebuild(url: str, run_id: str) -> None:
    agent = await engine(url, model=SMALL, summarizer=NoRouter())
    turn = await agent.resume(run_id)
    resumed = json.dumps(await turn.request(WIRE), sort_keys=True)
    # The run's version 1 rebuilt from the log, compacted as the loop would, from the record.
    loop, run, who = agent.loop, turn.run, turn.principal
    checkpoint = await loop._build_seed(run, who)
    plan = await loop.writes.plan_or_none(run.session_id)
    assert plan is not None
    depth = loop.builder.max_compaction_depth
    for n in range(MAX_COMPACTIONS_PER_STEP + 1):
        assembly = loop.builder.assemble(run, checkpoint, agent.agent, who, plan=plan)
        early = n == 0 and compacts_early(plan, assembly.pressure, checkpoint, depth)
        if assembly.pressure.fits and not early:
            break
        checkpoint, _ = await loop.compactor.compact_async(
            checkpoint,
            plan.budget,
            assembly.pressure.reason,
            model_id=plan.counting_key,
            seed_sequence=run.seed_sequence,
            history_budget_tokens=assembly.pressure.history_budget_tokens,
            summaries=LogSummaries(loop, run, WritePolicy()),
        )
    replayed = json.dumps(to_openai_chat(assembly.request, model=agent.model.model), sort_keys=True)
    out = {"resumed": resumed, "replayed": replayed, "compactions": await compacted_in(agent, run_id)}
    sys.stdout.write(json.dumps(out) + "\n")
    await agent.close()


if __name__ == "__main__":
    if sys.argv[2] == "first":
        asyncio.run(first(sys.argv[1]))
    else:
        asyncio.run(rebuild(sys.argv[1], sys.argv[3]))
