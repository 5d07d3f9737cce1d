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
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import lzma
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "integration")]

from ctxengine.canonical import canonical_json, payload_hash  # noqa: E402
from ctxengine.checkpoints import latest_checkpoint, write_checkpoint  # noqa: E402
from ctxengine.demo import AGENT, DemoConfig, DemoRecord, DemoSession, demo_model  # noqa: E402
from ctxengine.fakemodel import script_turn  # noqa: E402

import ctxengine as ce  # noqa: E402
from ctxengine import backends  # noqa: E402
from ctxengine.phases import ProtocolController  # noqa: E402
from ctxengine.providers import to_anthropic_messages, to_openai_chat, to_openai_responses  # noqa: E402

GENERATED_AT = datetime(2026, 11, 30, tzinfo=UTC)
WIRE = {
    "openai_chat": to_openai_chat,
    "openai_responses": to_openai_responses,
    "anthropic_messages": to_anthropic_messages,
}
DEMO_SESSION = "golden-demo"
OPENAI_SESSION = "golden-openai"
EXTRA_SESSION = "golden-extra"
OPENAI_MODEL = ce.ResolvedModel("openai", "gpt-4o-mini", 32_000, 4_096, 4_096, frozenset({"tools"}))
EXTRA_MODEL = ce.ResolvedModel("anthropic", "claude-golden", 200_000, 8_192, 8_192, frozenset({"cache"}))
EXTRA_AGENT = ce.AgentSpec("golden-extra-agent", "1", "You keep the working state current. Be brief.")
PHASE_STAGES = (
    "prompt_drafting",
    "prompt_review",
    "prompt_revising",
    "plan_drafting",
    "plan_review",
    "plan_revising",
    "executing",
)
OPERATIONS = ("draft_prompt", "revise_prompt", "draft_plan", "revise_plan", "execute")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def wire_payloads(request: ce.ModelRequest, model: str) -> dict[str, Any]:
    return {name: render(request, model=model) for name, render in WIRE.items()}


# --------------------------------------------------------------------------
# the demo sessions, with every request captured


async def demo_session(
    store: ce.events.Store,  # type: ignore[name-defined]
    session_id: str,
    model: ce.ResolvedModel,
    turns: int,
    captured: list[dict[str, Any]],
) -> tuple[DemoRecord, dict[str, Any]]:
    clock = ce.FixedClock(datetime(2026, 3, 14, 22, 5, tzinfo=UTC))
    record = DemoRecord(DemoConfig(turns=turns, session_id=session_id), session_id, "golden", "rust", model)
    estimator = cast(ce.Estimator, ce.TokenEstimator())
    session = DemoSession(store, record, clock, estimator)
    original = DemoSession._observe

    def observe(
        self: DemoSession, tr: Any, run: ce.RunContext, plan: Any, cp: ce.Checkpoint, request: Any
    ) -> None:
        original(self, tr, run, plan, cp, request)
        captured.append(
            {
                "session_id": session_id,
                "turn": tr.turn,
                "agent": AGENT.to_dict(),
                "model": self.model.to_dict(),
                "run": run.to_dict(),
                "principal": self.principal.to_dict(),
                "clock": self.clock.now().isoformat(),
                "surface": self.builder.surface,
                "plan_epoch": plan.epoch,
                "plan_prefix_sha256": plan.prefix_sha256,
                "estimator": self.estimator.snapshot(),
                "checkpoint": cp.to_dict(),
                "request_sha256": sha(request.canonical_bytes()),
                "metadata": dict(request.metadata),
                "wire": wire_payloads(request, self.model.model),
            }
        )

    DemoSession._observe = observe  # type: ignore[method-assign]
    try:
        for turn in range(1, turns + 1):
            record.turns.append(await session.run_turn(script_turn(turn)))
        await session.finish()
    finally:
        DemoSession._observe = original  # type: ignore[method-assign]
    assert record.error is None, record.error
    return record, estimator.snapshot()


# --------------------------------------------------------------------------
# the extra session: epochs, leases, working state, questions, deltas


