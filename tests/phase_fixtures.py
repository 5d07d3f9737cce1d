"""Shared scenario for the phase-projection tests: inputs with unique markers and a driver.

Every piece of per-instance text carries a marker that occurs nowhere else,
so "X never reaches projection P" is a substring check.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from ctxengine import ToolSpec
from ctxengine.core.canonical import canonical_json
from ctxengine.phases import STAGE_OPERATIONS, Projection, ProtocolController, ProtocolState, Source

REQUEST = "Summarize the quarterly report for the board. MARK-REQUEST-51c0"
SOURCES = (
    Source(
        "report", "Revenue rose 4 percent. MARK-SOURCE-CONTENT-0b7e", description="Q3 report MARK-SOURCE-DESC"
    ),
    Source("memo", None, description="CFO memo", uri="file:///memos/cfo.txt"),
)
CONSTRAINTS = ("Never reveal customer names. MARK-CONSTRAINT-77aa", "Answer in English.")
TOOLS = (
    ToolSpec("search", "Search the archive.", {"type": "object", "properties": {"q": {"type": "string"}}}),
)

PROMPT_V1 = "GOAL: summarize MARK-PROMPT-V1-rejected"
PROMPT_FEEDBACK = "Mention the board meeting date. MARK-PROMPT-FEEDBACK"
PROMPT_V2 = "GOAL: summarize for the board meeting MARK-PROMPT-V2"
PLAN_V1 = "STEPS:\n1. read [source:report] MARK-PLAN-V1-rejected"
PLAN_FEEDBACK = "Add a step for risks. MARK-PLAN-FEEDBACK"
PLAN_V2 = "STEPS:\n1. read [source:report]\n2. list risks MARK-PLAN-V2"
CHANGE = "Actually, write it for investors instead. MARK-CHANGE-REQUEST"
PROMPT_V3 = "GOAL: summarize for investors MARK-PROMPT-V3"
PLAN_V3 = "STEPS:\n1. read [source:report]\n2. investor framing MARK-PLAN-V3"


def state_summary(state: ProtocolState) -> dict[str, Any]:
    """The format-1 fields of a state, as plain data (what replay must rebuild)."""
    return {
        "instance_id": state.instance_id,
        "stage": state.stage,
        "request": state.request,
        "sources": [s.to_dict() for s in state.sources],
        "constraints": list(state.constraints),
        "tools": [t.to_dict() for t in state.tools],
        "versions": [a.to_dict() for a in state.versions],
        "feedback": [[f.kind, f.version, f.text, f.origin] for f in state.feedback],
        "pending_feedback": None
        if state.pending_feedback is None
        else [
            state.pending_feedback.kind,
            state.pending_feedback.version,
            state.pending_feedback.text,
            state.pending_feedback.origin,
        ],
        "output_mode": state.output_mode,
        "history": [[r.sequence, r.type, r.payload_sha256] for r in state.history],
    }


def text_of(projection: Projection) -> str:
    """Everything a projection carries, as searchable text (items, tools, metadata, manifest)."""
    request = projection.request
    parts = [item.text or "" for item in (*request.prefix, *request.body)]
    parts.append(request.canonical_bytes().decode("utf-8"))
    parts.append(canonical_json(projection.manifest).decode("utf-8"))
    return "\n".join(parts)


@dataclass
class Trace:
    """Projections compiled along a scenario, in order, with the marker set retired so far."""

    steps: list[tuple[str, Projection, frozenset[str]]] = field(default_factory=list)
    states: list[ProtocolState] = field(default_factory=list)
    retired: set[str] = field(default_factory=set)

    def compile(self, ctl: ProtocolController, state: ProtocolState, operation: str) -> Projection:
        projection = ctl.project(state, operation)
        self.steps.append((operation, projection, frozenset(self.retired)))
        self.states.append(state)
        return projection


async def record(ctl: ProtocolController, state: ProtocolState, kind: str, body: str) -> ProtocolState:
    """The model's reply to the projection of the current stage, recorded as the next ``kind`` version."""
    answered = ctl.project(state, STAGE_OPERATIONS[state.stage]).sha256
    return await ctl.record_artifact(state.instance_id, kind, body, projection_sha256=answered)


async def change(ctl: ProtocolController, state: ProtocolState, feedback: str) -> ProtocolState:
    """A change request naming the plan version the user is shown."""
    plan = state.displayed
    assert plan is not None and plan.kind == "plan"
    return await ctl.change_request(
        state.instance_id, feedback, displayed_version=plan.version, digest=plan.digest
    )


