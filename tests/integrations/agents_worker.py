"""One process of the Agents SDK acceptance run: ``agents_worker.py URL FIRST LAST`` runs turns
FIRST..LAST of session ``s1`` through ``Runner.run`` with a ``ContextSession`` and its filter,
and prints (JSON) what every model input carried: pair problems, tokens against capacity."""

from __future__ import annotations

import asyncio
import json
import sys

from agents import RunConfig

import ctxengine as ce
from agentskit import INSTRUCTIONS, SMALL, ScriptModel, engine_tools, input_tokens, pair_problems, run_turns
from ctxengine.integrations.openai_agents import ContextSession


async def main(url: str, first: int, last: int) -> dict[str, object]:
    async with ce.Engine.open(url, model=SMALL, instructions=INSTRUCTIONS, tools=engine_tools()) as engine:
        session = ContextSession("s1", engine)
        model = ScriptModel(first_id=first * 100)
        config = RunConfig(call_model_input_filter=session.call_model_input_filter)
        await run_turns(session, model, first, last, config)
        problems: list[str] = []
        tokens: list[int] = []
        capacity = 0
        for _, items in model.inputs:
            problems += pair_problems(items)
            used, capacity = await input_tokens(engine, "s1", items)
            tokens.append(used)
        summarized = sum(1 for _, items in model.inputs if items[0].get("role") == "system")
        view, _ = await session.view()
        return {
            "inputs": len(model.inputs),
            "problems": problems,
            "tokens": tokens,
            "capacity": capacity,
            "summarized": summarized,
            "logged": len(view),
            "first_user": next(i["content"] for i in await session.get_items() if i.get("role") == "user"),
        }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))))
