"""The stage machine: the fold over ``phase.*`` events, and replay.

::

    submit -> prompt_drafting --record--> prompt_review --confirm--> plan_drafting
                  prompt_review --revise--> prompt_revising --record--> prompt_review
    plan_drafting --record--> plan_review --confirm--> executing
                  plan_review --revise--> plan_revising --record--> plan_review
                  plan_review --change_request--> prompt_revising (the plan is rejected)
                  plan_review --review--> review_interpreting
                      --interpret_review(task_change)--> prompt_revising (the plan is rejected)
                      --interpret_review(approach_change)--> plan_revising (the plan is rejected)
    executing --request_input--> waiting_input --provide_input--> executing
    executing --complete--> complete
    any active stage --stop--> stopped;  --fail--> error   (complete, stopped, error are final)

``decide(state, command)`` (``decide.py``) validates a command against the
state and returns the event to append; ``evolve`` applies a stored event. The
same ``decide`` checks every event on replay (the event must be exactly what
its command yields from the state before it), so a log that was edited by
hand or written by a buggy worker fails closed with ``StoreCorruption``
instead of rebuilding a state the controller would never have allowed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core.canonical import payload_hash
from ..errors import ContextError, ModelValidationError, ProtocolStateError, StoreCorruption
from ..stores.events import Event
from .commands import (
    ARTIFACT_RECORDED,
    CHANGE_REQUESTED,
    COMPLETED,
    CONFIRMED,
    FAILED,
    INPUT_PROVIDED,
    INPUT_REQUESTED,
    PHASE_EVENT_TYPES,
    PHASE_EVENT_TYPES_V1,
    PHASE_EVENT_TYPES_V2,
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
    command_of,
)
from .decide import REVIEW, REVISING, Decision, decide, same_decision
from .state import (
    Artifact,
    ArtifactKind,
    ArtifactRef,
    Feedback,
    InputRequest,
    PhaseRecord,
    ProtocolState,
    Result,
    Stage,
    Termination,
    body_digest,
    check_digest,
    check_kind,
    check_output_mode,
    check_verdict,
)


def _replace_latest(state: ProtocolState, kind: ArtifactKind, **changes: Any) -> tuple[Artifact, ...]:
    target = state.latest(kind)
    return tuple(dataclasses.replace(a, **changes) if a is target else a for a in state.versions)


def _rejecting_plan(state: ProtocolState, fb: Feedback, history: tuple[PhaseRecord, ...]) -> ProtocolState:
    """Feedback that sends the displayed plan back: a task change (to the prompt) or an approach change."""
    return dataclasses.replace(
        state,
        stage=REVISING[fb.kind],
        versions=_replace_latest(state, "plan", status="rejected"),
        feedback=(*state.feedback, fb),
        pending_feedback=fb,
        pending_review=None,
        history=history,
    )


def _evolve_recorded(
    state: ProtocolState, p: Mapping[str, Any], history: tuple[PhaseRecord, ...]
) -> ProtocolState:
    kind = check_kind("phase.artifact.recorded", p["kind"])
    versions = state.versions
    previous = state.latest(kind)
    if previous is not None and previous.status == "confirmed":
        # Only a change of task reopens a confirmed prompt; its successor replaces it.
        versions = _replace_latest(state, kind, status="superseded")
    basis = p["basis"]
    artifact = Artifact(
        kind,
        p["version"],
        p["body"],
        p["digest"],
        "displayed",
        None if basis is None else ArtifactRef.from_dict(basis),
    )
    return dataclasses.replace(
        state, stage=REVIEW[kind], versions=(*versions, artifact), pending_feedback=None, history=history
    )


def _evolve_interpreted(
    state: ProtocolState, p: Mapping[str, Any], history: tuple[PhaseRecord, ...]
) -> ProtocolState:
    review = state.pending_review
    prompt = state.prompt
    if review is None or prompt is None:  # pragma: no cover - decide checked the stage
        raise ProtocolStateError(f"instance {state.instance_id!r}: no review is pending")
    if check_verdict("phase.review.interpreted", p["verdict"]) == "task_change":
        return _rejecting_plan(state, Feedback("prompt", prompt.version, review.text, "review"), history)
    return _rejecting_plan(state, review, history)


def _evolve_closing(
    state: ProtocolState, event_type: str, p: Mapping[str, Any], history: tuple[PhaseRecord, ...]
) -> ProtocolState:
    if event_type == INPUT_REQUESTED:
        asked = InputRequest(p["number"], p["question"], p["digest"], p["projection_sha256"])
        return dataclasses.replace(
            state, stage="waiting_input", inputs=(*state.inputs, asked), history=history
        )
    if event_type == INPUT_PROVIDED:
        answered = dataclasses.replace(state.inputs[-1], answer=p["answer"])
        return dataclasses.replace(
            state, stage="executing", inputs=(*state.inputs[:-1], answered), history=history
        )
    if event_type == COMPLETED:
        result = Result(
            p["result"],
            p["digest"],
            ArtifactRef.from_dict(p["prompt"]),
            ArtifactRef.from_dict(p["plan"]),
            check_output_mode("phase.completed", p["output_mode"]),
            p["projection_sha256"],
        )
        return dataclasses.replace(state, stage="complete", result=result, history=history)
    if event_type in (STOPPED, FAILED):
        ended = Termination(state.stage, p["reason"])
        stage: Stage = "stopped" if event_type == STOPPED else "error"
        return dataclasses.replace(state, stage=stage, termination=ended, history=history)
    raise ModelValidationError("phase event", "type", f"not a phase event type: {event_type!r}")


def evolve(
    state: ProtocolState | None, instance_id: str, event_type: str, payload: Mapping[str, Any], sequence: int
) -> ProtocolState:
    """``state`` after the (already validated) event."""
    record = PhaseRecord(sequence, event_type, payload_hash(dict(payload)))
    p = payload
    if event_type == SUBMITTED:
        cmd = command_of(event_type, p)
        assert isinstance(cmd, Submit)
        return ProtocolState(
            instance_id,
            "prompt_drafting",
            cmd.request,
            sources=cmd.sources,
            constraints=cmd.constraints,
            tools=cmd.tools,
            history=(record,),
            protocol_version=cmd.protocol_version,
        )
    assert state is not None
    history = (*state.history, record)
    if event_type == ARTIFACT_RECORDED:
        return _evolve_recorded(state, p, history)
    if event_type == REVISED:
        kind = check_kind("phase.revised", p["kind"])
        fb = Feedback(kind, p["version"], p["feedback"], "revise")
        return dataclasses.replace(
            state,
            stage=REVISING[kind],
            versions=_replace_latest(state, kind, status="rejected"),
            feedback=(*state.feedback, fb),
            pending_feedback=fb,
            history=history,
        )
    if event_type == CONFIRMED:
        kind = check_kind("phase.confirmed", p["kind"])
        return dataclasses.replace(
            state,
            stage="plan_drafting" if kind == "prompt" else "executing",
            versions=_replace_latest(state, kind, status="confirmed"),
            output_mode=state.output_mode if kind == "prompt" else p["output_mode"],
            history=history,
        )
    if event_type == CHANGE_REQUESTED:
        fb = Feedback("prompt", p["prompt_version"], p["feedback"], "change_request")
        return _rejecting_plan(state, fb, history)
    if event_type == REVIEW_RECEIVED:
        review = Feedback("plan", p["plan_version"], p["feedback"], "review")
        return dataclasses.replace(state, stage="review_interpreting", pending_review=review, history=history)
    if event_type == REVIEW_INTERPRETED:
        return _evolve_interpreted(state, p, history)
    return _evolve_closing(state, event_type, p, history)


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
    "COMPLETED",
    "CONFIRMED",
    "FAILED",
    "INPUT_PROVIDED",
    "INPUT_REQUESTED",
    "PHASE_EVENT_TYPES",
    "PHASE_EVENT_TYPES_V1",
    "PHASE_EVENT_TYPES_V2",
    "REVIEW_INTERPRETED",
    "REVIEW_RECEIVED",
    "REVISED",
    "STOPPED",
    "SUBMITTED",
    "ChangeRequest",
    "Command",
    "Complete",
    "Confirm",
    "Decision",
    "Fail",
    "Interpret",
    "ProvideInput",
    "Record",
    "Replay",
    "RequestInput",
    "Review",
    "Revise",
    "Stop",
    "Submit",
    "check_integrity",
    "command_of",
    "decide",
    "evolve",
    "replay",
    "same_decision",
]
