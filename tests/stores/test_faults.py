"""Faults (issue 11, acceptance 2): kills, a server restart and contention lose nothing.

* SQLite: a writer process is SIGKILLed 25 times at random points and
  restarted; it re-appends its whole stream (appends are idempotent on their
  derivation keys). Every acknowledged append is stored exactly once, the
  sequences have no gap, the file passes ``integrity_check``.
* PostgreSQL: the server is shut down (immediately, as in a crash) in the
  middle of a stream of appends and started again. The writer sees only the
  retryable ``StoreUnavailable`` and retries; nothing acknowledged is lost or
  stored twice.
* PostgreSQL: eight writer processes on one session, half of them appending
  inside ``store.transaction()`` (holding the session's next sequence until
  they commit): no append fails (no starvation), every acknowledged event is
  stored once, sequences run 1..N.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import ctxengine
from ctxengine.errors import StoreUnavailable
from ctxengine.stores import open_store
from ctxengine.stores.events import NewEvent
from storekit import PostgresServer, StoreCase, postgres_bin

TYPE = "context.working_state.updated"
KILLS = 25
STREAM = 1500  # events the killed writer appends (again and again, idempotently)

KILLED_WRITER = """
import asyncio, json, sys
from ctxengine.stores import open_store
from ctxengine.stores.events import NewEvent

url, count = sys.argv[1], int(sys.argv[2])
T = "context.working_state.updated"

async def main() -> None:
    store = await open_store(url)
    for i in range(count):
        event = await store.events.append(NewEvent("killed", T, {"i": i}, f"k{i}"))
        print(json.dumps([f"k{i}", event.sequence]), flush=True)
    await store.close()

