"""``core.slices`` (issue 37, finding 9): work written once as steps, run in one go or in
slices that give the event loop back, with the same answer; the collector paused in one
place and restored."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator, Sequence

import pytest

from ctxengine.core import slices
from ctxengine.core.slices import (
    MAX_SLICE_ITEMS,
    SLICE_ITEMS,
    Steps,
    batches,
    collector_paused,
    emptied,
    finish,
    finish_async,
)


def _counting(n: int, log: list[int]) -> Steps[int]:
    total = 0
    for i in range(n):
        log.append(i)
        total += i
        yield
    return total


@pytest.fixture
def fake_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """A clock that moves only when a test moves it."""
    now = [0.0]
    monkeypatch.setattr(slices, "perf_counter", lambda: now[0])
    yield now


def test_batches_calls_in_slices_and_keeps_the_order(fake_clock: list[float]) -> None:
    calls: list[int] = []

    def double(part: Sequence[int]) -> list[int]:
        calls.append(len(part))
        fake_clock[0] += len(part) * slices.SLICE_SECONDS / 100  # 100 items a slice's time
        return [2 * v for v in part]

    items = list(range(2 * SLICE_ITEMS + 5))
    assert finish(batches(double, items)) == [2 * v for v in items]
    # The first call takes SLICE_ITEMS, the next as many as fit a slice's time.
    assert calls[0] == SLICE_ITEMS and set(calls[1:-1]) == {100} and sum(calls) == len(items)
    calls.clear()
    assert finish(batches(double, items[:SLICE_ITEMS])) == [2 * v for v in items[:SLICE_ITEMS]]
    assert calls == [SLICE_ITEMS]  # one call, no yield


async def test_finish_async_yields_only_once_the_slice_time_has_passed(fake_clock: list[float]) -> None:
    ran: list[str] = []

    async def other() -> None:
        ran.append("other")

    def steps() -> Steps[str]:
        for i in range(4):
            ran.append(f"step {i}")
            if i == 1:
                fake_clock[0] += slices.SLICE_SECONDS  # this slice took its time
            yield
        return "done"

    task = asyncio.get_running_loop().create_task(other())
    assert await finish_async(steps()) == "done"
    # The first two steps ran before the loop ran anything else; then it was given back.
    assert ran[:2] == ["step 0", "step 1"] and ran.index("other") == 2
    await task


async def test_finish_and_finish_async_give_the_same_answer(fake_clock: list[float]) -> None:
    log_sync: list[int] = []
    log_async: list[int] = []
    fake_clock[0] = 0.0

    def ticking() -> Steps[int]:
        total = yield from _counting(50, log_async)
        fake_clock[0] += 1.0
        return total

    assert finish(_counting(50, log_sync)) == await finish_async(ticking()) == sum(range(50))
    assert log_sync == log_async


async def test_the_collector_is_paused_while_long_work_runs_and_restored_after(
    fake_clock: list[float],
) -> None:
    assert gc.isenabled()
    seen: list[bool] = []

    def long_work() -> Steps[None]:
        for _ in range(3):
            seen.append(gc.isenabled())
            fake_clock[0] += 1.0  # every slice takes its time: the work yields
            yield

    await finish_async(long_work())
    assert seen == [True, False, False]  # paused from the first yield on
    assert gc.isenabled()

    def failing() -> Steps[None]:
        fake_clock[0] += 1.0
        yield
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await finish_async(failing())
    assert gc.isenabled()


def test_collector_paused_nests_and_leaves_a_collector_it_did_not_pause_alone() -> None:
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer work still runs
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # the process turned it off: it stays off
    finally:
        gc.enable()


def test_collector_paused_keeps_what_the_process_froze() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_paused():
            assert gc.isenabled()  # a process that freezes objects tunes its collector itself
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_what_long_work_made_leaves_the_young_generations() -> None:
    gc.collect()
    with collector_paused():
        made = [[i] for i in range(10_000)]
    assert gc.get_count()[0] < 10_000  # moved to the oldest generation, not walked
    assert gc.get_freeze_count() == 0 and made[-1] == [9_999]


def test_emptied_lets_a_long_list_go_a_slice_at_a_time() -> None:
    rows = [(i, str(i)) for i in range(2 * MAX_SLICE_ITEMS + 5)]
    steps = emptied(rows)
    left = []
    for _ in steps:
        left.append(len(rows))
    assert left == [MAX_SLICE_ITEMS + 5, 5] and rows == []
    short = [1, 2, 3]
    assert list(emptied(short)) == [] and short == []