async def full_protocol(
    ctl: ProtocolController, instance_id: str = "task-1", *, output_mode: str = "standard"
) -> tuple[ProtocolState, Trace]:
    """Every operation once or more: a prompt revision, a plan revision, a change request, execution.

    Markers retire (must never appear again) as soon as their version or
    feedback is replaced.
    """
    t = Trace()
    s = await ctl.submit(instance_id, REQUEST, sources=SOURCES, constraints=CONSTRAINTS, tools=TOOLS)
    t.compile(ctl, s, "draft_prompt")
    s = await record(ctl, s, "prompt", PROMPT_V1)
    s = await ctl.revise(instance_id, "prompt", PROMPT_FEEDBACK, displayed_version=1)
    t.compile(ctl, s, "revise_prompt")
    s = await record(ctl, s, "prompt", PROMPT_V2)
    t.retired |= {"MARK-PROMPT-V1-rejected", "MARK-PROMPT-FEEDBACK"}
    assert s.prompt is not None
    s = await ctl.confirm(instance_id, "prompt", version=2, digest=s.prompt.digest)
    t.compile(ctl, s, "draft_plan")
    s = await record(ctl, s, "plan", PLAN_V1)
    s = await ctl.revise(instance_id, "plan", PLAN_FEEDBACK, displayed_version=1)
    t.compile(ctl, s, "revise_plan")
    s = await record(ctl, s, "plan", PLAN_V2)
    t.retired |= {"MARK-PLAN-V1-rejected", "MARK-PLAN-FEEDBACK"}
    s = await change(ctl, s, CHANGE)
    t.compile(ctl, s, "revise_prompt")
    s = await record(ctl, s, "prompt", PROMPT_V3)
    # The change itself amends the request of later prompt projections; plan and execute never see it.
    t.retired |= {"MARK-PLAN-V2", "MARK-PROMPT-V2", "MARK-CHANGE-REQUEST"}
    assert s.prompt is not None
    s = await ctl.confirm(instance_id, "prompt", version=3, digest=s.prompt.digest)
    t.compile(ctl, s, "draft_plan")
    s = await record(ctl, s, "plan", PLAN_V3)
    assert s.plan is not None
    s = await ctl.confirm(instance_id, "plan", version=3, digest=s.plan.digest, output_mode=output_mode)
    t.compile(ctl, s, "execute")
    return s, t


EXTRA_STAGES = {
    # stage: (the main-path stage it branches from, the call that reaches it)
    "review_interpreting": "plan_review",
    "waiting_input": "executing",
    "complete": "executing",
    "stopped": "prompt_drafting",
    "error": "prompt_drafting",
}
QUESTION = "Which quarter should the summary cover? MARK-QUESTION"
ANSWER = "The third quarter. MARK-ANSWER"
RESULT = "The board summary. MARK-RESULT"
REVIEW_TEXT = "Change the audience to investors and add a forecast. MARK-REVIEW"


async def drive(ctl: ProtocolController, instance_id: str, until: str, **submit: object) -> ProtocolState:
    """Submit an instance and take the shortest path to stage ``until``."""
    kwargs: dict[str, object] = {"sources": SOURCES, "constraints": CONSTRAINTS, "tools": TOOLS}
    kwargs.update(submit)
    s = await ctl.submit(instance_id, REQUEST, **kwargs)  # type: ignore[arg-type]
    path = [
        ("prompt_review", lambda: record(ctl, s, "prompt", PROMPT_V1)),
        ("prompt_revising", lambda: ctl.revise(instance_id, "prompt", PROMPT_FEEDBACK, displayed_version=1)),
        ("prompt_review", lambda: record(ctl, s, "prompt", PROMPT_V2)),
        ("plan_drafting", lambda: ctl.confirm(instance_id, "prompt", version=2, digest=_digest(s, "prompt"))),
        ("plan_review", lambda: record(ctl, s, "plan", PLAN_V1)),
        ("plan_revising", lambda: ctl.revise(instance_id, "plan", PLAN_FEEDBACK, displayed_version=1)),
        ("plan_review", lambda: record(ctl, s, "plan", PLAN_V2)),
        ("executing", lambda: ctl.confirm(instance_id, "plan", version=2, digest=_digest(s, "plan"))),
    ]
    target = EXTRA_STAGES.get(until, until)
    for _, step in path:
        if s.stage == target:
            break
        s = await step()
    assert s.stage == target, (s.stage, until)
    if until == "review_interpreting":
        s = await ctl.review(instance_id, REVIEW_TEXT, displayed_version=1, digest=_digest(s, "plan"))
    elif until in ("waiting_input", "complete"):
        answered = ctl.project(s, "execute").sha256
        if until == "waiting_input":
            s = await ctl.request_input(instance_id, QUESTION, projection_sha256=answered)
        else:
            s = await ctl.complete(instance_id, RESULT, projection_sha256=answered)
    elif until == "stopped":
        s = await ctl.stop(instance_id, reason="The user changed their mind.")
    elif until == "error":
        s = await ctl.fail(instance_id, "The model provider is unreachable.")
    assert s.stage == until, (s.stage, until)
    return s