asyncio.run(main())
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    package_root = str(Path(next(iter(ctxengine.__path__))).parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    return env


def _acks(out: str) -> list[tuple[str, int]]:
    acks = []
    for line in out.splitlines():
        try:
            key, sequence = json.loads(line)
        except ValueError:  # the last line may be cut by the kill
            continue
        acks.append((key, sequence))
    return acks


async def test_sigkill_a_sqlite_writer_25_times(tmp_path: Path) -> None:
    path = tmp_path / "killed.db"
    url = f"sqlite:///{path}"
    await (await open_store(url)).close()  # the schema exists before the first kill
    rng = random.Random(11)
    acked: dict[str, set[int]] = {}
    for attempt in range(KILLS + 1):
        proc = subprocess.Popen(
            [sys.executable, "-c", KILLED_WRITER, url, str(STREAM)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        assert proc.stdout is not None
        lines: list[str] = []
        if attempt < KILLS:
            # Kill while new events are being written: a random number of acks past what
            # is already stored (the writer re-appends the stored ones first, idempotently).
            target = len(acked) + rng.randint(1, 40)
            while len(lines) < target:
                line = proc.stdout.readline()
                if not line:
                    break
                lines.append(line)
            proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
        lines.append(out)
        if attempt == KILLS:
            assert proc.returncode == 0, err
        else:
            assert proc.returncode == -signal.SIGKILL, f"attempt {attempt} ended before its kill: {err}"
        for key, sequence in _acks("".join(lines)):
            acked.setdefault(key, set()).add(sequence)
    store = await open_store(url)
    try:
        events = await store.events.read("killed")
    finally:
        await store.close()
    assert [e.sequence for e in events] == list(range(1, STREAM + 1))
    stored = {e.derivation_key: e.sequence for e in events}
    assert len(stored) == STREAM
    for key, sequences in acked.items():
        assert sequences == {stored[key]}, key  # acknowledged once, stored once, same row
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        conn.close()


@pytest.fixture
def private_postgres() -> PostgresServer:
    """A PostgreSQL server of the test's own (it is shut down mid-test), committing durably."""
    bin_dir = postgres_bin()
    if bin_dir is None:
        if os.environ.get("CTXENGINE_REQUIRE_POSTGRES") == "1":
            pytest.fail("PostgreSQL server binaries not found, and CTXENGINE_REQUIRE_POSTGRES=1")
        pytest.skip("PostgreSQL server binaries not found")
    server = PostgresServer(bin_dir, Path(tempfile.mkdtemp(prefix="ctxengine-pg-fault-")), durable=True)
    server.start()
    try:
        yield server  # type: ignore[misc]
    finally:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)


async def test_postgres_shut_down_and_restarted_mid_stream(private_postgres: PostgresServer) -> None:
    server = private_postgres
    store = await open_store(server.dsn, timeout=2.0)
    acked: dict[str, int] = {}
    retried: list[type[BaseException]] = []
    total = 300

    async def writer() -> None:
        for i in range(total):
            key = f"k{i}"
            while True:
                try:
                    event = await store.events.append(NewEvent("restart", TYPE, {"i": i}, key))
                except StoreUnavailable as exc:
                    retried.append(type(exc))  # the only error a restart may cause
                    await asyncio.sleep(0.05)
                    continue
                acked[key] = event.sequence
                break
            await asyncio.sleep(0.002)

    async def chaos() -> None:
        while len(acked) < total // 3:
            await asyncio.sleep(0.01)
        await asyncio.to_thread(server.stop)
        await asyncio.sleep(0.5)
        await asyncio.to_thread(server.restart)

    try:
        await asyncio.wait_for(asyncio.gather(writer(), chaos()), timeout=180)
        events = await store.events.read("restart")
    finally:
        await store.close()
    assert retried, "the restart never reached the writer"
    assert set(retried) == {StoreUnavailable}
    assert [e.sequence for e in events] == list(range(1, total + 1))
    assert {e.derivation_key: e.sequence for e in events} == acked


CONTENDED_WRITER = """
import asyncio, json, os, sys, time
from ctxengine.stores import open_store
from ctxengine.stores.events import NewEvent

url, worker, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
T = "context.working_state.updated"
in_transactions = worker % 2 == 0

async def main() -> None:
    store = await open_store(url)
    while not os.path.exists(go):
        time.sleep(0.005)
    for batch in range(10):
        keys = [f"w{worker}:{batch}:{j}" for j in range(3)]
        if in_transactions:
            async with store.transaction():
                for key in keys:
                    await store.events.append(NewEvent("contended", T, {"k": key}, key))
                    await asyncio.sleep(0.002)  # hold the session a little
            for key in keys:  # acknowledged once the transaction has committed
                print(json.dumps(key), flush=True)
        else:
            for key in keys:
                await store.events.append(NewEvent("contended", T, {"k": key}, key))
                print(json.dumps(key), flush=True)
    await store.close()

asyncio.run(main())
"""


async def test_eight_postgres_writers_half_in_transactions_never_starve(
    store_case_factory: Callable[[str], StoreCase], tmp_path: Path
) -> None:
    case = store_case_factory("postgres")
    store = await case.open()
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CONTENDED_WRITER, case.url, str(w), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        for w in range(8)
    ]
    time.sleep(0.5)
    go.touch()
    acked: list[str] = []
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err  # no append failed: no starvation, no untyped error
        acked += [json.loads(line) for line in out.splitlines()]
    events = await store.events.read("contended")
    assert [e.sequence for e in events] == list(range(1, 8 * 30 + 1))
    assert sorted(e.derivation_key for e in events) == sorted(acked)
    assert len(set(acked)) == len(acked) == 8 * 30
    # A transaction's three appends got consecutive sequences: the session was held.
    by_key = {e.derivation_key: e.sequence for e in events}
    for worker in range(0, 8, 2):
        for batch in range(10):
            seqs = [by_key[f"w{worker}:{batch}:{j}"] for j in range(3)]
            assert seqs == list(range(seqs[0], seqs[0] + 3))
    await case.close_all()
