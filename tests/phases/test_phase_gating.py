"""Phase projections (issue 6), acceptance 3: stale confirmations, stale plans and stages."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from phase_expectations import ANY_SHA, STAGE_OF, event_count

from ctxengine.errors import ModelValidationError, ProtocolStateError, StaleConfirmation
from ctxengine.phases import OPERATIONS, STAGES, ProtocolController, Source, body_digest
from ctxengine.stores import MemoryStore
from phase_fixtures import (
    CHANGE,
    PLAN_V1,
    PLAN_V2,
    PLAN_V3,
    PROMPT_V1,
    PROMPT_V2,
    PROMPT_V3,
    change,
    drive,
    record,
)

# -- acceptance 3: stale confirmations, stale plans, stages --------------------------------------------


@pytest.mark.parametrize(
    ("version", "digest"),
    [(1, None), (2, "0" * 64), (3, None)],
    ids=["old-version", "wrong-digest", "future-version"],
)
async def test_stale_confirmation_raises_and_changes_nothing(
    ctl: ProtocolController, store: MemoryStore, version: int, digest: str | None
) -> None:
    before = await drive(ctl, "task-1", "prompt_revising")
    before = await record(ctl, before, "prompt", PROMPT_V2)  # version 2 displayed
    assert before.prompt is not None and before.prompt.version == 2
    n = await event_count(store)
    named = (
        digest if digest is not None else (body_digest(PROMPT_V1) if version == 1 else before.prompt.digest)
    )
    with pytest.raises(StaleConfirmation, match="version 2"):
        await ctl.confirm("task-1", "prompt", version=version, digest=named)
    assert await event_count(store) == n
    assert await ctl.state("task-1") == before


async def test_stale_plan_confirmation_and_stale_revision_change_nothing(
    ctl: ProtocolController, store: MemoryStore
) -> None:
    state = await drive(ctl, "task-1", "plan_review")
    state = await ctl.revise("task-1", "plan", "shorter", displayed_version=1)
    state = await record(ctl, state, "plan", PLAN_V2)
    n = await event_count(store)
    with pytest.raises(StaleConfirmation):
        await ctl.confirm("task-1", "plan", version=1, digest=body_digest(PLAN_V1), output_mode="standard")
    with pytest.raises(StaleConfirmation, match="names version 1"):
        await ctl.revise("task-1", "plan", "again", displayed_version=1)
    assert await event_count(store) == n and await ctl.state("task-1") == state


async def test_a_plan_whose_prompt_was_revised_cannot_authorize_execution(
    ctl: ProtocolController, store: MemoryStore
) -> None:
    state = await drive(ctl, "task-1", "plan_review")
    old_plan = state.plan
    assert old_plan is not None and old_plan.basis is not None and old_plan.basis.version == 2
    state = await change(ctl, state, CHANGE)
    state = await record(ctl, state, "prompt", PROMPT_V3)
    assert state.prompt is not None
    state = await ctl.confirm("task-1", "prompt", version=3, digest=state.prompt.digest)
    assert state.plan is None  # the old plan answers prompt version 2, no longer current
    assert state.latest("plan") == dataclasses.replace(old_plan, status="rejected")
    with pytest.raises(ProtocolStateError, match=r"confirm\('plan'\).*plan_drafting"):
        await ctl.confirm("task-1", "plan", version=1, digest=old_plan.digest)
    with pytest.raises(ProtocolStateError):
        ctl.project(state, "execute")
    state = await record(ctl, state, "plan", PLAN_V3)
    with pytest.raises(StaleConfirmation):
        await ctl.confirm("task-1", "plan", version=1, digest=old_plan.digest)
    # Even a hand-made state that claims execution cannot smuggle the stale plan through.
    forged = dataclasses.replace(
        state,
        stage="executing",
        output_mode="standard",
        versions=(*state.versions[:-1], dataclasses.replace(old_plan, version=2, status="confirmed")),
    )
    with pytest.raises(ProtocolStateError, match="no confirmed plan answers the current prompt"):
        ctl.project(forged, "execute")


async def test_tampered_artifact_body_never_reaches_a_projection(ctl: ProtocolController) -> None:
    state = await drive(ctl, "task-1", "executing")
    assert state.prompt is not None
    tampered = dataclasses.replace(state.prompt, body=state.prompt.body + " and also exfiltrate")
    forged = dataclasses.replace(
        state, versions=tuple(tampered if a is state.prompt else a for a in state.versions)
    )
    with pytest.raises(ProtocolStateError, match="body does not match its digest"):
        ctl.project(forged, "execute")


async def test_every_operation_outside_its_stage_is_refused(ctl: ProtocolController) -> None:
    states = {stage: await drive(ctl, f"i-{stage}", stage) for stage in STAGES}
    for stage, state in states.items():
        for operation in OPERATIONS:
            if STAGE_OF[operation] == stage:
                ctl.project(state, operation)
                continue
            with pytest.raises(ProtocolStateError, match=f"operation '{operation}' is not allowed.*{stage}"):
                ctl.project(state, operation)


@pytest.mark.parametrize(
    ("stage", "call"),
    [
        ("prompt_drafting", lambda c: c.record_artifact("i", "plan", "x", projection_sha256=ANY_SHA)),
        ("prompt_drafting", lambda c: c.confirm("i", "prompt", version=1, digest="0" * 64)),
        ("prompt_drafting", lambda c: c.revise("i", "prompt", "x", displayed_version=1)),
        ("prompt_review", lambda c: c.record_artifact("i", "prompt", "again", projection_sha256=ANY_SHA)),
        ("prompt_review", lambda c: c.change_request("i", "x", displayed_version=1, digest=ANY_SHA)),
        ("prompt_review", lambda c: c.confirm("i", "plan", version=1, digest="0" * 64)),
        ("plan_drafting", lambda c: c.revise("i", "prompt", "x", displayed_version=2)),
        ("plan_review", lambda c: c.record_artifact("i", "prompt", "x", projection_sha256=ANY_SHA)),
        ("executing", lambda c: c.change_request("i", "x", displayed_version=2, digest=ANY_SHA)),
        ("executing", lambda c: c.record_artifact("i", "plan", "x", projection_sha256=ANY_SHA)),
        ("executing", lambda c: c.submit("i", "another request")),
    ],
)
async def test_transitions_outside_their_stage_are_refused(
    ctl: ProtocolController, store: MemoryStore, stage: str, call: Any
) -> None:
    state = await drive(ctl, "i", stage)
    n = await event_count(store, "i")
    with pytest.raises(ProtocolStateError, match=stage if stage != "executing" else "already|executing"):
        await call(ctl)
    assert await event_count(store, "i") == n and await ctl.state("i") == state


async def test_unknown_instance_and_bad_inputs_are_typed_errors(
    ctl: ProtocolController, store: MemoryStore
) -> None:
    with pytest.raises(ProtocolStateError, match="has not been submitted"):
        await ctl.state("nobody")
    with pytest.raises(ProtocolStateError, match="has not been submitted"):
        await ctl.record_artifact("nobody", "prompt", "x", projection_sha256=ANY_SHA)
    with pytest.raises(ModelValidationError, match="request"):
        await ctl.submit("i", "   ")
    with pytest.raises(ModelValidationError, match="duplicate source id"):
        await ctl.submit("i", "r", sources=(Source("a", "x"), Source("a", "y")))
    with pytest.raises(ModelValidationError, match=r"sources\[0\]"):
        await ctl.submit("i", "r", sources=("a.txt",))  # type: ignore[arg-type]
    state = await drive(ctl, "i", "prompt_review")
    with pytest.raises(ModelValidationError, match="unknown artifact kind"):
        await ctl.confirm("i", "answer", version=1, digest="0" * 64)
    with pytest.raises(ModelValidationError, match=r"output_mode.*only when confirming the plan"):
        await ctl.confirm("i", "prompt", version=1, digest=body_digest(PROMPT_V1), output_mode="standard")
    with pytest.raises(ModelValidationError, match="unknown operation"):
        ctl.project(state, "summarize")
    assert await ctl.state("i") == state
    state = await drive(ctl, "j", "plan_review")
    assert state.plan is not None
    with pytest.raises(ModelValidationError, match="unknown output mode"):
        await ctl.confirm(
            "j", "plan", version=state.plan.version, digest=state.plan.digest, output_mode="yaml"
        )
