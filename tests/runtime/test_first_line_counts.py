"""A long first line's tool-result pointers are canonicalized and counted while the seed
renders in slices, not by the first fit in its one native stretch (issue 37 finding 9,
issue 40: the first fit over budget measures the pointer of every tool result it elides;
5,000 of them were 10 ms of a 28 ms block at 20,000 items)."""

from __future__ import annotations

import ctxengine as ce
from ctxengine.cli.looplag import imported_session
from ctxengine.cli.turns import PRINCIPAL, START, ScriptedWorker
from ctxengine.core.slices import SLICE_ITEMS
from ctxengine.model import ResolvedModel
from ctxengine.model.clock import FixedClock
from ctxengine.stores import MemoryStore

SMALL = ResolvedModel("bench", "small", 24_000, 1_024, 1_024)


async def test_a_long_first_line_has_its_pointers_made_and_counted_by_the_seed(backend: str) -> None:
    store = MemoryStore(clock=FixedClock(START))
    seed = await imported_session(store, "s", 1_200, model=SMALL)
    worker = ScriptedWorker(store, model=SMALL, owner="w")
    run = ce.RunContext("r", "s", seed)
    await worker.loop.pick_up(run, PRINCIPAL, owner="w")
    pointers = list(worker.loop.windows.window("s").line.pointers.values())
    assert len(pointers) > SLICE_ITEMS
    assert all(p._cj is not None for p in pointers)
    plan = await worker.planner.current("s")
    assert plan is not None
    before = worker.estimator.memo_stats()
    worker.estimator.raw_estimates(pointers, plan.counting_key)
    after = worker.estimator.memo_stats()
    assert after["misses"] == before["misses"] and after["hits"] == before["hits"] + len(pointers)
