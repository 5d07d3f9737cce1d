"""The store contract: transactions commit or roll back together; leases fence checkpoints."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from contract_events import COMPACTED, new
from ctxengine.errors import LeaseLost, ModelValidationError, StoreError
from ctxengine.stores.events import Event, Lease, Store

# --------------------------------------------------------------------------
# transactions and checkpoints


async def test_transaction_commits_event_and_checkpoint_together(store: Store) -> None:
    lease = await store.checkpoints.claim("run-1", "worker-a")
    async with store.transaction():
        event = await store.events.append(new("s", "compaction:1", type=COMPACTED))
        version = await store.checkpoints.write("run-1", {"v": 1}, trigger="compaction", lease=lease)
        assert [e.sequence for e in await store.events.read("s")] == [1]  # own writes are visible
    assert await store.events.read("s") == [event]
    assert [row["version"] for row in await store.checkpoints.latest_raw("run-1")] == [version] == [1]


async def test_transaction_rolls_back_everything_on_error(store: Store) -> None:
    lease = await store.checkpoints.claim("run-1", "worker-a")
    await store.checkpoints.write("run-1", {"v": 1}, trigger="model_response", lease=lease)
    outside: list[list[Event]] = []

    async def read_outside() -> None:
        outside.append(await store.events.read("s"))

    with pytest.raises(RuntimeError, match="boom"):
        async with store.transaction():
            await store.events.append(new("s", "compaction:1", type=COMPACTED))
            await store.checkpoints.write("run-1", {"v": 2}, trigger="compaction", lease=lease)
            await store.checkpoints.claim("run-1", "worker-b")
            # A task started in a fresh context is outside the transaction
            # (tasks spawned with the current context would join it).
            reader = asyncio.create_task(read_outside(), context=contextvars.Context())
            await asyncio.sleep(0.05)
            raise RuntimeError("boom")
    await reader
    assert outside == [[]]  # never saw the uncommitted event
    assert await store.events.read("s") == []
    assert [row["payload"] for row in await store.checkpoints.latest_raw("run-1")] == [{"v": 1}]
    # The claim inside the transaction was rolled back too: the old lease still writes.
    assert await store.checkpoints.write("run-1", {"v": 2}, trigger="model_response", lease=lease) == 2
    # And the rolled-back sequence is reused: no gap.
    assert (await store.events.append(new("s", "later"))).sequence == 1


async def test_a_lost_lease_inside_a_transaction_rolls_it_back(store: Store) -> None:
    stale = await store.checkpoints.claim("run-1", "worker-a")
    await store.checkpoints.claim("run-1", "worker-b")
    with pytest.raises(LeaseLost):
        async with store.transaction():
            await store.events.append(new("s", "compaction:1", type=COMPACTED))
            await store.checkpoints.write("run-1", {"v": 1}, trigger="compaction", lease=stale)
    assert await store.events.read("s") == []
    assert await store.checkpoints.latest_raw("run-1") == []


async def test_a_cancelled_transaction_leaves_the_store_usable(store: Store) -> None:
    entered = asyncio.Event()

    async def stuck() -> None:
        async with store.transaction():
            await store.events.append(new("s", "never"))
            entered.set()
            await asyncio.sleep(30)

    task = asyncio.create_task(stuck())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await store.events.append(new("s", "after"))).sequence == 1
    assert [e.derivation_key for e in await store.events.read("s")] == ["after"]


async def test_a_nested_transaction_is_a_savepoint(store: Store) -> None:
    lease = await store.checkpoints.claim("run-1", "w")
    async with store.transaction():
        await store.events.append(new("s", "outer"))
        with pytest.raises(RuntimeError):
            async with store.transaction():
                await store.events.append(new("s", "inner"))
                await store.checkpoints.write("run-1", {"inner": True}, trigger="compaction", lease=lease)
                raise RuntimeError("inner fails")
        async with store.transaction():
            await store.events.append(new("s", "inner-ok"))
        with pytest.raises(StoreError, match="inside its own transaction"):
            await store.close()
    assert [(e.sequence, e.derivation_key) for e in await store.events.read("s")] == [
        (1, "outer"),
        (2, "inner-ok"),
    ]
    assert await store.checkpoints.latest_raw("run-1") == []


async def test_claim_fences_older_leases(store: Store) -> None:
    first = await store.checkpoints.claim("run-1", "worker-a")
    assert first == Lease("worker-a", 1, "run-1")
    assert await store.checkpoints.write("run-1", {"n": 1}, trigger="model_response", lease=first) == 1
    second = await store.checkpoints.claim("run-1", "worker-b")
    assert second == Lease("worker-b", 2, "run-1")
    with pytest.raises(LeaseLost) as err:
        await store.checkpoints.write("run-1", {"n": 2}, trigger="tool_completed", lease=first)
    assert "run-1" in str(err.value) and "epoch 1" in str(err.value) and "epoch 2" in str(err.value)
    assert [row["payload"] for row in await store.checkpoints.latest_raw("run-1")] == [{"n": 1}]
    assert await store.checkpoints.write("run-1", {"n": 2}, trigger="tool_completed", lease=second) == 2
    with pytest.raises(LeaseLost, match="claimed for run 'run-1'"):
        await store.checkpoints.write("run-2", {}, trigger="tool_completed", lease=second)
    with pytest.raises(LeaseLost, match="never claimed"):
        await store.checkpoints.write("run-2", {}, trigger="tool_completed", lease=Lease("x", 1, "run-2"))
    # Leases are per run.
    assert await store.checkpoints.claim("run-2", "worker-a") == Lease("worker-a", 1, "run-2")


async def test_a_lease_writes_only_the_run_it_was_claimed_for(store: Store) -> None:
    x = await store.checkpoints.claim("run-x", "worker")
    y = await store.checkpoints.claim("run-y", "worker")
    assert (x.owner, x.epoch) == (y.owner, y.epoch)  # same owner and epoch, different runs
    with pytest.raises(LeaseLost, match="claimed for run 'run-x'"):
        await store.checkpoints.write("run-y", {"n": 1}, trigger="model_response", lease=x)
    assert await store.checkpoints.latest_raw("run-y") == []
    assert await store.checkpoints.write("run-y", {"n": 1}, trigger="model_response", lease=y) == 1


async def test_epochs_survive_delete_so_old_leases_stay_fenced(store: Store) -> None:
    old = await store.checkpoints.claim("run-d", "worker-a")
    await store.checkpoints.write("run-d", {"n": 1}, trigger="model_response", lease=old)
    await store.checkpoints.delete("run-d")
    assert await store.checkpoints.latest_raw("run-d") == []
    with pytest.raises(LeaseLost):  # delete fences the current lease too
        await store.checkpoints.write("run-d", {"n": 2}, trigger="model_response", lease=old)
    new = await store.checkpoints.claim("run-d", "worker-a")
    assert new.epoch > old.epoch + 1
    with pytest.raises(LeaseLost):
        await store.checkpoints.write("run-d", {"n": 2}, trigger="model_response", lease=old)
    assert await store.checkpoints.latest_raw("run-d") == []
    assert await store.checkpoints.write("run-d", {"n": 3}, trigger="model_response", lease=new) == 1


async def test_checkpoint_rows_from_the_newest_full_snapshot(store: Store) -> None:
    lease = await store.checkpoints.claim("run-1", "w")
    assert await store.checkpoints.latest_raw("run-1") == []
    with pytest.raises(ModelValidationError, match="no full snapshot"):
        await store.checkpoints.write("run-1", {}, trigger="tool_completed", lease=lease, kind="delta")
    with pytest.raises(ModelValidationError, match="unknown trigger 'lunch'"):
        await store.checkpoints.write("run-1", {}, trigger="lunch", lease=lease)
    with pytest.raises(ModelValidationError, match="unknown kind"):
        await store.checkpoints.write("run-1", {}, trigger="compaction", lease=lease, kind="half")  # type: ignore[arg-type]
    plan = ["full", "delta", "delta", "full", "delta"]
    for i, kind in enumerate(plan):
        trigger = "compaction" if kind == "full" else "tool_completed"
        version = await store.checkpoints.write("run-1", {"i": i}, trigger=trigger, lease=lease, kind=kind)  # type: ignore[arg-type]
        assert version == i + 1
    rows = await store.checkpoints.latest_raw("run-1")
    assert [(r["version"], r["kind"], r["trigger"], r["payload"]) for r in rows] == [
        (4, "full", "compaction", {"i": 3}),
        (5, "delta", "tool_completed", {"i": 4}),
    ]
    await store.checkpoints.delete("run-1")
    assert await store.checkpoints.latest_raw("run-1") == []
    with pytest.raises(LeaseLost):
        await store.checkpoints.write("run-1", {}, trigger="compaction", lease=lease)
