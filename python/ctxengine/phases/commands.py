"""Protocol commands, the ``phase.*`` event types they produce, and decoding a stored event.

A command carries the caller's input as given; ``transitions.decide``
validates it against the state and derives the event payload. Replay turns
each stored event back into the command it claims to come from
(``command_of``) and re-decides it, so the payload layout of every event type
is fixed here and in ``decide``: a key that format-1 events lack decodes to
the format-1 behaviour (``None``), never to an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ModelValidationError
from ..model import ToolSpec
from .state import PROTOCOL_VERSION, Source

SUBMITTED = "phase.submitted"
ARTIFACT_RECORDED = "phase.artifact.recorded"
REVISED = "phase.revised"
CONFIRMED = "phase.confirmed"
CHANGE_REQUESTED = "phase.change_requested"
REVIEW_RECEIVED = "phase.review.received"
REVIEW_INTERPRETED = "phase.review.interpreted"
INPUT_REQUESTED = "phase.input.requested"
INPUT_PROVIDED = "phase.input.provided"
COMPLETED = "phase.completed"
STOPPED = "phase.stopped"
FAILED = "phase.failed"

#: The event types of the first protocol format (issue 6).
PHASE_EVENT_TYPES_V1: tuple[str, ...] = (SUBMITTED, ARTIFACT_RECORDED, REVISED, CONFIRMED, CHANGE_REQUESTED)
#: The event types introduced with protocol format 2 (issue 16).
PHASE_EVENT_TYPES_V2: tuple[str, ...] = (
    REVIEW_RECEIVED,
    REVIEW_INTERPRETED,
    INPUT_REQUESTED,
    INPUT_PROVIDED,
    COMPLETED,
    STOPPED,
    FAILED,
)
PHASE_EVENT_TYPES: frozenset[str] = frozenset((*PHASE_EVENT_TYPES_V1, *PHASE_EVENT_TYPES_V2))


@dataclass(frozen=True, slots=True)
class Submit:
    request: str
    sources: tuple[Source, ...] = ()
    constraints: tuple[str, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    protocol_version: int = PROTOCOL_VERSION


@dataclass(frozen=True, slots=True)
class Record:
    kind: str
    body: str
    projection_sha256: str | None = None


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
    displayed_version: int | None = None
    digest: str | None = None


@dataclass(frozen=True, slots=True)
class Review:
    feedback: str
    displayed_version: int | None = None
    digest: str | None = None


@dataclass(frozen=True, slots=True)
class Interpret:
    verdict: str
    projection_sha256: str | None = None


@dataclass(frozen=True, slots=True)
class RequestInput:
    question: str
    projection_sha256: str | None = None


@dataclass(frozen=True, slots=True)
class ProvideInput:
    answer: str
    request_number: int | None = None


@dataclass(frozen=True, slots=True)
class Complete:
    result: str
    projection_sha256: str | None = None


@dataclass(frozen=True, slots=True)
class Stop:
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Fail:
    reason: str


Command = (
    Submit
    | Record
    | Revise
    | Confirm
    | ChangeRequest
    | Review
    | Interpret
    | RequestInput
    | ProvideInput
    | Complete
    | Stop
    | Fail
)


def payload_format(event_type: str, payload: Mapping[str, Any]) -> int:
    """The stored-format version an event needs: 2 for the format-2 types and for the
    format-2 keys of format-1 types (a version-2 submission, a recorded projection hash);
    1 for everything a format-1 reader understands."""
    if event_type in PHASE_EVENT_TYPES_V2:
        return 2
    if event_type == SUBMITTED and payload.get("protocol_version", 1) != 1:
        return 2
    if event_type == ARTIFACT_RECORDED and "projection_sha256" in payload:
        return 2
    return 1


def command_of(event_type: str, payload: Mapping[str, Any]) -> Command:
    """The command that a stored event claims to be the result of."""
    p = payload
    if event_type == SUBMITTED:
        return Submit(
            p["request"],
            tuple(Source.from_dict(s) for s in p["sources"]),
            tuple(p["constraints"]),
            tuple(ToolSpec.from_dict(t) for t in p["tools"]),
            # Format-1 instances carry no version.
            p.get("protocol_version", 1),
        )
    if event_type == ARTIFACT_RECORDED:
        return Record(p["kind"], p["body"], p.get("projection_sha256"))
    if event_type == REVISED:
        return Revise(p["kind"], p["feedback"], p["version"])
    if event_type == CONFIRMED:
        return Confirm(p["kind"], p["version"], p["digest"], p["output_mode"])
    if event_type == CHANGE_REQUESTED:
        return ChangeRequest(p["feedback"], p["plan_version"], p["plan_digest"])
    if event_type == REVIEW_RECEIVED:
        return Review(p["feedback"], p["plan_version"], p["plan_digest"])
    if event_type == REVIEW_INTERPRETED:
        return Interpret(p["verdict"], p["projection_sha256"])
    if event_type == INPUT_REQUESTED:
        return RequestInput(p["question"], p["projection_sha256"])
    if event_type == INPUT_PROVIDED:
        return ProvideInput(p["answer"], p["number"])
    if event_type == COMPLETED:
        return Complete(p["result"], p["projection_sha256"])
    if event_type == STOPPED:
        return Stop(p["reason"])
    if event_type == FAILED:
        return Fail(p["reason"])
    raise ModelValidationError("phase event", "type", f"not a phase event type: {event_type!r}")


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
    "Fail",
    "Interpret",
    "ProvideInput",
    "Record",
    "RequestInput",
    "Review",
    "Revise",
    "Stop",
    "Submit",
    "command_of",
    "payload_format",
]
