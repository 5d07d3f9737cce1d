"""What a larger window costs the runtime itself (issue 13, acceptance 5, for scale).

Before a session's history first fills the 200k window (turn 391 of the scripted
workload), turn 200's request lists about ten times the items of turn 20's.
The engine's whole turn at 200 costs 0.1-0.2 ms more than at 20 (README, "Many
workers"); these rows show what the runtime pays for the same growth in one
step it cannot skip: turning the request into a provider's request body
(``to_openai_chat`` or ``to_anthropic_messages``, then ``json.dumps``). Compare
the rows as ratios in one run.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxengine.assembly.request import ModelRequest
from ctxengine.providers import to_anthropic_messages, to_openai_chat
from ctxengine.stores import open_store

TURNS = (20, 200)

WIRE: dict[str, Callable[[ModelRequest], Any]] = {
    "openai_chat": lambda request: to_openai_chat(request, model="bench"),
    "anthropic": lambda request: to_anthropic_messages(request, model="bench"),
}


@pytest.fixture(scope="module")
def requests(tmp_path_factory: pytest.TempPathFactory) -> dict[int, ModelRequest]:
    """Turn 20's and turn 200's first requests of one scripted session (SQLite)."""
    from ctxengine.cli.turns import ScriptedWorker

    path: Path = tmp_path_factory.mktemp("wire") / "wire.db"

    async def take() -> dict[int, ModelRequest]:
        store = await open_store(f"sqlite:///{path}")
        try:
            worker = ScriptedWorker(store)
            build = worker.loop.build_with_pressure
            built: list[ModelRequest] = []  # this turn's requests, in order

            async def keeping(*args: Any, **kwargs: Any) -> Any:
                request, checkpoint = await build(*args, **kwargs)
                built.append(request)
                return request, checkpoint

            worker.loop.build_with_pressure = keeping  # type: ignore[method-assign]
            out: dict[int, ModelRequest] = {}
            for turn in range(1, max(TURNS) + 1):
                built.clear()
                await worker.turn("wire", turn)
                if turn in TURNS:
                    out[turn] = built[0]
            return out
        finally:
            await store.close()

    return asyncio.run(take())


@pytest.mark.parametrize("turn", TURNS)
@pytest.mark.parametrize("wire", sorted(WIRE))
def bench_request_body_for_the_provider(
    benchmark: Any, requests: dict[int, ModelRequest], turn: int, wire: str
) -> None:
    """The provider's request body of turn ``turn``'s first request, as JSON text."""
    request = requests[turn]
    to_wire = WIRE[wire]
    body = benchmark(lambda: json.dumps(to_wire(request)))
    benchmark.extra_info["items"] = len(request.body)
    benchmark.extra_info["bytes"] = len(body)
    assert len(request.body) > (400 if turn == 200 else 40)
