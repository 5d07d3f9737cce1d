"""The first request of a new run, in a fresh process (issue 13, acceptance 1).

A runtime hands any run to any worker. The worker has never seen the session:
it opens the store, reads the current plan, claims the run and seeds version 1
from the log (``pick_up``: one transaction) and builds the first request. ``build_fixture`` writes a session
of about N events the way earlier runs would have left it (items with their
token counts, the last few turns taken by the scripted worker, which compacts
and records a carry once the history outgrows the 200k window) plus the new
run's user message; ``measure`` runs the first request in a new interpreter
each time and reports the phases' medians.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model import AssistantMessage, ConversationItem, ToolCall, ToolResult, UserMessage
from ..stores import open_store
from .turns import AGENT, MODEL, POLICY_VERSION, PRINCIPAL, TOOLS, ScriptedWorker, bulk_history, text

#: Real turns at the end of every fixture (their runs compact and carry when needed).
TAIL_TURNS = 12
#: About this many events per scripted turn (user, call, result, reply, seeded, ...).
EVENTS_PER_TURN = 5


@dataclass(frozen=True, slots=True)
class Fixture:
    url: str
    session_id: str
    seed_sequence: int
    events: int
    carries: int


def history_items(n: int, tag: str) -> list[ConversationItem]:
    """``n`` items cycling user, tool call, tool result, assistant (200-500 bytes each)."""
    import random

    rng = random.Random(tag)
    out: list[ConversationItem] = []
    while len(out) < n:
        turn = len(out) // 4
        phase = len(out) % 4
        if phase == 0:
            out.append(UserMessage(f"[{tag} {turn}] " + text(rng, 200, 400), principal_id="alice"))
        elif phase == 1:
            out.append(ToolCall(f"{tag}-{turn}", "search", {"q": text(rng, 40, 120)}))
        elif phase == 2:
            out.append(ToolResult(f"{tag}-{turn}", text(rng, 300, 500)))
        else:
            out.append(AssistantMessage(text(rng, 200, 450)))
    while out and isinstance(out[-1], ToolCall):
        out.pop()
    return out


async def build_fixture(url: str, session_id: str, events: int) -> Fixture:
    """A session of about ``events`` events whose newest run has not started yet."""
    options: dict[str, Any] = {"synchronous": "NORMAL"} if url.startswith("sqlite") else {}
    store = await open_store(url, **options)
    try:
        worker = ScriptedWorker(store, owner="fixture")
        await worker.planner.plan(session_id, AGENT, PRINCIPAL, MODEL, TOOLS, policy_version=POLICY_VERSION)
        bulk = max(0, events - 2 - TAIL_TURNS * EVENTS_PER_TURN)
        if bulk:
            await bulk_history(store, session_id, history_items(bulk, session_id), estimator=worker.estimator)
            if url.startswith("postgres"):
                await _analyze(url)  # as autovacuum would, soon after a bulk load
        for turn in range(1, TAIL_TURNS + 1):
            await worker.turn(session_id, turn)
        seed = await worker_seed(worker, session_id)
        every = await store.events.read(session_id)
        if url.startswith("postgres"):
            await _analyze(url)  # a live database has its statistics; a fresh bulk load has none
        carries = sum(1 for e in every if e.type == "context.carry.recorded")
    finally:
        await store.close()
    if url.startswith("sqlite"):
        # A deployed store's file and directory reached the disk long before a worker starts;
        # a fixture made a moment ago has not, and SQLite's first open then paid for the
        # file system committing the new directory (about 1 ms, or not, by the journal's clock).
        os.sync()
    return Fixture(url, session_id, seed, len(every), carries)


async def worker_seed(worker: ScriptedWorker, session_id: str) -> int:
    """Append the measured run's user message (as the runtime would, with its count)."""
    from ..runtime.session import append_item

    item = await append_item(
        worker.store,
        session_id,
        UserMessage("What is the state of the comparison, in one table?", principal_id="alice"),
        principal=PRINCIPAL,
        derivation_key=f"user:{session_id}:measured",
        estimator=worker.estimator,
        model_id=MODEL.model_id,
    )
    assert item.seq is not None
    return item.seq