async def extra_session(store: Any, captured: list[dict[str, Any]]) -> None:
    sid = EXTRA_SESSION
    clock = ce.FixedClock(datetime(2026, 5, 1, 9, 0, tzinfo=UTC))
    est = cast(ce.Estimator, ce.TokenEstimator())
    planner = ce.ContextPlanner(store, estimator=est, clock=clock)
    builder = ce.ContextBuilder(planner, estimator=est, clock=clock)
    loop = ce.ContextLoop(
        store, planner=planner, builder=builder, compactor=ce.StructuredCompactor(est), estimator=est
    )
    dana = ce.Principal("dana", "acme", frozenset({"files.read", "web.search"}))
    tools = (
        ce.ToolSpec(
            "lookup", "Look a word up.", {"type": "object", "properties": {"word": {"type": "string"}}}
        ),
        ce.UPDATE_WORKING_STATE_TOOL,
    )
    await planner.plan(
        sid, EXTRA_AGENT, dana, EXTRA_MODEL, tools, policy_version="extra/1", memory_snapshot="- m1"
    )
    clock.advance(timedelta(minutes=1))
    await planner.rotate(sid, "operator_request", principal=dana)
    clock.advance(timedelta(minutes=1))
    plan = await planner.plan(
        sid, EXTRA_AGENT, dana, EXTRA_MODEL, tools, policy_version="extra/2", memory_snapshot="- m1"
    )
    assert plan.epoch == 3, plan.epoch
    seed = await ce.append_item(
        store,
        sid,
        ce.UserMessage("Start the glossary, please.", principal_id="dana"),
        principal=dana,
        derivation_key="extra:user:1",
    )
    assert seed.seq is not None
    run = ce.RunContext(f"{sid}-run-1", sid, seed.seq)
    stale = await store.checkpoints.claim(run.run_id, "worker-a")
    lease = await store.checkpoints.claim(run.run_id, "worker-b")
    assert lease.epoch == stale.epoch + 1
    cp = await loop.seed_checkpoint(run, dana, lease=lease)
    cp = await loop.update_working_state(
        run,
        cp,
        {
            "objective": "Build a glossary of ten terms",
            "add_constraints": ["Plain English only"],
            "upsert_tasks": [{"task_id": "t1", "text": "Collect terms", "status": "in_progress"}],
            "next_action": "look up the first term",
        },
        source="user",
        lease=lease,
        principal=dana,
    )
    cp = await loop.add_question(run, cp, "Which audience?", lease=lease, question_id="q1", principal=dana)
    cp = await loop.resolve_question(run, cp, "q1", lease=lease, principal=dana)
    for i in range(1, 11):
        clock.advance(timedelta(seconds=30))
        step_run = replace(run, step=i)
        request, cp = await loop.build_with_pressure(step_run, cp, EXTRA_AGENT, dana, lease=lease)
        captured.append(
            {
                "session_id": sid,
                "turn": 1,
                "agent": EXTRA_AGENT.to_dict(),
                "model": EXTRA_MODEL.to_dict(),
                "run": step_run.to_dict(),
                "principal": dana.to_dict(),
                "clock": clock.now().isoformat(),
                "surface": builder.surface,
                "plan_epoch": plan.epoch,
                "plan_prefix_sha256": plan.prefix_sha256,
                "estimator": est.snapshot(),
                "checkpoint": cp.to_dict(),
                "request_sha256": sha(request.canonical_bytes()),
                "metadata": dict(request.metadata),
                "wire": wire_payloads(request, EXTRA_MODEL.model),
            }
        )
        call = ce.ToolCall(f"call-{i}", "lookup", {"word": f"term-{i}", "n": i, "x": i / 8})
        result = ce.ToolResult(f"call-{i}", f"Definition {i}: " + "lorem ipsum " * (i * 3))
        async with store.transaction():
            items = [
                await ce.append_item(store, sid, item, run_id=run.run_id, derivation_key=f"extra:{i}:{k}")
                for k, item in enumerate((call, result))
            ]
            updated = replace(cp, conversation=(*cp.conversation, *items))
            version = await write_checkpoint(
                store, run.run_id, updated, trigger="tool_completed", lease=lease
            )
        cp = replace(updated, version=version)
        if i == 5:
            cp = await loop.update_working_state(
                run, cp, {"add_facts": [f"term {i} found"], "next_action": "keep going"},
                source="external_untrusted", lease=lease, principal=dana,
            )  # fmt: skip
        est.reconcile(plan.model_id, int(request.metadata["total_tokens"]), 900 + i)
    # A second run in the session: its seed carries the working state.
    seed2 = await ce.append_item(
        store,
        sid,
        ce.UserMessage("Now the second half.", principal_id="dana"),
        principal=dana,
        derivation_key="extra:user:2",
    )
    assert seed2.seq is not None
    run2 = ce.RunContext(f"{sid}-run-2", sid, seed2.seq)
    lease2 = await store.checkpoints.claim(run2.run_id, "worker-c")
    await loop.seed_checkpoint(run2, dana, lease=lease2)


