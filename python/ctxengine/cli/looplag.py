"""How long the engine holds the event loop (issue 37, finding 9; issue 40): a loop-lag
probe, and the sessions it is measured on.

``LoopLag`` runs a task beside the code under test that sleeps 1 ms in a loop and keeps the
largest gap between two of its wake-ups: the longest stretch the event loop could not run
anything else (a request of another session, a heartbeat, a lease renewal). ``measure``
takes the largest gap over one awaited call; ``collections`` are the cyclic collector's
passes meanwhile (each stops every thread: they are in the gaps too, and say how much of
a gap was the collector's).

``imported_session`` writes the session a worker meets when a long foreign history was
imported and never compacted: ``items`` conversation items appended in batches without
token counts (nobody rendered them), a plan for a 200k model, and a user message no run has
picked up yet. ``blocks`` measures what a fresh worker does with it: ``pick_up``,
``build_with_pressure`` (which compacts), ``session_history`` and ``events.read``.
``first_exact`` measures a fresh process's first turn with exact counting (``o200k_base``):
the store's open, the pick-up and the first build, which compacts.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from ..model import ResolvedModel, UserMessage
from ..runtime.session import ITEM_APPENDED, item_payload
from ..stores.events import NewEvent, Store, Visibility
from .turns import AGENT, MODEL, POLICY_VERSION, PRINCIPAL, TOOLS, ScriptedWorker

T = TypeVar("T")

#: The probe's sleep between wake-ups (seconds).
TICK = 0.001
#: Items appended per transaction by ``imported_session``.
BATCH = 2_000


class Block(NamedTuple):
    """One call's largest event-loop block (seconds): the largest gap, the same less the
    collector's passes in it (what the call held the loop for), the longest collector pass,
    and the most CPU time the loop's thread spent between two wake-ups (``cpu``: what the
    loop's own work took, whatever else the machine ran meanwhile)."""

    largest: float
    held: float
    collector: float
    cpu: float = 0.0

    def ms(self) -> dict[str, float]:
        return {name: round(value * 1000, 1) for name, value in self._asdict().items()}


@dataclass
class LoopLag:
    """The largest gap between the wake-ups of a task sleeping ``tick`` seconds in a loop,
    while the probe runs (``running``); ``gaps`` keeps every gap over ``keep`` seconds.
    ``held`` is the largest gap less the collector's passes inside it: how long the code
    under test held the loop itself."""

    tick: float = TICK
    keep: float = 0.010
    largest: float = 0.0
    #: The most CPU time of the loop's thread between two wake-ups (``time.thread_time``):
    #: the work that held the loop, without the time other processes of a loaded machine
    #: took the core from it (a block measured by the clock counts both).
    cpu: float = 0.0
    gaps: list[float] = field(default_factory=list)
    #: ``(generation, seconds)`` of each pass of the cyclic collector while the probe ran.
    collections: list[tuple[int, float]] = field(default_factory=list)
    _passes: list[tuple[float, float]] = field(default_factory=list)
    _spans: list[tuple[float, float]] = field(default_factory=list)

    @property
    def collector(self) -> float:
        """The longest pass of the cyclic collector while the probe ran (seconds)."""
        return max((seconds for _, seconds in self.collections), default=0.0)

    @contextmanager
    def running(self) -> Iterator[LoopLag]:
        """Probe the running event loop while the block runs (the block must await, so
        the probe gets its first wake-up; the gap ends at the probe's last wake-up or at
        the block's end, whichever is later)."""
        last = time.perf_counter()
        used = time.thread_time()

        async def tick() -> None:
            nonlocal last, used
            while True:
                await asyncio.sleep(self.tick)
                self._saw(last, now := time.perf_counter())
                self.cpu = max(self.cpu, (cpu := time.thread_time()) - used)
                last, used = now, cpu

        started = 0.0

        def collected(phase: str, info: dict[str, int]) -> None:
            nonlocal started
            if phase == "start":
                started = time.perf_counter()
            else:
                ended = time.perf_counter()
                self.collections.append((info["generation"], ended - started))
                self._passes.append((started, ended))

        task = asyncio.get_running_loop().create_task(tick())
        gc.callbacks.append(collected)
        try:
            yield self
        finally:
            gc.callbacks.remove(collected)
            task.cancel()
            self._saw(last, time.perf_counter())
            self.cpu = max(self.cpu, time.thread_time() - used)

    def _saw(self, last: float, now: float) -> None:
        gap = now - last
        self.largest = max(self.largest, gap)
        if gap > 2 * self.tick:
            self._spans.append((last, now))
        if gap > self.keep:
            self.gaps.append(gap)

    @property
    def held(self) -> float:
        """The largest gap less the collector's passes inside it (seconds)."""
        return max(
            (
                (now - last) - sum(max(0.0, min(now, end) - max(last, start)) for start, end in self._passes)
                for last, now in self._spans
            ),
            default=0.0,
        )

    def block(self) -> Block:
        """The last measurement."""
        return Block(self.largest, self.held, self.collector, self.cpu)

    async def measure(self, call: Callable[[], Awaitable[T]]) -> T:
        """Await ``call()`` under the probe (a fresh measurement: ``largest`` is reset)."""
        self.largest = 0.0
        self.cpu = 0.0
        self.gaps = []
        self.collections = []
        self._passes = []
        self._spans = []
        with self.running():
            await asyncio.sleep(0)  # the probe's task starts before the call runs
            return await call()


