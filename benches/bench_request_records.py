"""What a request record costs (issue 42, ADR 0024): a scripted turn on SQLite with the
record written (format 6) and without (``WritePolicy(max_version=5)``), after 50 turns of
history, and the record's payload built on its own.

Run for real with ``make bench`` (or ``pytest benches/bench_request_records.py
--benchmark-enable``); the ADR's figures come from alternating the two stores turn by turn.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest

import ctxengine as ce
from ctxengine.cli.turns import ScriptedWorker
from ctxengine.runtime import loop_steps
from ctxengine.runtime.request_records import BuiltRequest, record_payload
from ctxengine.stores.formats import WritePolicy

HISTORY_TURNS = 50


def _worker(loop: asyncio.AbstractEventLoop, url: str, version: int) -> ScriptedWorker:
    store = loop.run_until_complete(ce.open_store(url, write_policy=WritePolicy(max_version=version)))
    worker = ScriptedWorker(store)
    for turn in range(1, HISTORY_TURNS + 1):
        loop.run_until_complete(worker.turn("bench", turn))
    return worker


@pytest.mark.parametrize("version", [5, 6], ids=["without", "with_records"])
def bench_turn_request_records(
    benchmark: Any, loop: asyncio.AbstractEventLoop, tmp_path: Path, version: int
) -> None:
    worker = _worker(loop, f"sqlite:///{tmp_path}/bench.db", version)
    turns = itertools.count(HISTORY_TURNS + 1)
    try:
        benchmark(lambda: loop.run_until_complete(worker.turn("bench", next(turns))))
        kinds = [e.type for e in loop.run_until_complete(worker.store.events.read("bench"))]
        assert ("context.request.recorded" in kinds) == (version == 6)
    finally:
        loop.run_until_complete(worker.store.close())


def bench_record_payload(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    worker = _worker(loop, "memory://", 6)
    built: list[BuiltRequest] = []
    keep = loop_steps.StepWrites._record

    def grab(self: Any, run: Any, memo: Any) -> Any:
        built.append(memo.built)
        return keep(self, run, memo)

    loop_steps.StepWrites._record = grab  # type: ignore[method-assign]
    try:
        loop.run_until_complete(worker.turn("bench", HISTORY_TURNS + 1))
    finally:
        loop_steps.StepWrites._record = keep  # type: ignore[method-assign]
    payload = benchmark(lambda: record_payload(built[-1], worker.builder, worker.estimator))
    assert payload["hashes"]["body"] == built[-1].assembly.request.metadata["body_sha256"]
