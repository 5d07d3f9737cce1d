"""The stage machine: commands, the pure decision, and the fold over ``phase.*`` events.

::

    submit -> prompt_drafting --record--> prompt_review --confirm--> plan_drafting
                  prompt_review --revise--> prompt_revising --record--> prompt_review
    plan_drafting --record--> plan_review --confirm--> executing
                  plan_review --revise--> plan_revising --record--> plan_review
                  plan_review --change_request--> prompt_revising (the plan is rejected)

``decide(state, command)`` validates a command against the state and returns
the event to append; ``evolve`` applies a stored event. The same ``decide``
checks every event on replay (the event must be exactly what its command
yields from the state before it), so a log that was edited by hand or written
by a buggy worker fails closed with ``StoreCorruption`` instead of rebuilding
a state the controller would never have allowed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.canonical import canonical_json, payload_hash
from ..errors import (
    ContextError,
    ModelValidationError,
    ProtocolStateError,
    StaleConfirmation,
    StoreCorruption,
)
from ..model import ToolSpec
from ..stores.events import Event
from .state import (
    Artifact,
    ArtifactKind,
    ArtifactRef,
    Feedback,
    OutputMode,
    PhaseRecord,
    ProtocolState,
    Source,
    Stage,
    body_digest,
    check_digest,
    check_kind,
    check_output_mode,
)

SUBMITTED = "phase.submitted"
ARTIFACT_RECORDED = "phase.artifact.recorded"
REVISED = "phase.revised"
CONFIRMED = "phase.confirmed"
CHANGE_REQUESTED = "phase.change_requested"
PHASE_EVENT_TYPES = frozenset({SUBMITTED, ARTIFACT_RECORDED, REVISED, CONFIRMED, CHANGE_REQUESTED})


@dataclass(frozen=True, slots=True)
class Submit:
    request: str
    sources: tuple[Source, ...] = ()
    constraints: tuple[str, ...] = ()
    tools: tuple[ToolSpec, ...] = ()


# Command fields carry caller input as given; ``decide`` validates them.


@dataclass(frozen=True, slots=True)
class Record:
    kind: str
    body: str


@dataclass(frozen=True, slots=True)
class Revise:
    kind: str
    feedback: str
    displayed_version: int


@dataclass(frozen=True, slots=True)
class Confirm:
    kind: str
    version: int
    digest: str
    output_mode: str | None = None


@dataclass(frozen=True, slots=True)
class ChangeRequest:
    feedback: str


Command = Submit | Record | Revise | Confirm | ChangeRequest
Decision = tuple[str, dict[str, Any]]

DRAFTING: dict[ArtifactKind, Stage] = {"prompt": "prompt_drafting", "plan": "plan_drafting"}
REVIEW: dict[ArtifactKind, Stage] = {"prompt": "prompt_review", "plan": "plan_review"}
REVISING: dict[ArtifactKind, Stage] = {"prompt": "prompt_revising", "plan": "plan_revising"}


def _where(state: ProtocolState) -> str:
    return f"instance {state.instance_id!r} in stage {state.stage!r}"


def _require_stage(state: ProtocolState | None, action: str, allowed: Sequence[Stage]) -> ProtocolState:
    if state is None:
        raise ProtocolStateError(f"{action}: the instance has not been submitted")
    if state.stage not in allowed:
        raise ProtocolStateError(
            f"{action} is not allowed for {_where(state)}; allowed in: {', '.join(allowed)}"
        )
    return state


def _text(type_name: str, field: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ModelValidationError(type_name, field, f"expected a non-empty str, got {value!r}")
    return value


def _decide_submit(state: ProtocolState | None, cmd: Submit) -> Decision:
    if state is not None:
        raise ProtocolStateError(f"submit: {_where(state)} has already been submitted")
    n = "submit"
    _text(n, "request", cmd.request)
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
    return SUBMITTED, {
        "request": cmd.request,
        "sources": [s.to_dict() for s in cmd.sources],
        "constraints": list(cmd.constraints),
        "tools": [t.to_dict() for t in cmd.tools],
    }


def _decide_record(state: ProtocolState | None, cmd: Record) -> Decision:
    kind = check_kind("record_artifact", cmd.kind)
    s = _require_stage(state, f"record_artifact({kind!r})", (DRAFTING[kind], REVISING[kind]))
    body = _text("record_artifact", "body", cmd.body)
    basis: dict[str, Any] | None = None
    if kind == "plan":
        # Stage guarantees a confirmed prompt; recording it pins what the plan answers.
        prompt = s.prompt
        if prompt is None or prompt.status != "confirmed":  # pragma: no cover - stage invariant
            raise ProtocolStateError(f"record_artifact('plan'): {_where(s)} has no confirmed prompt")
        basis = prompt.ref.to_dict()
    return ARTIFACT_RECORDED, {
        "kind": kind,
        "version": s.count(kind) + 1,
        "body": body,
        "digest": body_digest(body),
        "basis": basis,
    }


def _displayed(state: ProtocolState, kind: ArtifactKind) -> Artifact:
    shown = state.displayed
    if shown is None or shown.kind != kind or shown.status != "displayed":  # pragma: no cover - invariant
        raise ProtocolStateError(f"{_where(state)} displays no {kind}")
    return shown


def _decide_revise(state: ProtocolState | None, cmd: Revise) -> Decision:
    kind = check_kind("revise", cmd.kind)
    s = _require_stage(state, f"revise({kind!r})", (REVIEW[kind],))
    feedback = _text("revise", "feedback", cmd.feedback)
    if not isinstance(cmd.displayed_version, int) or isinstance(cmd.displayed_version, bool):
        raise ModelValidationError(
            "revise", "displayed_version", f"expected int, got {cmd.displayed_version!r}"
        )
    shown = _displayed(s, kind)
    if cmd.displayed_version != shown.version:
        raise StaleConfirmation(
            f"revise({kind!r}) for instance {s.instance_id!r} names version {cmd.displayed_version}, "
            f"but version {shown.version} is displayed"
        )
    return REVISED, {"kind": kind, "version": shown.version, "digest": shown.digest, "feedback": feedback}


def _decide_confirm(state: ProtocolState | None, cmd: Confirm) -> Decision:
    kind = check_kind("confirm", cmd.kind)
    s = _require_stage(state, f"confirm({kind!r})", (REVIEW[kind],))
    if not isinstance(cmd.version, int) or isinstance(cmd.version, bool):
        raise ModelValidationError("confirm", "version", f"expected int, got {cmd.version!r}")
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
    if cmd.version != shown.version or cmd.digest != shown.digest:
        raise StaleConfirmation(
            f"confirm({kind!r}) for instance {s.instance_id!r} names version {cmd.version} "
            f"(sha256 {cmd.digest[:12]}...), but version {shown.version} (sha256 {shown.digest[:12]}...) "
            "is displayed"
        )
    if kind == "plan":
        prompt = s.prompt
        if prompt is None or prompt.status != "confirmed" or shown.basis != prompt.ref:
            raise ProtocolStateError(
                f"confirm('plan'): plan version {shown.version} of instance {s.instance_id!r} was not "
                "drafted from the current confirmed prompt"
            )
    return CONFIRMED, {"kind": kind, "version": shown.version, "digest": shown.digest, "output_mode": mode}


def _decide_change(state: ProtocolState | None, cmd: ChangeRequest) -> Decision:
    s = _require_stage(state, "change_request", ("plan_review",))
    feedback = _text("change_request", "feedback", cmd.feedback)
    plan = _displayed(s, "plan")
    prompt = s.prompt
    if prompt is None:  # pragma: no cover - stage invariant
        raise ProtocolStateError(f"change_request: {_where(s)} has no prompt")
    return CHANGE_REQUESTED, {
        "feedback": feedback,
        "prompt_version": prompt.version,
        "prompt_digest": prompt.digest,
        "plan_version": plan.version,
        "plan_digest": plan.digest,
    }


def decide(state: ProtocolState | None, cmd: Command) -> Decision:
    """The event ``cmd`` produces from ``state``; a typed error (and no event) when it is not allowed."""
    if isinstance(cmd, Submit):
        return _decide_submit(state, cmd)
    if isinstance(cmd, Record):
        return _decide_record(state, cmd)
    if isinstance(cmd, Revise):
        return _decide_revise(state, cmd)
    if isinstance(cmd, Confirm):
        return _decide_confirm(state, cmd)
    return _decide_change(state, cmd)


def command_of(event_type: str, payload: Mapping[str, Any]) -> Command:
    """The command that a stored event claims to be the result of."""
    if event_type == SUBMITTED:
        return Submit(
            payload["request"],
            tuple(Source.from_dict(s) for s in payload["sources"]),
            tuple(payload["constraints"]),
            tuple(ToolSpec.from_dict(t) for t in payload["tools"]),
        )
    if event_type == ARTIFACT_RECORDED:
        return Record(payload["kind"], payload["body"])
    if event_type == REVISED:
        return Revise(payload["kind"], payload["feedback"], payload["version"])
    if event_type == CONFIRMED:
        return Confirm(payload["kind"], payload["version"], payload["digest"], payload["output_mode"])
    if event_type == CHANGE_REQUESTED:
        return ChangeRequest(payload["feedback"])
    raise ModelValidationError("phase event", "type", f"not a phase event type: {event_type!r}")


def same_decision(a: Decision, b: Decision) -> bool:
    """Equal type and canonical payload (tuples and lists, key order do not matter)."""
    return a[0] == b[0] and canonical_json(a[1]) == canonical_json(b[1])


def _replace_latest(state: ProtocolState, kind: ArtifactKind, **changes: Any) -> tuple[Artifact, ...]:
    target = state.latest(kind)
    return tuple(dataclasses.replace(a, **changes) if a is target else a for a in state.versions)


def evolve(
    state: ProtocolState | None, instance_id: str, event_type: str, payload: Mapping[str, Any], sequence: int
) -> ProtocolState:
    """``state`` after the (already validated) event."""
    record = PhaseRecord(sequence, event_type, payload_hash(dict(payload)))
    if event_type == SUBMITTED:
        cmd = command_of(event_type, payload)
        assert isinstance(cmd, Submit)
        return ProtocolState(
            instance_id,
            "prompt_drafting",
            cmd.request,
            sources=cmd.sources,
            constraints=cmd.constraints,
            tools=cmd.tools,
            history=(record,),
        )
    assert state is not None
    history = (*state.history, record)
    if event_type == ARTIFACT_RECORDED:
        kind = check_kind("phase.artifact.recorded", payload["kind"])
        versions = state.versions
        previous = state.latest(kind)
        if previous is not None and previous.status == "confirmed":
            # Only a change request reopens a confirmed prompt; its successor replaces it.
            versions = _replace_latest(state, kind, status="superseded")
        basis = payload["basis"]
        artifact = Artifact(
            kind,
            payload["version"],
            payload["body"],
            payload["digest"],
            "displayed",
            None if basis is None else ArtifactRef.from_dict(basis),
        )
        return dataclasses.replace(
            state, stage=REVIEW[kind], versions=(*versions, artifact), pending_feedback=None, history=history
        )
    if event_type == REVISED:
        kind = check_kind("phase.revised", payload["kind"])
        fb = Feedback(kind, payload["version"], payload["feedback"], "revise")
        return dataclasses.replace(
            state,
            stage=REVISING[kind],
            versions=_replace_latest(state, kind, status="rejected"),
            feedback=(*state.feedback, fb),
            pending_feedback=fb,
            history=history,
        )
    if event_type == CONFIRMED:
        kind = check_kind("phase.confirmed", payload["kind"])
        return dataclasses.replace(
            state,
            stage="plan_drafting" if kind == "prompt" else "executing",
            versions=_replace_latest(state, kind, status="confirmed"),
            output_mode=state.output_mode if kind == "prompt" else payload["output_mode"],
            history=history,
        )
    if event_type == CHANGE_REQUESTED:
        fb = Feedback("prompt", payload["prompt_version"], payload["feedback"], "change_request")
        return dataclasses.replace(
            state,
            stage="prompt_revising",
            versions=_replace_latest(state, "plan", status="rejected"),
            feedback=(*state.feedback, fb),
            pending_feedback=fb,
            history=history,
        )
    raise ModelValidationError("phase event", "type", f"not a phase event type: {event_type!r}")


@dataclass(frozen=True, slots=True)
class Replay:
    """The folded state, the state before the last event, and that event (retry detection)."""

    state: ProtocolState | None
    previous: ProtocolState | None
    last: Event | None


def replay(instance_id: str, events: Iterable[Event]) -> Replay:
    """Fold ``events`` (one instance's ``phase.*`` events, in order), checking each one."""
    state: ProtocolState | None = None
    previous: ProtocolState | None = None
    last: Event | None = None
    for event in events:
        if event.type not in PHASE_EVENT_TYPES:
            continue
        try:
            expected = decide(state, command_of(event.type, event.payload))
            if not same_decision(expected, (event.type, event.payload)):
                raise StoreCorruption(
                    instance_id, event.sequence, f"{event.type} payload differs from what its command yields"
                )
            previous, state = state, evolve(state, instance_id, event.type, event.payload, event.sequence)
        except StoreCorruption:
            raise
        except (ContextError, KeyError, TypeError) as exc:
            raise StoreCorruption(
                instance_id, event.sequence, f"{event.type} cannot be replayed: {type(exc).__name__}: {exc}"
            ) from exc
        last = event
    return Replay(state, previous, last)


def check_integrity(artifact: Artifact) -> None:
    """An artifact whose body no longer hashes to its digest never reaches a projection."""
    check_digest("Artifact", artifact.digest)
    if body_digest(artifact.body) != artifact.digest:
        raise ProtocolStateError(
            f"{artifact.kind} version {artifact.version}: body does not match its digest"
        )


__all__ = [
    "ARTIFACT_RECORDED",
    "CHANGE_REQUESTED",
    "CONFIRMED",
    "PHASE_EVENT_TYPES",
    "REVISED",
    "SUBMITTED",
    "ChangeRequest",
    "Command",
    "Confirm",
    "Decision",
    "Record",
    "Replay",
    "Revise",
    "Submit",
    "check_integrity",
    "command_of",
    "decide",
    "evolve",
    "replay",
    "same_decision",
]