async def imported_session(
    store: Store, session_id: str, items: int, *, model: ResolvedModel | None = None
) -> int:
    """Write an imported, never compacted history of ``items`` items (no token counts) with a
    plan for ``MODEL``, and a user message after it; returns the message's sequence (the
    seed of the run a worker picks up)."""
    from .bench_first import history_items

    worker = ScriptedWorker(store, owner="import")
    await worker.planner.plan(
        session_id, AGENT, PRINCIPAL, model or MODEL, TOOLS, policy_version=POLICY_VERSION
    )
    history = history_items(items, session_id)
    for start in range(0, len(history), BATCH):
        events = [
            NewEvent(
                session_id,
                ITEM_APPENDED,
                item_payload(item),
                f"import:{session_id}:{start + i}",
                visibility=Visibility.session(),
            )
            for i, item in enumerate(history[start : start + BATCH])
        ]
        async with store.transaction():
            await store.events.append_all(events)
    message = UserMessage("Where did we leave the comparison?", principal_id=PRINCIPAL.principal_id)
    new = NewEvent(
        session_id,
        ITEM_APPENDED,
        item_payload(message),
        f"import:{session_id}:seed",
        visibility=Visibility.session(),
    )
    stored = await store.events.append(new)
    return stored.sequence


#: The calls ``blocks`` measures, in order.
CALLS = ("pick_up", "build_with_pressure", "session_history", "events.read")


