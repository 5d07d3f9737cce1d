"""Phase projections (issue 6), acceptance 2: replaced versions and spent feedback stay out."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxengine.phases import ProtocolController, ProtocolState, body_digest, symbols_of
from ctxengine.stores import MemoryStore
from phase_fixtures import (
    CHANGE,
    CONSTRAINTS,
    PLAN_V1,
    PLAN_V2,
    PLAN_V3,
    PROMPT_V1,
    PROMPT_V2,
    PROMPT_V3,
    TOOLS,
    change,
    drive,
    full_protocol,
    record,
    text_of,
)

# -- acceptance 2: poisoning -------------------------------------------------------------------------


async def test_rejected_versions_and_feedback_never_reach_a_later_projection(ctl: ProtocolController) -> None:
    _, trace = await full_protocol(ctl)
    assert [op for op, _, _ in trace.steps] == [
        "draft_prompt",
        "revise_prompt",
        "draft_plan",
        "revise_plan",
        "revise_prompt",
        "draft_plan",
        "execute",
    ]
    for operation, projection, retired in trace.steps:
        text = text_of(projection)
        leaked = sorted(m for m in retired if m in text)
        assert not leaked, f"{operation} carries retired markers {leaked}"
    # The check can see: a revision projection does carry the version and feedback it revises.
    first_revision = text_of(trace.steps[1][1])
    assert "MARK-PROMPT-V1-rejected" in first_revision and "MARK-PROMPT-FEEDBACK" in first_revision
    change_revision = text_of(trace.steps[4][1])
    assert "MARK-CHANGE-REQUEST" in change_revision and "MARK-PROMPT-V2" in change_revision
    assert "MARK-PLAN-V2" not in change_revision  # the invalidated plan is not part of a prompt revision


async def test_plan_and_execute_projections_do_not_carry_the_raw_request(ctl: ProtocolController) -> None:
    _, trace = await full_protocol(ctl)
    for operation, projection, _ in trace.steps:
        carries = "MARK-REQUEST" in text_of(projection)
        assert carries == (operation in {"draft_prompt", "revise_prompt"}), operation


async def test_execute_carries_confirmed_artifacts_verbatim_with_version_and_digest(
    ctl: ProtocolController,
) -> None:
    state, trace = await full_protocol(ctl, output_mode="pseudocode")
    operation, projection, _ = trace.steps[-1]
    assert operation == "execute"
    request = projection.request
    items = {item.region_class: item.text or "" for item in request.body}
    prompt_text, plan_text = items["phase.confirmed_prompt"], items["phase.confirmed_plan"]
    assert prompt_text == (
        f"Confirmed Prompt Pseudocode (version 3, sha256 {body_digest(PROMPT_V3)}):\n{PROMPT_V3}"
    )
    assert plan_text == (
        f"Confirmed Response Plan Pseudocode (version 3, sha256 {body_digest(PLAN_V3)}):\n{PLAN_V3}"
    )
    assert state.prompt is not None and state.plan is not None
    assert (state.prompt.version, state.prompt.digest) == (3, body_digest(PROMPT_V3))
    assert items["phase.output_mode"].startswith("Output mode: pseudocode")
    assert request.tools == TOOLS
    assert all(c in items["phase.constraints"] for c in CONSTRAINTS)
    assert "MARK-SOURCE-CONTENT-0b7e" in items["phase.task_inputs"]
    # Pseudocode output needs the notation: the conventions join the execute prefix.
    assert "phase.conventions" in {item.region_class for item in request.prefix}
    refs = projection.manifest["artifacts"]
    assert refs == [
        {"symbol": "confirmed_prompt", "kind": "prompt", "version": 3, "digest": body_digest(PROMPT_V3)},
        {"symbol": "confirmed_plan", "kind": "plan", "version": 3, "digest": body_digest(PLAN_V3)},
    ]


async def test_standard_output_mode_execute_has_no_conventions(ctl: ProtocolController) -> None:
    state = await drive(ctl, "task-1", "executing")
    assert state.output_mode == "standard"
    symbols = symbols_of(ctl.project(state, "execute").request)
    assert "conventions" not in symbols and "output_mode" in symbols


async def test_state_keeps_every_version_and_feedback_for_audit(ctl: ProtocolController) -> None:
    state, _ = await full_protocol(ctl)
    assert [(a.kind, a.version, a.status) for a in state.versions] == [
        ("prompt", 1, "rejected"),
        ("prompt", 2, "superseded"),
        ("plan", 1, "rejected"),
        ("plan", 2, "rejected"),
        ("prompt", 3, "confirmed"),
        ("plan", 3, "confirmed"),
    ]
    assert [a.body for a in state.versions] == [PROMPT_V1, PROMPT_V2, PLAN_V1, PLAN_V2, PROMPT_V3, PLAN_V3]
    assert [(f.kind, f.version, f.origin) for f in state.feedback] == [
        ("prompt", 1, "revise"),
        ("plan", 1, "revise"),
        ("prompt", 2, "change_request"),
    ]
    assert state.feedback[2].text == CHANGE and state.pending_feedback is None
    assert [r.type for r in state.history][:2] == ["phase.submitted", "phase.artifact.recorded"]


MARKER = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=12, max_size=24
)


@settings(
    max_examples=40,
    deadline=None,
    # The only function-scoped fixture is the backend switch, which holds no per-example state.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(markers=st.lists(MARKER, min_size=6, max_size=6, unique=True), rounds=st.integers(1, 3))
def test_random_markers_of_replaced_versions_never_leak(markers: list[str], rounds: int) -> None:
    """Any number of revision rounds: every replaced version and spent feedback stays out."""
    p_body, p_fb, l_body, l_fb, chg, req = (f"QX{m}" for m in markers)

    async def scenario() -> None:
        ctl = ProtocolController(MemoryStore())
        retired: set[str] = set()
        seen: list[tuple[str, str, frozenset[str]]] = []

        def look(state: ProtocolState, op: str) -> None:
            # Once the prompt is confirmed, only a prompt revision may see the raw request again.
            gone = retired | ({req} if op in {"draft_plan", "revise_plan", "execute"} else set())
            seen.append((op, text_of(ctl.project(state, op)), frozenset(gone)))

        s = await ctl.submit("i", f"request {req}", constraints=("c",))
        look(s, "draft_prompt")
        for n in range(1, rounds + 1):
            s = await record(ctl, s, "prompt", f"prompt {p_body}-{n}")
            retired.add(f"{p_fb}-{n - 1}")
            s = await ctl.revise("i", "prompt", f"fb {p_fb}-{n}", displayed_version=n)
            look(s, "revise_prompt")
            retired.add(f"{p_body}-{n}")
        s = await record(ctl, s, "prompt", "final prompt")
        retired.add(f"{p_fb}-{rounds}")
        assert s.prompt is not None
        s = await ctl.confirm("i", "prompt", version=rounds + 1, digest=s.prompt.digest)
        look(s, "draft_plan")
        for n in range(1, rounds + 1):
            s = await record(ctl, s, "plan", f"plan {l_body}-{n}")
            retired.add(f"{l_fb}-{n - 1}")
            s = await ctl.revise("i", "plan", f"fb {l_fb}-{n}", displayed_version=n)
            look(s, "revise_plan")
            retired.add(f"{l_body}-{n}")
        s = await record(ctl, s, "plan", f"plan {l_body}-last")
        retired.add(f"{l_fb}-{rounds}")
        s = await change(ctl, s, f"change {chg}")
        look(s, "revise_prompt")
        s = await record(ctl, s, "prompt", "prompt after change")
        # The change amends the request of later *prompt* projections; plan and execute never see it.
        retired |= {f"{l_body}-last", chg, "final prompt"}
        assert s.prompt is not None
        s = await ctl.confirm("i", "prompt", version=rounds + 2, digest=s.prompt.digest)
        look(s, "draft_plan")
        s = await record(ctl, s, "plan", "plan after change")
        assert s.plan is not None
        s = await ctl.confirm("i", "plan", version=rounds + 2, digest=s.plan.digest)
        look(s, "execute")
        assert [op for op, _, _ in seen][-3:] == ["revise_prompt", "draft_plan", "execute"]
        for op, text, gone in seen:
            assert not [m for m in gone if m in text], op

    asyncio.run(scenario())