def _digest(state: ProtocolState, kind: str) -> str:
    artifact = state.latest(kind)  # type: ignore[arg-type]
    assert artifact is not None
    return artifact.digest


async def every_stage(ctl: ProtocolController, prefix: str = "all") -> list[ProtocolState]:
    """Three instances that between them pass through every stage and every operation.

    ``{prefix}-done``: revisions of both artifacts, a review routed each way, a
    change request, two rounds of execution input, completion. ``{prefix}-stop``
    stops while a review is being interpreted; ``{prefix}-fail`` fails while
    waiting for input. Returns the state after every transition, in order
    (instance after instance).
    """
    states: list[ProtocolState] = []

    async def step(call: Awaitable[ProtocolState]) -> ProtocolState:
        states.append(await call)
        return states[-1]

    def answered(s: ProtocolState) -> str:
        return ctl.project(s, STAGE_OPERATIONS[s.stage]).sha256

    async def reviewed(s: ProtocolState, text: str, verdict: str) -> ProtocolState:
        shown = s.displayed
        assert shown is not None
        s = await step(ctl.review(s.instance_id, text, displayed_version=shown.version, digest=shown.digest))
        return await step(ctl.interpret_review(s.instance_id, verdict, projection_sha256=answered(s)))

    i = f"{prefix}-done"
    s = await step(ctl.submit(i, REQUEST, sources=SOURCES, constraints=CONSTRAINTS, tools=TOOLS))
    s = await step(record(ctl, s, "prompt", PROMPT_V1))
    s = await step(ctl.revise(i, "prompt", PROMPT_FEEDBACK, displayed_version=1))
    s = await step(record(ctl, s, "prompt", PROMPT_V2))
    s = await step(ctl.confirm(i, "prompt", version=2, digest=_digest(s, "prompt")))
    s = await step(record(ctl, s, "plan", PLAN_V1))
    s = await reviewed(s, "Put the risks first. MARK-APPROACH", "approach_change")
    s = await step(record(ctl, s, "plan", PLAN_V2))
    s = await reviewed(s, REVIEW_TEXT, "task_change")
    s = await step(record(ctl, s, "prompt", PROMPT_V3))
    s = await step(ctl.revise(i, "prompt", "Name the fiscal year.", displayed_version=3))
    s = await step(record(ctl, s, "prompt", "GOAL: investors, fiscal 2026, forecast MARK-P4"))
    s = await step(ctl.confirm(i, "prompt", version=4, digest=_digest(s, "prompt")))
    s = await step(record(ctl, s, "plan", PLAN_V3))
    s = await step(change(ctl, s, CHANGE))
    s = await step(record(ctl, s, "prompt", "GOAL: investors only MARK-P5"))
    s = await step(ctl.confirm(i, "prompt", version=5, digest=_digest(s, "prompt")))
    s = await step(record(ctl, s, "plan", "STEPS:\n1. read\n2. write MARK-L4"))
    s = await step(ctl.confirm(i, "plan", version=4, digest=_digest(s, "plan"), output_mode="pseudocode"))
    for n, (question, answer) in enumerate(((QUESTION, ANSWER), ("Which currency?", "Euros.")), 1):
        s = await step(ctl.request_input(i, question, projection_sha256=answered(s)))
        s = await step(ctl.provide_input(i, answer, request_number=n))
    await step(ctl.complete(i, RESULT, projection_sha256=answered(s)))

    for i in (f"{prefix}-stop", f"{prefix}-fail"):
        s = await step(ctl.submit(i, REQUEST, sources=SOURCES, constraints=CONSTRAINTS))
        s = await step(record(ctl, s, "prompt", PROMPT_V2))
        s = await step(ctl.confirm(i, "prompt", version=1, digest=_digest(s, "prompt")))
        s = await step(record(ctl, s, "plan", PLAN_V2))
        if i.endswith("-stop"):
            s = await step(ctl.review(i, REVIEW_TEXT, displayed_version=1, digest=_digest(s, "plan")))
            await step(ctl.stop(i, reason="Enough for today."))
        else:
            s = await step(ctl.confirm(i, "plan", version=1, digest=_digest(s, "plan")))
            s = await step(ctl.request_input(i, QUESTION, projection_sha256=answered(s)))
            await step(ctl.fail(i, "The model provider is unreachable."))
    return states


def full_summary(state: ProtocolState) -> str:
    """Everything a state holds, as canonical text (for comparing states across processes)."""
    summary = state_summary(state)
    summary["protocol_version"] = state.protocol_version
    for name in ("pending_review", "result", "termination"):
        value = getattr(state, name)
        summary[name] = None if value is None else dataclasses.asdict(value)
    summary["inputs"] = [dataclasses.asdict(i) for i in state.inputs]
    return json.dumps(summary, sort_keys=True)