class Heap:
    """The objects the cyclic collector tracks (each full pass walks them all, and those that
    survive since the last pass decide when the next one runs): ``counts`` has the process's
    total after each call (its result held) and ``added`` how many more than before it (net),
    keyed as ``blocks``' calls, with ``before`` (the fresh worker, before the first). Counting
    runs no collection: one outside the calls would move the next one."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.added: dict[str, int] = {}
        self._last = 0

    def start(self) -> None:
        self.counts["before"] = self._last = len(gc.get_objects())

    def saw(self, call: str) -> None:
        self.counts[call] = now = len(gc.get_objects())
        self.added[call] = now - self._last
        self._last = now

    def figures(self) -> dict[str, dict[str, int]]:
        return {"tracked": dict(self.counts), "added": dict(self.added)}


async def blocks(
    store: Store, session_id: str, seed: int, *, run_id: str = "picked", heap: Heap | None = None
) -> dict[str, Block]:
    """The largest event-loop block (seconds) of each of ``CALLS`` by a worker that has never
    seen the session: pick the run at ``seed`` up, build its first request (compacting), read
    the session's history and its whole log. ``heap`` counts the collector's objects after
    each call, outside the measured calls."""
    from ..model import RunContext
    from ..runtime.session import session_history

    worker = ScriptedWorker(store, owner="fresh")
    await worker.planner.current(session_id)
    probe = LoopLag()
    out: dict[str, Block] = {}
    run = RunContext(run_id, session_id, seed)

    def saw(call: str) -> None:
        out[call] = probe.block()
        if heap is not None:
            heap.saw(call)

    if heap is not None:
        heap.start()
    started = await probe.measure(lambda: worker.loop.pick_up(run, PRINCIPAL, owner="fresh"))
    saw("pick_up")
    _, checkpoint = await probe.measure(
        lambda: worker.loop.build_with_pressure(
            run, started.checkpoint, AGENT, PRINCIPAL, lease=started.lease
        )
    )
    saw("build_with_pressure")
    if checkpoint.summary_depth < 1:
        raise AssertionError("the first request did not compact: the session is too short to measure")
    history = await probe.measure(lambda: session_history(store, session_id, seed))
    saw("session_history")
    del history
    events = await probe.measure(lambda: store.events.read(session_id))
    saw("events.read")
    del events
    return out


#: An exactly counted model (``o200k_base``) with a window a 2,000-item history overflows.
EXACT_MODEL = ResolvedModel("openai", "gpt-4o", 64_000, 4_096, 4_096)
#: The calls ``first_exact`` measures, in order.
FIRST_CALLS = ("open", "pick_up", "build_with_pressure")


async def first_exact(
    open_store: Callable[[], Awaitable[Store]], session_id: str, seed: int, *, run_id: str = "first-exact"
) -> dict[str, Block]:
    """The largest event-loop block (seconds) of a fresh worker's first turn of a session
    planned for ``EXACT_MODEL`` (written by ``imported_session(..., model=EXACT_MODEL)``):
    opening the store, picking the run at ``seed`` up and building its first request (which
    compacts). In a fresh process, the first exact count loads the tokenizer's table."""
    from ..model import RunContext

    probe = LoopLag()
    out: dict[str, Block] = {}
    store = await probe.measure(open_store)
    out["open"] = probe.block()
    try:
        worker = ScriptedWorker(store, owner="fresh", model=EXACT_MODEL)
        run = RunContext(run_id, session_id, seed)
        started = await probe.measure(lambda: worker.loop.pick_up(run, PRINCIPAL, owner="fresh"))
        out["pick_up"] = probe.block()
        _, checkpoint = await probe.measure(
            lambda: worker.loop.build_with_pressure(
                run, started.checkpoint, AGENT, PRINCIPAL, lease=started.lease
            )
        )
        out["build_with_pressure"] = probe.block()
        if checkpoint.summary_depth < 1:
            raise AssertionError("the first request did not compact: the session is too short to measure")
    finally:
        await store.close()
    return out


async def probe(
    directory: Path, items: int = 20_000, kinds: Sequence[str] = ("sqlite", "memory")
) -> dict[str, Any]:
    """The figures of ``python -m ctxengine.cli.looplag``: a fresh worker's first exact turn
    (``first_exact``, 2,000 items, SQLite: the 5 ms target) and ``blocks`` of an imported,
    never compacted session of ``items`` items on each store kind (the 20 ms target), in ms,
    with the collector's objects after each call (``Heap``: ``heap_<items>_<kind>``)."""
    from ..core import backends
    from ..stores import open_store

    exact = f"sqlite:///{directory / 'exact.db'}"
    store = await open_store(exact)
    try:
        seed = await imported_session(store, "exact", 2_000, model=EXACT_MODEL)
    finally:
        await store.close()
    out: dict[str, Any] = {"backend": backends.backend()}
    found = await first_exact(lambda: open_store(exact), "exact", seed)
    out["first_exact"] = {call: block.ms() for call, block in found.items()}
    for kind in kinds:
        url = "memory://" if kind == "memory" else f"sqlite:///{directory / 'imported.db'}"
        store = await open_store(url)
        try:
            seed = await imported_session(store, "imported", items)
            if kind != "memory":  # a fresh worker: nothing of the session cached
                await store.close()
                store = await open_store(url)
            heap = Heap()
            found = await blocks(store, "imported", seed, heap=heap)
        finally:
            await store.close()
        out[f"imported_{items}_{kind}"] = {call: block.ms() for call, block in found.items()}
        out[f"heap_{items}_{kind}"] = heap.figures()
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """Print ``probe``'s figures as one JSON object."""
    parser = argparse.ArgumentParser(prog="python -m ctxengine.cli.looplag", description=probe.__doc__)
    parser.add_argument("--items", type=int, default=20_000, help="items of the imported session")
    parser.add_argument("--store", action="append", choices=["sqlite", "memory"], help="store kinds")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as directory:
        found = asyncio.run(probe(Path(directory), args.items, args.store or ("sqlite", "memory")))
    print(json.dumps(found, indent=1))


__all__ = [
    "BATCH",
    "CALLS",
    "Block",
    "EXACT_MODEL",
    "FIRST_CALLS",
    "Heap",
    "TICK",
    "LoopLag",
    "blocks",
    "first_exact",
    "imported_session",
    "main",
    "probe",
]


if __name__ == "__main__":
    main()
