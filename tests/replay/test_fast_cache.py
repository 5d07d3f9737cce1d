"""The fast path's cache figures (``replay.cache.SessionCache``, from the requests' layout)
equal ``PromptCacheSimulator``'s over the same requests' units, unit by unit: sessions with
compactions, history tool results shown as pointers, and a long run's clipped and cleared
turns; both backends."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from ctxengine.cli.turns import AGENT, PRINCIPAL, TOOLS
from ctxengine.core.budget import BudgetPolicy
from ctxengine.core.prompt_cache import PromptCacheSimulator
from ctxengine.model import ResolvedModel
from ctxengine.replay import Compaction, ReplayConfig, ReplaySession
from ctxengine.replay.fast import SessionReplay, count_session
from ctxengine.replay.setup import configure

from .workloads import chat, long_run


def replayed(window: int, items: list, policy: dict) -> list:
    cfg = ReplayConfig(
        "c",
        ResolvedModel("openai", "gpt-4o-mini", window, 4_096, 2_048),
        "exact",
        BudgetPolicy.from_dict(policy),
        Compaction(max_depth=16),
    )

    async def run() -> list:
        c = await configure(cfg, agent=AGENT, tools=TOOLS, principal=PRINCIPAL)
        logged = tuple(replace(i, seq=n + 1) for n, i in enumerate(items))
        session = ReplaySession("s", logged)
        return SessionReplay(c, count_session(session, c), materialize=True).requests()

    return asyncio.run(run())


@pytest.mark.parametrize(
    ("window", "workload", "policy", "shown"),
    [
        (16_000, lambda: chat(80), {"history": {"floor_tokens": 4000}}, "compactions"),
        # A small tool-result cap: history results turn into pointers, more of them as it grows.
        (
            20_000,
            lambda: chat(60),
            {"history": {"floor_tokens": 4000}, "tool_results": {"ratio": 0.02}},
            "pointers",
        ),
        (32_000, lambda: long_run(24), {"history": {"floor_tokens": 4000}}, "cleared"),
    ],
    ids=["compactions", "history-pointers", "long-run"],
)
def test_layout_figures_equal_the_simulators(
    backend: str, window: int, workload: object, policy: dict, shown: str
) -> None:
    requests = replayed(window, workload(), policy)  # type: ignore[operator]
    sim = PromptCacheSimulator()
    for r in requests:
        # (``previous``, the first wording of the ceiling, is not reported.)
        assert r.cache == replace(sim.add(*r.units), previous=0), r.index
    assert any(getattr(r, shown) for r in requests), shown
