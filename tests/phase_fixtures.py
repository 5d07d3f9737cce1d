"""Shared scenario for the phase-projection tests: inputs with unique markers and a driver.

Every piece of per-instance text carries a marker that occurs nowhere else,
so "X never reaches projection P" is a substring check.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ctxengine import ToolSpec
from ctxengine.core.canonical import canonical_json
from ctxengine.phases import Projection, ProtocolController, ProtocolState, Source

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
    s = await ctl.record_artifact(instance_id, "prompt", PROMPT_V1)
    s = await ctl.revise(instance_id, "prompt", PROMPT_FEEDBACK, displayed_version=1)
    t.compile(ctl, s, "revise_prompt")
    s = await ctl.record_artifact(instance_id, "prompt", PROMPT_V2)
    t.retired |= {"MARK-PROMPT-V1-rejected", "MARK-PROMPT-FEEDBACK"}
    assert s.prompt is not None
    s = await ctl.confirm(instance_id, "prompt", version=2, digest=s.prompt.digest)
    t.compile(ctl, s, "draft_plan")
    s = await ctl.record_artifact(instance_id, "plan", PLAN_V1)
    s = await ctl.revise(instance_id, "plan", PLAN_FEEDBACK, displayed_version=1)
    t.compile(ctl, s, "revise_plan")
    s = await ctl.record_artifact(instance_id, "plan", PLAN_V2)
    t.retired |= {"MARK-PLAN-V1-rejected", "MARK-PLAN-FEEDBACK"}
    s = await ctl.change_request(instance_id, CHANGE)
    t.compile(ctl, s, "revise_prompt")
    s = await ctl.record_artifact(instance_id, "prompt", PROMPT_V3)
    t.retired |= {"MARK-PLAN-V2", "MARK-PROMPT-V2", "MARK-CHANGE-REQUEST"}
    assert s.prompt is not None
    s = await ctl.confirm(instance_id, "prompt", version=3, digest=s.prompt.digest)
    t.compile(ctl, s, "draft_plan")
    s = await ctl.record_artifact(instance_id, "plan", PLAN_V3)
    assert s.plan is not None
    s = await ctl.confirm(instance_id, "plan", version=3, digest=s.plan.digest, output_mode=output_mode)
    t.compile(ctl, s, "execute")
    return s, t


async def drive(ctl: ProtocolController, instance_id: str, until: str, **submit: object) -> ProtocolState:
    """Submit an instance and take the shortest path to stage ``until``."""
    kwargs: dict[str, object] = {"sources": SOURCES, "constraints": CONSTRAINTS, "tools": TOOLS}
    kwargs.update(submit)
    s = await ctl.submit(instance_id, REQUEST, **kwargs)  # type: ignore[arg-type]
    path = [
        ("prompt_review", lambda: ctl.record_artifact(instance_id, "prompt", PROMPT_V1)),
        ("prompt_revising", lambda: ctl.revise(instance_id, "prompt", PROMPT_FEEDBACK, displayed_version=1)),
        ("prompt_review", lambda: ctl.record_artifact(instance_id, "prompt", PROMPT_V2)),
        ("plan_drafting", lambda: ctl.confirm(instance_id, "prompt", version=2, digest=_digest(s, "prompt"))),
        ("plan_review", lambda: ctl.record_artifact(instance_id, "plan", PLAN_V1)),
        ("plan_revising", lambda: ctl.revise(instance_id, "plan", PLAN_FEEDBACK, displayed_version=1)),
        ("plan_review", lambda: ctl.record_artifact(instance_id, "plan", PLAN_V2)),
        ("executing", lambda: ctl.confirm(instance_id, "plan", version=2, digest=_digest(s, "plan"))),
    ]
    for _, step in path:
        if s.stage == until:
            break
        s = await step()
    assert s.stage == until, (s.stage, until)
    return s


def _digest(state: ProtocolState, kind: str) -> str:
    artifact = state.latest(kind)  # type: ignore[arg-type]
    assert artifact is not None
    return artifact.digest
