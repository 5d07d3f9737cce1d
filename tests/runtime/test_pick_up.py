"""``ContextLoop.pick_up`` (issue 13): a worker claims a run whose user message is logged and
writes its version 1 in one transaction (one call on PostgreSQL), on every store."""

from __future__ import annotations

from dataclasses import replace

import pytest

import ctxengine as ce
from ctxengine.cli.turns import PRINCIPAL, ScriptedWorker
from ctxengine.errors import ContextError
from ctxengine.runtime import loop_runs
from ctxengine.runtime.checkpoints import latest_checkpoint
from ctxengine.stores.events import Store
from ctxengine.stores.postgres import PostgresStore
from ctxengine.stores.sqlite import SQLiteStore
from sessionkit import SMALL

SID = "pick-up"


async def _session(store: Store) -> tuple[ScriptedWorker, int]:
    """A few turns, then a user message no run has picked up yet."""
    worker = ScriptedWorker(store, model=SMALL)
    for turn in range(1, 5):
        await worker.turn(SID, turn)
    seed = await ce.append_item(store, SID, ce.UserMessage("and now?"), principal=PRINCIPAL)
    assert seed.seq is not None
    return worker, seed.seq


async def test_pick_up_is_claim_and_seed_in_one_commit(store: Store) -> None:
    worker, seed = await _session(store)
    fresh = ScriptedWorker(store, model=SMALL)  # never saw the session
    await fresh.planner.current(SID)
    run = ce.RunContext("picked", SID, seed)
    started = await fresh.loop.pick_up(run, PRINCIPAL, owner="w2")
    assert (started.run, started.lease) == (run, ce.Lease("w2", 1, "picked"))
    assert await latest_checkpoint(store, "picked") == started.checkpoint
    # The same as claim + seed_checkpoint (another run at the same seed).
    other = ce.RunContext("claimed", SID, seed)
    lease = await store.checkpoints.claim("claimed", "w2")
    seeded = await worker.loop._seed_checkpoint(other, PRINCIPAL, lease=lease)
    assert replace(seeded, run_id="picked") == started.checkpoint
    if isinstance(store, (PostgresStore, SQLiteStore)):
        assert (fresh.loop.commits.one_call, fresh.loop.commits.missed) == (1, 0)
    # A retry takes the next lease and gets version 1 back, writing nothing.
    before = await store.events.read(SID)
    again = await fresh.loop.pick_up(run, PRINCIPAL, owner="w3")
    assert again.lease == ce.Lease("w3", 2, "picked")
    assert again.checkpoint == started.checkpoint
    assert await store.events.read(SID) == before


async def test_a_pick_up_that_fails_leaves_the_lease_as_it_was(store: Store) -> None:
    worker, seed = await _session(store)
    run = ce.RunContext("moved-on", SID, seed)
    started = await worker.loop.pick_up(run, PRINCIPAL, owner="w1")
    await worker.loop.record_step(run, started.checkpoint, [ce.AssistantMessage("done")], lease=started.lease)
    with pytest.raises(ContextError, match="already has checkpoint version 2"):
        await worker.loop.pick_up(run, PRINCIPAL, owner="w2")
    # The claim went with the refused write: the run is still w1's, at its lease.
    latest = await latest_checkpoint(store, "moved-on")
    assert latest is not None and latest.version == 2
    await worker.loop.record_step(
        replace(run, step=1), latest, [ce.AssistantMessage("still mine")], lease=started.lease
    )


async def test_the_seed_is_primed_while_version_1_is_written(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rendering and priming the seeded history stores nothing, so ``pick_up`` does it while
    the store commits version 1; a failure there still waits for the write's outcome."""
    _, seed = await _session(store)
    fresh = ScriptedWorker(store, model=SMALL)
    await fresh.planner.current(SID)
    order: list[str] = []
    prime = loop_runs.prime_seed_steps

    def primed(*args: object) -> object:
        order.append("prime")
        return prime(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(loop_runs, "prime_seed_steps", primed)
    started = await fresh.loop.pick_up(ce.RunContext("overlapped", SID, seed), PRINCIPAL, owner="w")
    assert order == ["prime"] and await latest_checkpoint(store, "overlapped") == started.checkpoint
    # The request built from it is the same as from a worker that seeded without overlap.
    other = ScriptedWorker(store, model=SMALL)
    lease = await store.checkpoints.claim("plain", "w")
    plain = await other.loop._seed_checkpoint(ce.RunContext("plain", SID, seed), PRINCIPAL, lease=lease)
    assert replace(plain, run_id="overlapped") == started.checkpoint

    def broken(*_: object) -> object:
        raise RuntimeError("renderer failed")

    monkeypatch.setattr(loop_runs, "prime_seed_steps", broken)
    late = ScriptedWorker(store, model=SMALL)
    await late.planner.current(SID)
    with pytest.raises(RuntimeError, match="renderer failed"):
        await late.loop.pick_up(ce.RunContext("failed-prime", SID, seed), PRINCIPAL, owner="w")
    # The write was not abandoned half-way: it committed (the caller may retry the pick-up).
    assert await latest_checkpoint(store, "failed-prime") is not None
