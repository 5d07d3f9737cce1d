"""A worker process for the fresh-process resume test (``test_session_resume_process.py``).

    python session_worker.py URL whole          every turn of session s1, to the end
    python session_worker.py URL until STOP     turns before the stopped one, the stopped one as
                                                far as STOP, then the process dies (os._exit)
    python session_worker.py URL resume RUN_ID  the run picked up from its id alone, finished,
                                                and the session's later turns

Each prints one JSON object: the request bodies it sent, in order, and the run and session ids.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from ctxengine.runtime.loop_pressure import CONTEXT_COMPACTED
from enginekit import SMALL, Driver, engine

TURNS = 20
STOPPED = 16  # the model calls two tools in this turn
OUTPUT_BYTES = 5_000


async def report(agent: Any, driver: Driver, **ids: str) -> None:
    compacted = await agent.store.events.read("s1", types=(CONTEXT_COMPACTED,))
    sys.stdout.write(json.dumps({"bodies": driver.bodies, "compactions": len(compacted), **ids}) + "\n")
    sys.stdout.flush()


async def main(url: str, mode: str, arg: str | None) -> None:
    d = Driver("openai_chat", output_bytes=OUTPUT_BYTES)
    agent = await engine(url, model=SMALL)
    if mode == "whole":
        await d.turns(agent.session("s1"), 1, TURNS)
        await report(agent, d)
    elif mode == "until":
        await d.turns(agent.session("s1"), 1, STOPPED - 1)
        turn = await agent.session("s1").turn(d.message(STOPPED), run_id=f"run-{STOPPED}")
        if arg == "built":
            d.bodies.append(json.dumps(await turn.request("openai_chat"), sort_keys=True))
        else:
            calls = await d.ask(turn)
            await d.answer(turn, calls[:1])
        await report(agent, d, run_id=turn.run_id)
        os._exit(0)  # killed mid-run: no close, no cleanup
    else:
        assert arg is not None
        turn = await agent.resume(arg)
        await d.finish(turn)
        await d.turns(agent.session(turn.session_id), STOPPED + 1, TURNS)
        await report(agent, d, run_id=turn.run_id, session_id=turn.session_id)
    await agent.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None))
