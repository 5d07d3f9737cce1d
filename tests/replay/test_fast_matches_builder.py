"""The fast replay's figures are the real builder's (issue 42): a session is run through the
real loop (``ExactReplay``: ``start_run``, ``build_with_pressure`` with its compactions,
``record_step``), and its log, as the loop wrote it, replayed from per-item counts gives
every request's tokens by region, fit, cut, compactions and turn clearing; both backends,
with the stored counts and without."""

from __future__ import annotations

import asyncio

import pytest

from ctxengine.cli.turns import AGENT, PRINCIPAL, TOOLS
from ctxengine.core.budget import BudgetPolicy
from ctxengine.model import ResolvedModel
from ctxengine.replay import Compaction, ReplayConfig, ReplaySession, read_sessions
from ctxengine.replay.exact import ExactReplay
from ctxengine.replay.fast import SessionReplay, count_session
from ctxengine.replay.setup import configure

from .workloads import chat, long_run

FIELDS = (
    "item", "run", "step", "prefix", "summary", "history", "blocks", "turn", "capacity", "fits", "reason",
    "history_items", "compactions", "clipped", "cleared", "folded",
)  # fmt: skip


def config(window: int, name: str = "c", depth: int = 16, floor: int = 4000) -> ReplayConfig:
    policy = BudgetPolicy.from_dict({"history": {"floor_tokens": floor}})
    return ReplayConfig(
        name,
        ResolvedModel("openai", "gpt-4o-mini", window, 4_096, 2_048),
        "exact",
        policy,
        Compaction(max_depth=16),
    )


async def both(cfg: ReplayConfig, items: list, stored: bool) -> tuple[list, list]:
    c = await configure(cfg, agent=AGENT, tools=TOOLS, principal=PRINCIPAL)
    ex = ExactReplay(c, ReplaySession("s", tuple(items)))
    exact = await ex.requests()
    [(logged, counts)] = await read_sessions(ex.loop.store, ["s"], c.estimator.counter_id(c.key, "history"))
    fresh = await configure(cfg, agent=AGENT, tools=TOOLS, principal=PRINCIPAL)
    fast = SessionReplay(fresh, count_session(logged, fresh, counts if stored else None)).requests()
    return exact, fast


def figures(r: object) -> dict[str, object]:
    return {f: getattr(r, f) for f in FIELDS}


@pytest.mark.parametrize("stored", [True, False], ids=["stored-counts", "counted"])
def test_chat_session_with_compactions(backend: str, stored: bool) -> None:
    exact, fast = asyncio.run(both(config(16_000), chat(70), stored))
    assert sum(r.compactions for r in exact) >= 1
    assert [figures(r) for r in fast] == [figures(r) for r in exact]


def test_the_same_log_under_a_larger_window(backend: str) -> None:
    exact, fast = asyncio.run(both(config(20_000), chat(90, "other"), True))
    assert sum(r.compactions for r in exact) >= 1
    assert [figures(r) for r in fast] == [figures(r) for r in exact]


def test_long_run_clips_and_clears(backend: str) -> None:
    exact, fast = asyncio.run(both(config(32_000), long_run(24), True))
    assert sum(r.clipped for r in exact) and sum(r.cleared for r in exact)
    assert [figures(r) for r in fast] == [figures(r) for r in exact]


def test_every_run_compacts_from_depth_zero(backend: str) -> None:
    """A run seeds from the session's carry with its depth re-based to 0 (ADR 0011): with a
    depth limit of 1, each run may compact once."""
    exact, fast = asyncio.run(both(config(9_000, depth=1, floor=2000), chat(60), True))
    assert sum(r.compactions for r in exact) >= 3 and all(r.fits for r in exact)
    assert [figures(r) for r in fast] == [figures(r) for r in exact]
