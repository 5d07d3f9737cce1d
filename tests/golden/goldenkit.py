"""Reading the golden fixtures (issue 10): where they are, how to open them, what they must give.

The fixtures were written once by ``generate.py`` with the code of the
commit that added them, and are never regenerated. This kit only reads them
through the public API; when that API grows, the kit follows, the files stay.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg

import ctxengine as ce
from ctxengine.phases import ProtocolController

HERE = Path(__file__).resolve().parent
SESSIONS = ("golden-demo", "golden-openai", "golden-extra")
PHASE_INSTANCES = (
    "phase-prompt_drafting",
    "phase-prompt_review",
    "phase-prompt_revising",
    "phase-plan_drafting",
    "phase-plan_review",
    "phase-plan_revising",
    "phase-executing",
    "phase-full",
    "phase-changed",
)
OPERATIONS = ("draft_prompt", "revise_prompt", "draft_plan", "revise_plan", "execute")
WIRE = {
    "openai_chat": ce.providers.to_openai_chat,
    "openai_responses": ce.providers.to_openai_responses,
    "anthropic_messages": ce.providers.to_anthropic_messages,
}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load_json(name: str) -> Any:
    path = HERE / name
    data = lzma.decompress(path.read_bytes()) if name.endswith(".xz") else path.read_bytes()
    return json.loads(data)


def expected(kind: str) -> dict[str, Any]:
    """What reading the ``kind`` ("sqlite" or "postgres") fixture must give."""
    data: dict[str, Any] = load_json("expected.json")
    return {**data[kind], "runs": data["runs"], "facts": data["facts"]}


def sqlite_copy(directory: Path) -> str:
    """A fresh copy of the SQLite fixture; returns its store URL."""
    path = directory / "golden.db"
    path.write_bytes(lzma.decompress((HERE / "store-sqlite.db.xz").read_bytes()))
    return f"sqlite:///{path}"


@contextmanager
def postgres_copy(server_dsn: str, psql: Path) -> Iterator[str]:
    """A fresh database on the test server restored from the plain-SQL dump; yields its DSN."""
    name = f"golden_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    dsn = server_dsn.rsplit("/", 1)[0] + f"/{name}"
    try:
        subprocess.run(
            [str(psql), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dsn],
            input=lzma.decompress((HERE / "store-postgres.sql.xz").read_bytes()),
            capture_output=True,
            check=True,
            timeout=120,
        )
        yield dsn
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


async def read_back(store: Any, runs: dict[str, list[str]]) -> dict[str, Any]:
    """Everything the fixture's sessions and phase instances give when read with today's code."""
    out: dict[str, Any] = {"sessions": {}, "phases": {}}
    for sid in SESSIONS:
        events = await store.events.read(sid)
        history = await ce.session_history(store, sid, 10**9)
        plan = await ce.ContextPlanner(store).current(sid)
        carry = {}
        for event in events:
            if event.type != "run.checkpoint.seeded":
                continue
            seq = int(event.payload["seed_sequence"])
            for who in (None, ce.Principal("dana", "acme"), ce.Principal("eve", "other")):
                state = await ce.carry_working_state(store, sid, seq, who)
                carry[f"{seq}:{who.principal_id if who else '-'}"] = ce.payload_hash(state.to_dict())
        latest = {}
        for run_id in runs.get(sid, []):
            cp = await ce.latest_checkpoint(store, run_id)
            assert cp is not None, run_id
            raw = await store.checkpoints.latest_raw(run_id)
            latest[run_id] = {
                "version": cp.version,
                "sha256": ce.payload_hash(cp.to_dict()),
                "raw_kinds": [r["kind"] for r in raw],
            }
        out["sessions"][sid] = {
            "events": [
                [
                    e.sequence,
                    e.type,
                    ce.payload_hash(e.payload),
                    e.derivation_key,
                    e.run_id,
                    e.actor,
                    e.visibility.scope,
                    e.visibility.id,
                    e.created_at.isoformat(),
                ]
                for e in events
            ],
            "history": [ce.payload_hash(item.to_dict()) for item in history],
            "plan": None
            if plan is None
            else {
                "epoch": plan.epoch,
                "prefix_sha256": plan.prefix_sha256,
                "sha256": ce.payload_hash(plan.to_dict()),
            },
            "carry": carry,
            "checkpoints": latest,
        }
    ctl = ProtocolController(store)
    for instance in PHASE_INSTANCES:
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


def rebuild_request(record: dict[str, Any], plan: ce.ContextPlan, store: Any) -> dict[str, Any]:
    """The three provider payloads today's builder makes from a recorded request's inputs."""
    estimator = ce.TokenEstimator.restore(record["estimator"])
    planner = ce.ContextPlanner(store, estimator=estimator)
    clock = ce.FixedClock(datetime.fromisoformat(record["clock"]))
    builder = ce.ContextBuilder(planner, estimator=estimator, clock=clock, surface=record["surface"])
    request = builder.build(
        ce.RunContext.from_dict(record["run"]),
        ce.Checkpoint.from_dict(record["checkpoint"]),
        ce.AgentSpec.from_dict(record["agent"]),
        ce.Principal.from_dict(record["principal"]),
        plan=plan,
    )
    model = ce.ResolvedModel.from_dict(record["model"]).model
    return {
        "request_sha256": sha(request.canonical_bytes()),
        "metadata": dict(request.metadata),
        "wire": {name: render(request, model=model) for name, render in WIRE.items()},
    }
