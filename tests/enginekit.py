"""Driving the session API with the scripted model (``fake_provider``): a turn from the user's
message to the model's last answer, with every request body kept for comparison."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import ctxengine as ce
from ctxengine.engine import Turn
from ctxengine.model.clock import FixedClock
from fake_provider import ScriptedModel, sdk_object

CLOCK = FixedClock(datetime(2026, 12, 4, 9, tzinfo=UTC))
WEATHER = ce.ToolSpec(
    "weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
READ_FILE = ce.ToolSpec(
    "read_file",
    "Read a text file.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
TOOLS = (WEATHER, READ_FILE)
#: A window small enough that a few dozen turns with kilobyte tool outputs compact.
SMALL = ce.ResolvedModel("openai", "gpt-4o-mini", 16_000, 2_048, 2_048)
WIRE_MODELS = {
    "openai_chat": "gpt-4o",
    "openai_responses": "gpt-4o",
    "anthropic_messages": "claude-sonnet-4-5",
}


def output_of(call: ce.ToolCall, size: int = 0) -> str:
    """What the scripted tools return: a function of the call, ``size`` bytes or more."""
    text = f"{call.name}({json.dumps(call.arguments, sort_keys=True)}): 18C and clear"
    return text + (" lorem ipsum dolor" * (size // 18) if size else "")


@dataclass
class Driver:
    """Runs turns against one scripted model on one wire, keeping every request body sent."""

    wire: str
    model: ScriptedModel = field(default_factory=ScriptedModel)
    sdk: bool = False
    output_bytes: int = 0
    bodies: list[str] = field(default_factory=list)

    def message(self, n: int) -> str:
        return f"Turn {n}: what is the weather, and what does notes-{n}.txt say?"

    async def ask(self, turn: Turn) -> tuple[ce.ToolCall, ...]:
        """One request and its response recorded; the calls the model made."""
        body = await turn.request(self.wire)
        ce.providers.check_wire_pairs(body, self.wire)
        request = turn.last_request
        assert request is not None
        assert request.metadata["total_tokens"] <= request.metadata["capacity_tokens"]
        self.bodies.append(json.dumps(body, sort_keys=True))
        response = self.model.respond(body, self.wire)
        return await turn.record(sdk_object(response, self.wire) if self.sdk else response)

    async def answer(self, turn: Turn, calls: tuple[ce.ToolCall, ...]) -> None:
        for call in calls:
            await turn.tool_result(call, output_of(call, self.output_bytes))

    async def finish(self, turn: Turn) -> Turn:
        """Drive ``turn`` from wherever it stands to the model's last answer."""
        await self.answer(turn, turn.pending)
        while not turn.done:
            await self.answer(turn, await self.ask(turn))
        return turn

    async def turns(self, session: Any, first: int, last: int) -> list[Turn]:
        """Turns ``first`` to ``last`` of ``session`` (runs ``run-{n}``), each to its end."""
        done = []
        for n in range(first, last + 1):
            turn = await session.turn(self.message(n), run_id=f"run-{n}")
            done.append(await self.finish(turn))
        return done


def engine(store: Any, *, model: Any = "gpt-4o", **config: Any) -> Any:
    """``Engine.open`` on the fixed clock with the two tools (more keywords pass through)."""
    return ce.Engine.open(store, model=model, tools=config.pop("tools", TOOLS), clock=CLOCK, **config)
