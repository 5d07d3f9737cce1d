"""``decide(state, command)``: the one place a protocol transition is validated.

It returns the event (type and payload) the command produces from the state,
or raises a typed error and produces nothing: ``ProtocolStateError`` for a
call the stage does not allow or a required name the call omits,
``StaleConfirmation`` for a call that names something other than what is
current (a displayed version, an input request), ``ModelValidationError``
for malformed input. Replay re-decides every stored event with it.

Whether a model reply answers the *current* projection cannot be decided
here: projections depend on the compiler's packs, which are configuration,
not state. The controller checks that before it appends, and the payload
keeps the projection hash as provenance.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.canonical import canonical_json
from ..errors import ModelValidationError, ProtocolStateError, StaleConfirmation
from ..model import ToolSpec
from .commands import (
    ARTIFACT_RECORDED,
    CHANGE_REQUESTED,
    COMPLETED,
    CONFIRMED,
    FAILED,
    INPUT_PROVIDED,
    INPUT_REQUESTED,
    REVIEW_INTERPRETED,
    REVIEW_RECEIVED,
    REVISED,
    STOPPED,
    SUBMITTED,
    ChangeRequest,
    Command,
    Complete,
    Confirm,
    Fail,
    Interpret,
    ProvideInput,
    Record,
    RequestInput,
    Review,
    Revise,
    Stop,
    Submit,
)
from .state import (
    ACTIVE_STAGES,
    PROTOCOL_VERSIONS,
    TERMINAL_STAGES,
    Artifact,
    ArtifactKind,
    OutputMode,
    Source,
    Stage,
    StateQueries,
    body_digest,
    check_digest,
    check_kind,
    check_output_mode,
    check_verdict,
    is_blank,
)

Decision = tuple[str, dict[str, Any]]

DRAFTING: dict[ArtifactKind, Stage] = {"prompt": "prompt_drafting", "plan": "plan_drafting"}
REVIEW: dict[ArtifactKind, Stage] = {"prompt": "prompt_review", "plan": "plan_review"}
REVISING: dict[ArtifactKind, Stage] = {"prompt": "prompt_revising", "plan": "plan_revising"}


def _where(state: StateQueries) -> str:
    return f"instance {state.instance_id!r} in stage {state.stage!r}"


def _require_stage(state: StateQueries | None, action: str, allowed: Sequence[Stage]) -> StateQueries:
    if state is None:
        raise ProtocolStateError(f"{action}: the instance has not been submitted")
    if state.stage in TERMINAL_STAGES:
        raise ProtocolStateError(
            f"{action} is not allowed for {_where(state)}: the instance is closed and accepts no "
            "further transitions (a new task is a new instance)"
        )
    if state.stage not in allowed:
        raise ProtocolStateError(
            f"{action} is not allowed for {_where(state)}; allowed in: {', '.join(allowed)}"
        )
    return state


def require_named(action: str, instance_id: str, **named: object) -> None:
    """A call that omits a name it must carry is a ``ProtocolStateError`` naming what is missing."""
    missing = [name for name, value in named.items() if value is None]
    if missing:
        raise ProtocolStateError(
            f"{action} for instance {instance_id!r} is missing {' and '.join(missing)}: it must name "
            "what it answers, so that a stale call can be told from a current one"
        )


def _text(type_name: str, field: str, value: object) -> str:
    if not isinstance(value, str) or is_blank(value):
        raise ModelValidationError(type_name, field, f"expected a non-empty str, got {value!r}")
    return value


def _int(type_name: str, field: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ModelValidationError(type_name, field, f"expected int, got {value!r}")
    return value


def _sha(type_name: str, value: object) -> str:
    if not isinstance(value, str):
        raise ModelValidationError(type_name, "projection_sha256", f"expected str, got {value!r}")
    check_digest(type_name, value)
    return value


def _decide_submit(state: StateQueries | None, cmd: Submit) -> Decision:
    if state is not None:
        raise ProtocolStateError(f"submit: {_where(state)} has already been submitted")
    n = "submit"
    _text(n, "request", cmd.request)
    if cmd.protocol_version not in PROTOCOL_VERSIONS or isinstance(cmd.protocol_version, bool):
        raise ModelValidationError(
            n,
            "protocol_version",
            f"unknown protocol version {cmd.protocol_version!r}; this code knows {PROTOCOL_VERSIONS}",
        )
    seen: set[str] = set()
    for i, source in enumerate(cmd.sources):
        if not isinstance(source, Source):
            raise ModelValidationError(n, f"sources[{i}]", f"expected Source, got {type(source).__name__}")
        if source.source_id in seen:
            raise ModelValidationError(n, f"sources[{i}]", f"duplicate source id {source.source_id!r}")
        seen.add(source.source_id)
    for i, constraint in enumerate(cmd.constraints):
        _text(n, f"constraints[{i}]", constraint)
    names: set[str] = set()
    for i, tool in enumerate(cmd.tools):
        if not isinstance(tool, ToolSpec):
            raise ModelValidationError(n, f"tools[{i}]", f"expected ToolSpec, got {type(tool).__name__}")
        if tool.name in names:
            raise ModelValidationError(n, f"tools[{i}]", f"duplicate tool name {tool.name!r}")
        names.add(tool.name)
    payload: dict[str, Any] = {
        "request": cmd.request,
        "sources": [s.to_dict() for s in cmd.sources],
        "constraints": list(cmd.constraints),
        "tools": [t.to_dict() for t in cmd.tools],
    }
    if cmd.protocol_version != 1:
        # Format-1 payloads had no version: they must re-decide to the same bytes.
        payload["protocol_version"] = cmd.protocol_version
    return SUBMITTED, payload


def _decide_record(state: StateQueries | None, cmd: Record) -> Decision:
    kind = check_kind("record_artifact", cmd.kind)
    s = _require_stage(state, f"record_artifact({kind!r})", (DRAFTING[kind], REVISING[kind]))
    body = _text("record_artifact", "body", cmd.body)
    if cmd.projection_sha256 is None and s.protocol_version >= 2:
        require_named(f"record_artifact({kind!r})", s.instance_id, projection_sha256=None)
    basis: dict[str, Any] | None = None
    if kind == "plan":
        # Stage guarantees a confirmed prompt; recording it pins what the plan answers.
        prompt = s.prompt
        if prompt is None or prompt.status != "confirmed":  # pragma: no cover - stage invariant
            raise ProtocolStateError(f"record_artifact('plan'): {_where(s)} has no confirmed prompt")
        basis = prompt.ref.to_dict()
    payload: dict[str, Any] = {
        "kind": kind,
        "version": s.count(kind) + 1,
        "body": body,
        "digest": body_digest(body),
        "basis": basis,
    }
    if cmd.projection_sha256 is not None:
        answered = _sha("record_artifact", cmd.projection_sha256)
        if s.protocol_version >= 2:
            # A version-1 instance keeps writing format-1 rows for format-1 transitions, so a
            # worker that predates format 2 can still read it (the controller checked the hash).
            payload["projection_sha256"] = answered
    return ARTIFACT_RECORDED, payload


def _displayed(state: StateQueries, kind: ArtifactKind) -> Artifact:
    shown = state.displayed
    if shown is None or shown.kind != kind or shown.status != "displayed":  # pragma: no cover - invariant
        raise ProtocolStateError(f"{_where(state)} displays no {kind}")
    return shown


def _decide_revise(state: StateQueries | None, cmd: Revise) -> Decision:
    kind = check_kind("revise", cmd.kind)
    s = _require_stage(state, f"revise({kind!r})", (REVIEW[kind],))
    feedback = _text("revise", "feedback", cmd.feedback)
    _int("revise", "displayed_version", cmd.displayed_version)
    shown = _displayed(s, kind)
    if cmd.displayed_version != shown.version:
        raise StaleConfirmation(
            f"revise({kind!r}) for instance {s.instance_id!r} names version {cmd.displayed_version}, "
            f"but version {shown.version} is displayed"
        )
    return REVISED, {"kind": kind, "version": shown.version, "digest": shown.digest, "feedback": feedback}


def _stale_view(action: str, s: StateQueries, version: int, digest: str, shown: Artifact) -> None:
    if version != shown.version or digest != shown.digest:
        raise StaleConfirmation(
            f"{action} for instance {s.instance_id!r} names version {version} "
            f"(sha256 {digest[:12]}...), but version {shown.version} (sha256 {shown.digest[:12]}...) "
            "is displayed"
        )


def _decide_confirm(state: StateQueries | None, cmd: Confirm) -> Decision:
    kind = check_kind("confirm", cmd.kind)
    s = _require_stage(state, f"confirm({kind!r})", (REVIEW[kind],))
    _int("confirm", "version", cmd.version)
    if not isinstance(cmd.digest, str):
        raise ModelValidationError("confirm", "digest", f"expected str, got {type(cmd.digest).__name__}")
    mode: OutputMode | None
    if kind == "prompt":
        if cmd.output_mode is not None:
            raise ModelValidationError("confirm", "output_mode", "applies only when confirming the plan")
        mode = None
    else:
        mode = check_output_mode("confirm", "standard" if cmd.output_mode is None else cmd.output_mode)
    shown = _displayed(s, kind)
    _stale_view(f"confirm({kind!r})", s, cmd.version, cmd.digest, shown)
    if kind == "plan":
        prompt = s.prompt
        if prompt is None or prompt.status != "confirmed" or shown.basis != prompt.ref:
            raise ProtocolStateError(
                f"confirm('plan'): plan version {shown.version} of instance {s.instance_id!r} was not "
                "drafted from the current confirmed prompt"
            )
    return CONFIRMED, {"kind": kind, "version": shown.version, "digest": shown.digest, "output_mode": mode}


def _plan_feedback(action: str, state: StateQueries | None, cmd: ChangeRequest | Review) -> Decision:
    """Feedback on the displayed plan: it names the version and digest the user saw."""
    s = _require_stage(state, action, ("plan_review",))
    feedback = _text(action, "feedback", cmd.feedback)
    require_named(action, s.instance_id, displayed_version=cmd.displayed_version, digest=cmd.digest)
    assert cmd.displayed_version is not None and cmd.digest is not None
    _int(action, "displayed_version", cmd.displayed_version)
    if not isinstance(cmd.digest, str):
        raise ModelValidationError(action, "digest", f"expected str, got {type(cmd.digest).__name__}")
    plan = _displayed(s, "plan")
    _stale_view(action, s, cmd.displayed_version, cmd.digest, plan)
    return action, {"feedback": feedback, "plan_version": plan.version, "plan_digest": plan.digest}


def _decide_change(state: StateQueries | None, cmd: ChangeRequest) -> Decision:
    _, fields = _plan_feedback("change_request", state, cmd)
    assert state is not None
    prompt = state.prompt
    if prompt is None:  # pragma: no cover - stage invariant
        raise ProtocolStateError(f"change_request: {_where(state)} has no prompt")
    # Format-1 key order and fields, unchanged.
    return CHANGE_REQUESTED, {
        "feedback": fields["feedback"],
        "prompt_version": prompt.version,
        "prompt_digest": prompt.digest,
        "plan_version": fields["plan_version"],
        "plan_digest": fields["plan_digest"],
    }


def _decide_review(state: StateQueries | None, cmd: Review) -> Decision:
    _, fields = _plan_feedback("review", state, cmd)
    return REVIEW_RECEIVED, fields


def _decide_interpret(state: StateQueries | None, cmd: Interpret) -> Decision:
    s = _require_stage(state, "interpret_review", ("review_interpreting",))
    verdict = check_verdict("interpret_review", cmd.verdict)
    require_named("interpret_review", s.instance_id, projection_sha256=cmd.projection_sha256)
    return REVIEW_INTERPRETED, {
        "verdict": verdict,
        "projection_sha256": _sha("interpret_review", cmd.projection_sha256),
    }


def _decide_request_input(state: StateQueries | None, cmd: RequestInput) -> Decision:
    s = _require_stage(state, "request_input", ("executing",))
    question = _text("request_input", "question", cmd.question)
    require_named("request_input", s.instance_id, projection_sha256=cmd.projection_sha256)
    return INPUT_REQUESTED, {
        "number": len(s.inputs) + 1,
        "question": question,
        "digest": body_digest(question),
        "projection_sha256": _sha("request_input", cmd.projection_sha256),
    }


def _decide_provide_input(state: StateQueries | None, cmd: ProvideInput) -> Decision:
    s = _require_stage(state, "provide_input", ("waiting_input",))
    answer = _text("provide_input", "answer", cmd.answer)
    require_named("provide_input", s.instance_id, request_number=cmd.request_number)
    number = _int("provide_input", "request_number", cmd.request_number)
    pending = s.pending_input
    if pending is None:  # pragma: no cover - stage invariant
        raise ProtocolStateError(f"provide_input: {_where(s)} has no pending input request")
    if number != pending.number:
        raise StaleConfirmation(
            f"provide_input for instance {s.instance_id!r} answers input request {number}, but request "
            f"{pending.number} is pending"
        )
    return INPUT_PROVIDED, {"number": pending.number, "answer": answer}


def _decide_complete(state: StateQueries | None, cmd: Complete) -> Decision:
    s = _require_stage(state, "complete", ("executing",))
    result = _text("complete", "result", cmd.result)
    require_named("complete", s.instance_id, projection_sha256=cmd.projection_sha256)
    prompt, plan = s.prompt, s.plan
    if prompt is None or plan is None or s.output_mode is None:  # pragma: no cover - stage invariant
        raise ProtocolStateError(f"complete: {_where(s)} has no confirmed prompt and plan")
    return COMPLETED, {
        "result": result,
        "digest": body_digest(result),
        "prompt": prompt.ref.to_dict(),
        "plan": plan.ref.to_dict(),
        "output_mode": s.output_mode,
        "projection_sha256": _sha("complete", cmd.projection_sha256),
    }


def _decide_stop(state: StateQueries | None, cmd: Stop) -> Decision:
    s = _require_stage(state, "stop", ACTIVE_STAGES)
    reason = None if cmd.reason is None else _text("stop", "reason", cmd.reason)
    return STOPPED, {"stage": s.stage, "reason": reason}


def _decide_fail(state: StateQueries | None, cmd: Fail) -> Decision:
    s = _require_stage(state, "fail", ACTIVE_STAGES)
    return FAILED, {"stage": s.stage, "reason": _text("fail", "reason", cmd.reason)}


def decide(state: StateQueries | None, cmd: Command) -> Decision:
    """The event ``cmd`` produces from ``state``; a typed error (and no event) when it is not allowed."""
    if isinstance(cmd, Submit):
        return _decide_submit(state, cmd)
    if isinstance(cmd, Record):
        return _decide_record(state, cmd)
    if isinstance(cmd, Revise):
        return _decide_revise(state, cmd)
    if isinstance(cmd, Confirm):
        return _decide_confirm(state, cmd)
    if isinstance(cmd, ChangeRequest):
        return _decide_change(state, cmd)
    if isinstance(cmd, Review):
        return _decide_review(state, cmd)
    if isinstance(cmd, Interpret):
        return _decide_interpret(state, cmd)
    if isinstance(cmd, RequestInput):
        return _decide_request_input(state, cmd)
    if isinstance(cmd, ProvideInput):
        return _decide_provide_input(state, cmd)
    if isinstance(cmd, Complete):
        return _decide_complete(state, cmd)
    if isinstance(cmd, Stop):
        return _decide_stop(state, cmd)
    return _decide_fail(state, cmd)


def same_decision(a: Decision, b: Decision) -> bool:
    """Equal type and canonical payload (tuples and lists, key order do not matter)."""
    return a[0] == b[0] and canonical_json(a[1]) == canonical_json(b[1])


__all__ = ["DRAFTING", "REVIEW", "REVISING", "Decision", "decide", "require_named", "same_decision"]
