"""The sessions and phase instances ``generate.py`` wrote into the golden stores (issue 10).

Split out of ``generate.py`` unchanged; like it, never re-run to make a golden test pass.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from ctxengine.checkpoints import write_checkpoint
from ctxengine.demo import AGENT, DemoConfig, DemoRecord, DemoSession
from ctxengine.fakemodel import script_turn

import ctxengine as ce
from ctxengine.phases import ProtocolController
from ctxengine.providers import to_anthropic_messages, to_openai_chat, to_openai_responses

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
