"""Scripted sessions for the replay tests: a chat session (a tool round trip every third
turn) and a long run (one user message, tool steps with large outputs)."""

from __future__ import annotations

import random

from ctxengine.cli.turns import PRINCIPAL, text
from ctxengine.model import AssistantMessage, ConversationItem, ToolCall, ToolResult, UserMessage


def chat(turns: int, seed: str = "chat") -> list[ConversationItem]:
    items: list[ConversationItem] = []
    for turn in range(1, turns + 1):
        rng = random.Random(f"{seed}:{turn}")
        items.append(
            UserMessage(f"[turn {turn}] " + text(rng, 300, 600), principal_id=PRINCIPAL.principal_id)
        )
        if turn % 3 == 0:
            items.append(ToolCall(f"c{turn}", "search", {"q": text(rng, 40, 120)}))
            items.append(ToolResult(f"c{turn}", text(rng, 400, 800)))
        items.append(AssistantMessage(text(rng, 300, 600)))
    return items


def long_run(steps: int, seed: str = "long") -> list[ConversationItem]:
    rng = random.Random(seed)
    items: list[ConversationItem] = [
        UserMessage("Fix the failing test. " + text(rng, 200, 400), principal_id=PRINCIPAL.principal_id)
    ]
    for step in range(steps):
        size = 60_000 if step == 5 else rng.randint(7_000, 40_000)
        items.append(ToolCall(f"call_{step}", "search", {"q": text(rng, 20, 60)}))
        items.append(ToolResult(f"call_{step}", text(rng, size, size)))
    items.append(AssistantMessage("Fixed."))
    return items
