"""Issue 42, acceptance 3: the replay's simulator figures on ``ctxengine bench --cache``'s
300-turn session are the bench's: the session the bench drove through the loop, replayed
from its store under the bench's configuration (``method="exact"``: the same loop, the same
wire bodies, the same units), gives every side's tokens, cached tokens under each rule,
ceiling and effective cost."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ctxengine.cli.bench_cache import CacheSettings, session
from ctxengine.cli.turns import AGENT, PRINCIPAL, TOOLS
from ctxengine.core.prompt_cache import PriceTable
from ctxengine.replay import ReplayConfig, ReplayOptions, replay_store


def test_the_300_turn_session_gives_the_bench_figures(tmp_path: Path) -> None:
    settings = CacheSettings(peers=False)
    assert settings.turns == 300
    workload = asyncio.run(session(settings, tmp_path, peers=False))
    config = ReplayConfig("bench", settings.model, "auto")
    options = ReplayOptions([config], False, "exact", agent=AGENT, tools=TOOLS, principal=PRINCIPAL)
    rows = asyncio.run(replay_store(f"sqlite:///{tmp_path / 'session.db'}", ["session"], options))
    (summary,) = [r for r in rows if r["kind"] == "summary"]
    prices = PriceTable()
    chat = workload.sides["ctxengine/openai_chat"]
    anthropic = workload.sides["ctxengine/anthropic"]
    assert summary["requests"] == chat.requests == 400
    cache = summary["cache"]
    assert (cache["wire_tokens"], cache["shared"], cache["ceiling"]) == (
        chat.tokens,
        chat.shared,
        chat.ceiling,
    )
    assert (cache["openai"], cache["vllm"]) == (chat.openai, chat.vllm)
    assert (cache["anthropic_tokens"], cache["anthropic_read"], cache["anthropic_write"]) == (
        anthropic.tokens,
        anthropic.anthropic_read,
        anthropic.anthropic_write,
    )
    bench = chat.to_dict(prices)
    assert summary["cached_fraction"]["openai"] == bench["cached_fraction"]["openai"]
    assert summary["cached_fraction"]["ceiling"] == bench["cached_fraction"]["ceiling"]
    assert summary["cost"]["openai"] == bench["effective_cost"]["openai"]
    assert summary["cost"]["anthropic"] == anthropic.to_dict(prices)["effective_cost"]["anthropic"]