# --------------------------------------------------------------------------
# phase instances


async def phase_instances(store: Any) -> None:
    from phase_fixtures import drive, full_protocol

    ctl = ProtocolController(store)
    for stage in PHASE_STAGES:
        await drive(ctl, f"phase-{stage}", stage)
    await full_protocol(ctl, "phase-full", output_mode="pseudocode")
    # A semantic change during plan review sends the instance back to the prompt.
    await drive(ctl, "phase-changed", "plan_review")
    await ctl.change_request("phase-changed", "Write it for investors instead.")


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
# canonical vectors


def vectors() -> list[dict[str, Any]]:
    from ctxengine.budget import BudgetPolicy, allocate

    from ctxengine.model import (
        ElidedSpan,
        KnowledgePassage,
        SkillBody,
        StateEntry,
        Task,
    )

    part_text = ce.TextPart("see the attached quote — 12 € ✓")
    part_file = ce.FileRef("art-1", "application/pdf", "quote.pdf")
    part_file_bare = ce.FileRef("art-2", "image/png")
    nested_args = {
        "query": 'vendors "EU" \\ résumé \u2028 line',
        "limits": {
            "max": 10,
            "ratio": 0.1,
            "big": 9007199254740991,
            "neg": -0.0,
            "exp": 1e21,
            "tiny": 5e-324,
        },
        "flags": [True, False, None],
        "emoji": "😀 𝄞",
        "\u00e9": 1,
        "e": 2,
        "\U0001f600": 3,
        "\ufb33": 4,
    }
    ws = ce.WorkingState(
        objective="Pick a vendor",
        constraints=(StateEntry("c1", "Under 40k", ce.TrustLevel.USER),),
        tasks=(Task("t1", "Review Nimbus", "in_progress"), Task("t2", "Review Stratus", "completed", "user")),
        established_facts=(StateEntry("f1", "Nimbus is EU-hosted"),),
        open_questions=(StateEntry("q1", "Which region?", ce.TrustLevel.PLATFORM),),
        next_action="read the price sheet",
    )
    values: list[tuple[str, Any]] = [
        ("TextPart", part_text),
        ("FileRef", part_file),
        ("FileRef", part_file_bare),
        ("SystemMessage", ce.SystemMessage("You are helpful.")),
        ("SystemMessage", ce.SystemMessage((part_text,), trust=ce.TrustLevel.TRUSTED_CONFIGURATION, seq=3)),
        ("UserMessage", ce.UserMessage("hello", seq=1)),
        ("UserMessage", ce.UserMessage((part_text, part_file), principal_id="dana", seq=7)),
        ("UserMessage", ce.UserMessage("", trust=ce.TrustLevel.EXTERNAL_UNTRUSTED)),
        ("AssistantMessage", ce.AssistantMessage("Done.", seq=9)),
        ("AssistantMessage", ce.AssistantMessage((part_text,), trust=ce.TrustLevel.INTERNAL_TOOL)),
        ("ToolCall", ce.ToolCall("c1", "search", {}, seq=2)),
        ("ToolCall", ce.ToolCall("call_ÄÖ", "search", nested_args)),
        ("ToolResult", ce.ToolResult("c1", "report.pdf, 12 pages", seq=3)),
        (
            "ToolResult",
            ce.ToolResult("c1", (part_file_bare, part_text), is_error=True, trust="external_untrusted"),
        ),
        (
            "ReasoningItem",
            ce.ReasoningItem("openai", {"encrypted_content": "gAAA==", "id": "rs_1", "n": [1, 2.5]}),
        ),
        ("ReasoningItem", ce.ReasoningItem("anthropic", {"signature": "sig", "thinking": "hmm"}, seq=4)),
        (
            "ToolSpec",
            ce.ToolSpec("search", "Search.", {"type": "object", "properties": {"q": {"type": "string"}}}),
        ),
        ("ToolSpec", ce.UPDATE_WORKING_STATE_TOOL),
        ("ResolvedModel", ce.ResolvedModel("openai", "gpt-x", 128_000, 16_384, 8_192, frozenset({"b", "a"}))),
        ("ResolvedModel", demo_model()),
        ("AgentSpec", AGENT),
        ("Principal", ce.Principal("dana", "acme", frozenset({"web.search", "mail.send"}))),
        ("Principal", ce.Principal("eve", "other")),
        ("RunContext", ce.RunContext("r1", "s1", 5)),
        ("RunContext", ce.RunContext("r1", "s1", 5, step=3, max_output_tokens=1024)),
        ("StateEntry", StateEntry("f1", "fact")),
        ("Task", Task("t1", "do it", "open", "user")),
        ("WorkingState", ce.WorkingState()),
        ("WorkingState", ws),
        ("ElidedSpan", ElidedSpan("tool_result:4", ce.TrustLevel.EXTERNAL_UNTRUSTED, 1234, 4, "art-1,art-2")),
        ("ElidedSpan", ElidedSpan("folded:3@1..9", ce.TrustLevel.MEMORY, 99)),
        ("KnowledgePassage", KnowledgePassage("p1", "Nimbus runs in Frankfurt.", 0.75, "kb")),
        ("KnowledgePassage", KnowledgePassage("p2", "x")),
        ("SkillBody", SkillBody("tables", "Use short tables.")),
        ("Checkpoint", ce.Checkpoint("r0")),
        (
            "Checkpoint",
            ce.Checkpoint(
                "r1",
                version=4,
                conversation=(
                    ce.UserMessage("old", seq=1),
                    ce.ToolCall("c1", "search", {"q": "x"}, seq=2),
                    ce.ToolResult("c1", "page", seq=3, trust="external_untrusted"),
                    ce.UserMessage("now", seq=5),
                ),
                compacted_summary="Compacted conversation through event 0.",
                summary_source_event_ids=(0,),
                summary_elided=(ElidedSpan("assistant_message:0", ce.TrustLevel.EXTERNAL_UNTRUSTED, 10, 0),),
                replaced_through_sequence=0,
                summary_depth=1,
                working_state=ws,
                knowledge=(KnowledgePassage("p1", "k", 0.5),),
                recall=("Dana likes tables.",),
                loaded_skills=(SkillBody("tables", "Use short tables."),),
                reasoning=(ce.ReasoningItem("openai", {"id": "rs_2"}, seq=6),),
                corrections=("Dana moved to Munich.",),
            ),
        ),
    ]
    out = []
    for type_name, value in values:
        data = canonical_json(value)
        out.append(
            {
                "type": type_name,
                "dict": value.to_dict(),
                "canonical": data.decode("utf-8"),
                "sha256": payload_hash(value),
            }
        )
    policy = BudgetPolicy()
    for name, budget in (
        ("ContextBudget", allocate(demo_model(), 3_000, policy)),
        ("ContextBudget", allocate(OPENAI_MODEL, 1_234, policy)),
    ):
        out.append(
            {
                "type": name,
                "dict": budget.to_dict(),
                "canonical": canonical_json(budget.to_dict()).decode("utf-8"),
                "sha256": payload_hash(budget.to_dict()),
            }
        )
    plain: list[Any] = [
        None, True, 0, -1, 1.5, 1e21, 1e-7, 123456789.125, -0.0, "", "a\u0000b\u001f\u007f\u2028",
        [], {}, {"b": 1, "a": [1, "x", None], "A": {"z": 0.30000000000000004}},
        {"\U0001f600": 1, "\ufb33": 2, "é": 3},
    ]  # fmt: skip
    for value in plain:
        out.append(
            {
                "type": "json",
                "dict": value,
                "canonical": canonical_json(value).decode("utf-8"),
                "sha256": payload_hash(value),
            }
        )
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
    facts, runs = await fill(f"sqlite://{sqlite_path}", captured)
    sessions = [DEMO_SESSION, OPENAI_SESSION, EXTRA_SESSION]
    store = await ce.open_store(f"sqlite://{sqlite_path}")
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
