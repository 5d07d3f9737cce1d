"""Long work in slices that give the event loop back (issue 37, finding 9; ADR 0016).

A worker serves every session it holds from one event loop. Decoding,
rendering, counting and compacting are linear in a session's history: well
under a millisecond for an ordinary turn, hundreds of milliseconds for an
imported history of 20,000 items that was never compacted, during which no
other session's request, heartbeat or lease renewal runs.

Such work is written once, as a generator that ``yield``s between slices
(``Steps``): ``finish`` runs it to its end in one go (the synchronous API, and
every small input), ``finish_async`` gives the loop back (``give_back``) at a yield
once ``SLICE_SECONDS`` have passed since the loop last ran (so work that
ends sooner never yields, and an ordinary turn pays one clock read per
slice). The slices never change what is computed: the steps keep their
state to themselves and write the caller's state once, at their end.
``batches`` calls a function that maps each item on its own over a slice of
the items at a time (a native batch call holds the loop to its end), as many
as the last slice took ``SLICE_SECONDS`` for. One long call that cannot be cut
(a large payload's canonical JSON, decoded back) runs on a worker thread
(``off_loop``).

The cyclic collector is paused while long work runs (``collector_paused``, the one
place that tunes it): a session's window is built of hundreds of thousands of
acyclic objects, and while the heap grows by them the collector's full passes
(a walk of every object of the process, 30-70 ms with a 20,000-item window)
come one after another. When the last long work ends, what it made is moved
to the oldest generation as it is (``gc.freeze()`` then ``gc.unfreeze()``:
no walk), where the next full pass finds it in its own time, and the
collector runs again. A process that froze objects itself, or runs with the
collector off, is left as it is.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from time import perf_counter
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class OffLoop(NamedTuple):
    """What a step yields to have ``fn()`` run off the event loop: ``finish_async`` runs it
    on a worker thread (``off_loop``), ``finish`` in place; its result is sent back to the
    step (``offloaded``)."""

    fn: Callable[[], Any]


#: Work that yields where the loop may run (``None``) or a call to make off it (an ``OffLoop``;
#: typed ``Any``, so that a bare ``yield`` stays one), and returns ``R``.
Steps = Generator[Any, Any, R]

#: Items of the first call of a batch function (``batches``): a few tenths of a millisecond
#: of native decoding or rendering, a few milliseconds of exact counting, on the Rust backend.
SLICE_ITEMS = 256
#: The most items a call of ``batches`` takes.
MAX_SLICE_ITEMS = 1024
#: How long sliced work holds the loop before it yields (seconds).
SLICE_SECONDS = 0.001


def offloaded(fn: Callable[[], T]) -> Steps[T]:
    """``fn()`` as a step, run off the event loop by ``finish_async`` (``OffLoop``): for one
    long call over values no other task changes, which no slice can cut."""
    result: T = yield OffLoop(fn)
    return result


def finish(steps: Steps[R]) -> R:
    """Run ``steps`` to the end without yielding (an ``OffLoop`` call in place); its result."""
    sent: Any = None
    while True:
        try:
            request = steps.send(sent)
        except StopIteration as done:
            result: R = done.value
            return result
        sent = None if request is None else request.fn()


async def finish_async(steps: Steps[R]) -> R:
    """Run ``steps`` to the end, giving the event loop back at a yield once
    ``SLICE_SECONDS`` have passed since it last ran, and running an ``OffLoop`` call on a
    worker thread (the collector paused from the first of either on: ``collector_paused``);
    its result."""
    clock = perf_counter
    until = clock() + SLICE_SECONDS
    sent: Any = None
    while True:
        try:
            request = steps.send(sent)
        except StopIteration as done:
            result: R = done.value
            return result
        sent = None
        if request is not None or clock() >= until:
            break
    with collector_paused():
        while True:
            if request is None:
                await give_back()
            else:
                sent = await off_loop(request.fn)
            until = clock() + SLICE_SECONDS
            while True:
                try:
                    request = steps.send(sent)
                except StopIteration as done:
                    result = done.value
                    return result
                sent = None
                if request is not None or clock() >= until:
                    break


#: Passes of the event loop a yield waits for (``give_back``).
PASSES = 3


async def give_back() -> None:
    """Let the event loop run what came due while this task held it, before it goes on.

    One ``asyncio.sleep(0)`` is not enough: it puts this task at the head of the loop's next
    pass, ahead of the timers and I/O that came due meanwhile, and a task they wake runs
    two passes later still (the timer or the I/O callback resolves a future, whose callback
    schedules the task): the next stretch of this work would run first, and the two
    stretches would block the loop as one."""
    for _ in range(PASSES):
        await asyncio.sleep(0)


async def pause(size: int) -> None:
    """Give the event loop back (``give_back``) between two stretches of work over ``size``
    items when they are many (more than ``SLICE_ITEMS``): an ordinary turn does not yield
    here."""
    if size > SLICE_ITEMS:
        await give_back()


async def off_loop(fn: Callable[[], R]) -> R:
    """``fn()`` on a worker thread, the event loop running meanwhile; its result.

    For one long call over values no other task changes (a large payload encoded, hashed
    or decoded back): it cannot be cut into slices, but while the thread runs Python code
    the interpreter hands the loop the GIL at least every ``sys.getswitchinterval()``
    (5 ms by default), and between the native calls that hold it (a ``json.loads`` holds
    it to its end). The context (``contextvars``) goes with it."""
    return await asyncio.to_thread(fn)


#: Long work running now (``collector_paused``), and whether it paused the collector.
_paused = 0
_disabled = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector paused while long work runs (see the module); the work may
    await. The first to enter pauses it, the last to leave moves what was made to the oldest
    generation and starts it again."""
    global _paused, _disabled
    if _paused == 0:
        _disabled = gc.isenabled() and gc.get_freeze_count() == 0
        if _disabled:
            gc.disable()
    _paused += 1
    try:
        yield
    finally:
        _paused -= 1
        if _paused == 0 and _disabled:
            _disabled = False
            if gc.get_freeze_count() == 0:  # (nobody froze objects meanwhile)
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def batches(
    fn: Callable[[Sequence[T]], list[R]], items: Sequence[T], size: int | None = None
) -> Steps[list[R]]:
    """``fn(items)`` for a ``fn`` that maps each item on its own, yielding between calls: the
    first call takes ``size`` (``SLICE_ITEMS``) items (all of them, and no yield, when there
    are no more), each next one as many as the last took ``SLICE_SECONDS`` for (an exact
    count costs ten times a render an item), up to ``MAX_SLICE_ITEMS``."""
    if size is None:
        size = SLICE_ITEMS
    if len(items) <= size:
        return fn(items)
    out: list[R] = []
    start = 0
    while start < len(items):
        if start:
            yield
        began = perf_counter()
        part = items[start : start + size]
        out.extend(fn(part))
        start += len(part)
        took = perf_counter() - began
        if took > 0:
            size = max(1, min(MAX_SLICE_ITEMS, size * 4, int(len(part) * SLICE_SECONDS / took)))
    return out


def emptied(items: list[Any]) -> Steps[None]:
    """Empty ``items`` from its end, ``MAX_SLICE_ITEMS`` at a time, yielding between: the
    last reference to a long read's rows (20,000 rows of eleven columns take 5 ms to free
    in one go)."""
    while len(items) > MAX_SLICE_ITEMS:
        del items[-MAX_SLICE_ITEMS:]
        yield
    items.clear()


__all__ = [
    "MAX_SLICE_ITEMS",
    "OffLoop",
    "SLICE_ITEMS",
    "SLICE_SECONDS",
    "Steps",
    "batches",
    "collector_paused",
    "emptied",
    "finish",
    "finish_async",
    "give_back",
    "off_loop",
    "offloaded",
    "pause",
]
