"""Write the golden fixtures of issue 10, with the code of the commit that added this file.

These fixtures are what users' stores look like today. They are NEVER
regenerated to make a failing golden test pass: a test that fails against
them means stored data would no longer read, a plan would rotate, or a
replay would differ. (A deliberate format change needs a new format
version, a migration and an ADR; the old fixtures keep passing.)

What it writes, into ``tests/golden/``:

* ``store-sqlite.db.xz``: a SQLite store (xz) holding
  - ``golden-demo``: the fifty-turn demo session (scripted model), with
    plans, compactions to depth 2, working-state updates, full and delta
    checkpoints, leases;
  - ``golden-openai``: twenty demo turns on an ``openai:`` model id (the
    token-accuracy work must keep rebuilding these requests the old way);
  - ``golden-extra``: three plan epochs (a rotation and a policy change), a
    fenced lease, working-state updates from the user and the model, the
    question lifecycle, a delta chain past a snapshot boundary, a pressure
    build;
  - ``phase-<stage>`` instances: the phase protocol stopped at every stage
    that exists today, and ``phase-full`` through every operation.
* ``store-postgres.sql.xz``: the same content written to PostgreSQL, as a
  plain ``pg_dump``.
* ``requests.json.xz``: every request the sessions sent, with the inputs to
  rebuild it (run, principal, clock, checkpoint, estimator snapshot, plan
  epoch and prefix hash) and its three provider payloads.
* ``expected.json``: what reading each store must give (events, history,
  latest checkpoints, carried working state, plans, phase states and every
  projection each instance can compile).
* ``vectors.json``: canonical bytes and digests of every value type in
  several shapes.
* ``estimator-snapshot.json``: the demo estimator's snapshot.

Run: ``python tests/golden/generate.py`` (needs the PostgreSQL server
binaries; the test harness's server kit is reused).

The sessions and phase instances are built in ``golden_scenarios.py``, the
canonical vectors' values in ``golden_vectors.py`` (moved there unchanged).
"""

from __future__ import annotations

import asyncio
import json
import lzma
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "integration")]

from ctxengine.canonical import payload_hash  # noqa: E402
from ctxengine.checkpoints import latest_checkpoint  # noqa: E402
from ctxengine.demo import demo_model  # noqa: E402
from golden_scenarios import (  # noqa: E402
    DEMO_SESSION,
    EXTRA_SESSION,
    OPENAI_MODEL,
    OPENAI_SESSION,
    OPERATIONS,
    PHASE_STAGES,
    demo_session,
    extra_session,
    phase_instances,
    sha,
)
from golden_vectors import vectors  # noqa: E402

import ctxengine as ce  # noqa: E402
from ctxengine import backends  # noqa: E402
from ctxengine.phases import ProtocolController  # noqa: E402

GENERATED_AT = datetime(2026, 11, 30, tzinfo=UTC)


# --------------------------------------------------------------------------
# what reading must give


async def expectations(store: Any, sessions: list[str], runs: dict[str, list[str]]) -> dict[str, Any]:
    out: dict[str, Any] = {"sessions": {}, "phases": {}}
    for sid in sessions:
        events = await store.events.read(sid)
        history = await ce.session_history(store, sid, 10**9)
        planner = ce.ContextPlanner(store)
        plan = await planner.current(sid)
        seeds = [e for e in events if e.type == "run.checkpoint.seeded"]
        carry = {}
        for e in seeds:
            seq = int(e.payload["seed_sequence"])
            for who in (None, ce.Principal("dana", "acme"), ce.Principal("eve", "other")):
                state = await ce.carry_working_state(store, sid, seq, who)
                carry[f"{seq}:{who.principal_id if who else '-'}"] = payload_hash(state.to_dict())
        latest = {}
        for run_id in runs.get(sid, []):
            cp = await latest_checkpoint(store, run_id)
            assert cp is not None
            raw = await store.checkpoints.latest_raw(run_id)
            latest[run_id] = {
                "version": cp.version,
                "sha256": payload_hash(cp.to_dict()),
                "raw_kinds": [r["kind"] for r in raw],
            }
        out["sessions"][sid] = {
            "events": [
                [
                    e.sequence,
                    e.type,
                    payload_hash(e.payload),
                    e.derivation_key,
                    e.run_id,
                    e.actor,
                    e.visibility.scope,
                    e.visibility.id,
                    e.created_at.isoformat(),
                ]
                for e in events
            ],
            "history": [payload_hash(item.to_dict()) for item in history],
            "plan": None
            if plan is None
            else {
                "epoch": plan.epoch,
                "prefix_sha256": plan.prefix_sha256,
                "sha256": payload_hash(plan.to_dict()),
            },
            "carry": carry,
            "checkpoints": latest,
        }
    ctl = ProtocolController(store)
    for instance in [*(f"phase-{s}" for s in PHASE_STAGES), "phase-full", "phase-changed"]:
        state = await ctl.state(instance)
        projections: dict[str, Any] = {}
        for op in OPERATIONS:
            try:
                projection = ctl.project(state, op)
            except ce.ContextError as exc:
                projections[op] = {"error": type(exc).__name__}
                continue
            data = projection.request.canonical_bytes()
            projections[op] = {
                "request_sha256": sha(data),
                "request": data.decode("utf-8"),
                "manifest": projection.manifest,
            }
        out["phases"][instance] = {
            "stage": state.stage,
            "events": len(await store.events.read(instance)),
            "projections": projections,
        }
    return out


