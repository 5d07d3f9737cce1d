"""The replay benchmark's workload (issue 42, acceptance 4): sessions of scripted turns
(a user message, a tool round trip every third turn, an answer) written to a SQLite store
through the stores' batch append with their o200k history counts (``cli.turns.bulk_history``),
and cached under ``tmp/cache/`` of the repository (a thousand sessions take a while to
write); and the three configurations replayed over them, each compacting within the
session's hundred turns."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from ctxengine.cli.turns import bulk_history, text
from ctxengine.model import (
    AssistantMessage,
    ConversationItem,
    ResolvedModel,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxengine.replay import Compaction, ReplayConfig
from ctxengine.stores import open_store

CACHE = Path(__file__).resolve().parent.parent / "tmp" / "cache"
MODEL_ID = "openai:gpt-4o-mini"


def configs() -> list[ReplayConfig]:
    """Three ctxengine configurations: 22k, 25k and 28k windows (exact counting), each of
    which compacts every session of the workload at least once."""
    from ctxengine.core.budget import BudgetPolicy

    policy = BudgetPolicy.from_dict({"history": {"floor_tokens": 4000}})
    return [
        ReplayConfig(
            f"w{w // 1000}k",
            ResolvedModel("openai", "gpt-4o-mini", w, 4_096, 2_048),
            "exact",
            policy,
            Compaction(max_depth=64),
        )
        for w in (22_000, 25_000, 28_000)
    ]


def session_items(sid: str, turns: int) -> list[ConversationItem]:
    items: list[ConversationItem] = []
    for turn in range(1, turns + 1):
        rng = random.Random(f"{sid}:{turn}")
        items.append(UserMessage(f"[turn {turn}] " + text(rng, 300, 600), principal_id="replay"))
        if turn % 3 == 0:
            items.append(ToolCall(f"c{turn}", "search", {"q": text(rng, 40, 120)}))
            items.append(ToolResult(f"c{turn}", text(rng, 400, 800)))
        items.append(AssistantMessage(text(rng, 300, 600)))
    return items


async def _write(path: Path, sessions: int, turns: int) -> None:
    store = await open_store(f"sqlite:///{path}")
    try:
        for n in range(sessions):
            sid = f"s{n:05d}"
            await bulk_history(store, sid, session_items(sid, turns), model_id=f"{MODEL_ID}#o200k_base")
    finally:
        await store.close()


def workload(sessions: int, turns: int) -> tuple[str, list[str]]:
    """The store URL and session ids of ``sessions`` sessions of ``turns`` turns (written
    once, then read from the cache)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"replay-{sessions}x{turns}.db"
    if not path.exists():
        partial = path.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        asyncio.run(_write(partial, sessions, turns))
        partial.rename(path)
    return f"sqlite:///{path}", [f"s{n:05d}" for n in range(sessions)]