async def _analyze(url: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("ANALYZE")


FIRST_REQUEST = """
import asyncio, json, sys, time
t0 = time.perf_counter()
import ctxengine as ce
from ctxengine.cli.turns import AGENT, PRINCIPAL, ScriptedWorker
imported = time.perf_counter()

url, session, seed, run_id, backend = sys.argv[1:6]
# The store's driver is imported when a store of its kind first opens (``import ctxengine``
# does not import psycopg, issue 40); a worker imports it once, at start: timed on its own.
t1 = time.perf_counter()
if not url.startswith(("sqlite:", "memory:")):
    import ctxengine.stores.postgres
driver = time.perf_counter() - t1

async def main() -> None:
    ce.use_backend(backend)
    start = time.perf_counter()
    store = await ce.open_store(url)
    worker = ScriptedWorker(store, owner="fresh")
    opened = time.perf_counter()
    await worker.planner.current(session)
    planned = time.perf_counter()
    run = ce.RunContext(run_id, session, int(seed))
    run, lease, cp = await worker.loop.pick_up(run, PRINCIPAL, owner="fresh")  # claim + version 1
    seeded = time.perf_counter()
    request, cp = await worker.loop.build_with_pressure(run, cp, AGENT, PRINCIPAL, lease=lease)
    built = time.perf_counter()
    again = time.perf_counter()
    worker.builder.build(run, cp, AGENT, PRINCIPAL)
    second = time.perf_counter() - again
    print(json.dumps({
        "import_ms": (imported - t0) * 1e3, "driver_import_ms": driver * 1e3,
        "open_ms": (opened - start) * 1e3,
        "plan_ms": (planned - opened) * 1e3, "seed_ms": (seeded - planned) * 1e3,
        "build_ms": (built - seeded) * 1e3, "first_ms": (built - start) * 1e3,
        "second_build_ms": second * 1e3, "history_items": len(cp.conversation) - 1,
        "summary": cp.compacted_summary is not None,
        "body_tokens": request.metadata["body_tokens"],
    }))
    await store.close()

asyncio.run(main())
"""


def _env() -> dict[str, str]:
    import ctxengine

    env = dict(os.environ)
    root = str(Path(next(iter(ctxengine.__path__))).parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def measure(fixture: Fixture, *, repeats: int = 7, backend: str = "rust") -> dict[str, float]:
    """Medians of ``repeats`` first requests, each in a new interpreter and a new run."""
    samples: list[dict[str, float]] = []
    for i in range(repeats):
        run_id = f"{fixture.session_id}-fresh-{backend}-{i}-{os.getpid()}"
        out = subprocess.run(
            [sys.executable, "-c", FIRST_REQUEST, fixture.url, fixture.session_id, str(fixture.seed_sequence),
             run_id, backend],
            capture_output=True, text=True, env=_env(), timeout=600, check=False,
        )  # fmt: skip
        if out.returncode != 0:
            raise RuntimeError(f"first request failed: {out.stderr[-2000:]}")
        samples.append(json.loads(out.stdout.strip().splitlines()[-1]))
    keys = [k for k, v in samples[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    result = {k: statistics.median(float(s[k]) for s in samples) for k in keys}
    result["first_ms_max"] = max(float(s["first_ms"]) for s in samples)
    result["summary"] = float(bool(samples[0]["summary"]))
    return result


def fixtures(url_of: Any, sizes: tuple[int, ...]) -> list[Fixture]:
    """One fixture per size; ``url_of(size)`` names its store."""
    return [asyncio.run(build_fixture(url_of(n), f"first-{n}", n)) for n in sizes]


__all__ = ["Fixture", "build_fixture", "fixtures", "history_items", "measure"]
