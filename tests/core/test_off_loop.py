"""``core.slices``, third pass (issue 37 finding 9, issue 40): a call no slice can cut runs
off the event loop (``OffLoop``, ``off_loop``), and a yield lets the loop run what came due
before the work goes on (``give_back``)."""

from __future__ import annotations

import asyncio
import threading
import time

from ctxengine.core import slices
from ctxengine.core.slices import Steps, finish, finish_async, give_back, offloaded, pause


def _thread_steps(log: list[str]) -> Steps[tuple[int, int]]:
    log.append("before")
    yield
    ident = yield from offloaded(threading.get_ident)
    log.append("after")
    return ident, threading.get_ident()


async def test_an_off_loop_call_runs_in_place_in_one_go_and_on_a_worker_thread_in_slices() -> None:
    sync_log: list[str] = []
    async_log: list[str] = []
    here = threading.get_ident()
    assert finish(_thread_steps(sync_log)) == (here, here)
    called, resumed = await finish_async(_thread_steps(async_log))
    assert called != here and resumed == here  # the steps themselves stay on the loop's thread
    assert sync_log == async_log == ["before", "after"]


async def test_an_off_loop_call_keeps_the_loop_running() -> None:
    ticks: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            ticks.append(time.perf_counter())
            await asyncio.sleep(0.001)

    def blocking() -> Steps[str]:
        out: str = yield from offloaded(lambda: time.sleep(0.05) or "slept")
        return out

    task = asyncio.get_running_loop().create_task(ticker())
    await asyncio.sleep(0)
    assert await finish_async(blocking()) == "slept"
    done.set()
    await task
    assert len(ticks) >= 5  # the loop ticked while the call ran


def _busy_until_due(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def test_a_yield_lets_a_task_a_timer_woke_run_before_the_next_slice() -> None:
    """One ``asyncio.sleep(0)`` puts the work ahead of a task whose timer came due while it
    ran (the timer resolves a future, which schedules the task a pass later): the next slice
    would run first, and two slices would block the loop as one."""
    order: list[str] = []

    async def sleeper() -> None:
        await asyncio.sleep(0.001)
        order.append("timer task")

    def steps() -> Steps[None]:
        for i in range(3):
            _busy_until_due(0.003)  # the sleeper's timer comes due meanwhile
            order.append(f"slice {i}")
            yield

    task = asyncio.get_running_loop().create_task(sleeper())
    await asyncio.sleep(0)  # the sleeper's timer is set
    await finish_async(steps())
    await task
    assert order.index("timer task") == 1, order


async def test_pause_gives_back_for_long_work_only() -> None:
    order: list[str] = []

    async def other() -> None:
        order.append("other")

    async def work(size: int) -> None:
        await pause(size)
        order.append(f"work {size}")

    task = asyncio.get_running_loop().create_task(other())
    await work(slices.SLICE_ITEMS)  # short: no yield
    await task
    assert order == [f"work {slices.SLICE_ITEMS}", "other"]
    order.clear()
    task = asyncio.get_running_loop().create_task(other())
    await work(slices.SLICE_ITEMS + 1)
    await task
    assert order == ["other", f"work {slices.SLICE_ITEMS + 1}"]


async def test_give_back_returns_to_the_same_task() -> None:
    here = asyncio.current_task()
    await give_back()
    assert asyncio.current_task() is here