# --------------------------------------------------------------------------
# driver


async def fill(url: str, captured: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, list[str]]]:
    store = await ce.open_store(url, clock=ce.FixedClock(datetime(2026, 3, 14, 22, 0, tzinfo=UTC)))
    try:
        # Stores stamp created_at with their own clock: a fixed one keeps rows reproducible.
        demo_record, snapshot = await demo_session(store, DEMO_SESSION, demo_model(), 50, captured)
        openai_record, _ = await demo_session(store, OPENAI_SESSION, OPENAI_MODEL, 20, captured)
        await extra_session(store, captured)
        await phase_instances(store)
        runs = {
            DEMO_SESSION: [t.run_id for t in demo_record.turns],
            OPENAI_SESSION: [t.run_id for t in openai_record.turns],
            EXTRA_SESSION: [f"{EXTRA_SESSION}-run-1", f"{EXTRA_SESSION}-run-2"],
        }
        facts = {
            "demo": {
                "requests": len(demo_record.requests),
                "epochs": demo_record.epochs,
                "compactions": demo_record.logged_compactions,
                "max_depth": demo_record.logged_max_depth,
            },
            "openai": {
                "requests": len(openai_record.requests),
                "compactions": openai_record.logged_compactions,
            },
            "snapshot": snapshot,
        }
        return facts, runs
    finally:
        await store.close()


def xz(path: Path, data: bytes) -> None:
    path.write_bytes(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))


def dump_json(value: Any) -> bytes:
    return (json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


async def main() -> None:
    backends.use_backend("rust")
    from storekit import PostgresServer, postgres_bin

    work = Path(tempfile.mkdtemp(prefix="ctxengine-golden-"))
    os.chmod(work, 0o755)
    sqlite_path = work / "store.db"
    captured: list[dict[str, Any]] = []
    facts, runs = await fill(f"sqlite:///{sqlite_path}", captured)
    sessions = [DEMO_SESSION, OPENAI_SESSION, EXTRA_SESSION]
    store = await ce.open_store(f"sqlite:///{sqlite_path}")
    try:
        expected = await expectations(store, sessions, runs)
    finally:
        await store.close()

    bin_dir = postgres_bin()
    assert bin_dir is not None, "PostgreSQL server binaries are needed"
    server = PostgresServer(bin_dir, work / "pg")
    (work / "pg").mkdir()
    server.start()
    try:
        pg_captured: list[dict[str, Any]] = []
        await fill(server.dsn, pg_captured)
        assert [c["wire"] for c in pg_captured] == [c["wire"] for c in captured], "PostgreSQL run differs"
        store = await ce.open_store(server.dsn)
        try:
            pg_expected = await expectations(store, sessions, runs)
        finally:
            await store.close()
        dump = subprocess.run(
            [str(bin_dir / "pg_dump"), "--no-owner", "--no-privileges", "--format=plain", "-d", server.dsn],
            capture_output=True,
            check=True,
        ).stdout
    finally:
        server.stop()

    # Derivation keys of appended items are random uuids, so events differ by
    # key between the two stores; everything else must agree.
    def without_keys(exp: dict[str, Any]) -> dict[str, Any]:
        copy = json.loads(json.dumps(exp))
        for s in copy["sessions"].values():
            for row in s["events"]:
                row[3] = None
        return copy

    assert without_keys(pg_expected) == without_keys(expected), "PostgreSQL expectations differ"

    conn = sqlite3.connect(sqlite_path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("VACUUM")
    conn.close()
    xz(HERE / "store-sqlite.db.xz", sqlite_path.read_bytes())
    xz(HERE / "store-postgres.sql.xz", dump)
    xz(HERE / "requests.json.xz", dump_json(captured))
    (HERE / "expected.json").write_bytes(
        dump_json({"sqlite": expected, "postgres": pg_expected, "facts": facts, "runs": runs})
    )
    (HERE / "vectors.json").write_bytes(dump_json(vectors()))
    (HERE / "estimator-snapshot.json").write_bytes(dump_json(facts["snapshot"]))
    shutil.rmtree(work, ignore_errors=True)
    for path in sorted(HERE.iterdir()):
        print(f"{path.stat().st_size:>10}  {path.name}")


if __name__ == "__main__":
    asyncio.run(main())
