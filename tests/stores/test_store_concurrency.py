"""Eight processes appending to one session: every acknowledged append is stored
exactly once and sequences run 1..N with no gap (SQLite file and PostgreSQL)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import ctxengine
from storekit import StoreCase

WORKERS = 8
OWN_EVENTS = 25  # distinct keys per worker
SHARED_EVENTS = 5  # keys every worker appends with the same payload

# Each worker waits for the go file so that all eight append at once, then
# prints one JSON line per acknowledged append.
WORKER = """
import asyncio, json, os, sys, time
from ctxengine.stores.events import NewEvent
from ctxengine.stores import open_store

url, session, worker, own, shared, go = sys.argv[1:7]
worker, own, shared = int(worker), int(own), int(shared)

async def main() -> None:
    store = await open_store(url)
    while not os.path.exists(go):
        time.sleep(0.005)
    keys = [(f"w{worker}:{i}", {"worker": worker, "i": i}) for i in range(own)]
    # Interleave the shared keys into each worker's stream at different points.
    for j in range(shared):
        keys.insert((worker + j * 7) % (len(keys) + 1), (f"shared:{j}", {"shared": j}))
    for key, payload in keys:
        event = await store.events.append(
            NewEvent(session, "context.working_state.updated", payload, key, actor=f"worker-{worker}")
        )
        print(json.dumps({"key": key, "sequence": event.sequence}), flush=True)
    await store.close()

asyncio.run(main())
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    package_root = str(Path(next(iter(ctxengine.__path__))).parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    return env


async def _run_workers(case: StoreCase, tmp_path: Path) -> None:
    session = "shared-session"
    store = await case.open()  # creates the schema before the workers race
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKER,
                case.url,
                session,
                str(w),
                str(OWN_EVENTS),
                str(SHARED_EVENTS),
                str(go),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        for w in range(WORKERS)
    ]
    time.sleep(0.5)  # let the interpreters start and connect
    go.touch()
    acked: dict[str, set[int]] = {}
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        lines = [json.loads(line) for line in out.splitlines()]
        assert len(lines) == OWN_EVENTS + SHARED_EVENTS
        for line in lines:
            acked.setdefault(line["key"], set()).add(line["sequence"])

    events = await store.events.read(session)
    total = WORKERS * OWN_EVENTS + SHARED_EVENTS
    assert [e.sequence for e in events] == list(range(1, total + 1))
    stored = {e.derivation_key: e.sequence for e in events}
    assert len(stored) == total  # every key stored exactly once
    assert set(stored) == set(acked)
    for key, sequences in acked.items():
        # Every worker that appended a key was acknowledged with the one stored event.
        assert sequences == {stored[key]}, key
    await case.close_all()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_eight_processes_append_to_one_session(
    store_case_factory: Callable[[str], StoreCase], tmp_path: Path, kind: str
) -> None:
    await _run_workers(store_case_factory(kind), tmp_path)
