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
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core.canonical import canonical_json, payload_hash
from ..errors import ContextError, ModelValidationError, ProtocolStateError, StoreCorruption
from ..model import ToolSpec
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
    ArtifactStatus,
    Feedback,
    InputRequest,
    OutputMode,
    PhaseRecord,
    ProtocolState,
    Result,
    Source,
    Stage,
    StateQueries,
    Termination,
    body_digest,
    check_digest,
    check_kind,
    check_output_mode,
    check_verdict,
)


class PhaseFold(StateQueries):
    """The state of one instance, folded event by event in place.

    ``replay`` folds a log with it, and the controller keeps one per instance
    and extends it with the events appended since (ADR 0004). Applying an
    event costs the same whatever came before it: the versions, feedback,
    inputs and history are lists, the newest version and the number of
    versions of each kind are kept, and a status change replaces one list
    entry. Each event's payload is hashed once, when it is folded.
    ``snapshot()`` is the frozen ``ProtocolState`` callers get (kept until the
    next event); ``previous`` and ``last`` are the state before the last event
    and that event (retry detection). ``decide`` reads the fold itself.
    """

    __slots__ = (
        "_constraints",
        "_counts",
        "_feedback",
        "_history",
        "_latest",
        "_request",
        "_snapshot",
        "_sources",
        "_tools",
        "_versions",
        "inputs",
        "instance_id",
        "last",
        "last_sequence",
        "output_mode",
        "pending_feedback",
        "pending_review",
        "previous",
        "protocol_version",
        "result",
        "stage",
        "termination",
    )

    def __init__(self, instance_id: str) -> None:
        self.instance_id = instance_id
        #: The sequence of the last event folded; 0 for none, -1 once folding failed (the fold
        #: is then unusable: its owner drops it).
        self.last_sequence = 0
        self.last: Event | None = None
        self.previous: ProtocolState | None = None
        self.stage: Stage = "prompt_drafting"
        self.protocol_version = 1
        self.output_mode: OutputMode | None = None
        self.inputs: list[InputRequest] = []
        self.pending_feedback: Feedback | None = None
        self.pending_review: Feedback | None = None
        self.result: Result | None = None
        self.termination: Termination | None = None
        self._request = ""
        self._sources: tuple[Source, ...] = ()
        self._constraints: tuple[str, ...] = ()
        self._tools: tuple[ToolSpec, ...] = ()
        self._versions: list[Artifact] = []
        self._latest: dict[ArtifactKind, int] = {}
        self._counts: dict[ArtifactKind, int] = {}
        self._feedback: list[Feedback] = []
        self._history: list[PhaseRecord] = []
        self._snapshot: ProtocolState | None = None

    @classmethod
    def of(cls, state: ProtocolState | None, instance_id: str) -> PhaseFold:
        """A fold that continues from ``state`` (``None``: an instance not submitted yet)."""
        fold = cls(instance_id)
        if state is None:
            return fold
        fold.instance_id = state.instance_id
        fold.stage = state.stage
        fold.protocol_version = state.protocol_version
        fold.output_mode = state.output_mode
        fold.inputs = list(state.inputs)
        fold.pending_feedback = state.pending_feedback
        fold.pending_review = state.pending_review
        fold.result = state.result
        fold.termination = state.termination
        fold._request = state.request
        fold._sources, fold._constraints, fold._tools = state.sources, state.constraints, state.tools
        fold._versions = list(state.versions)
        for i, artifact in enumerate(fold._versions):
            fold._latest[artifact.kind] = i
            fold._counts[artifact.kind] = fold._counts.get(artifact.kind, 0) + 1
        fold._feedback = list(state.feedback)
        fold._history = list(state.history)
        fold.last_sequence = state.history[-1].sequence if state.history else 0
        fold._snapshot = state
        return fold

    # -- what decide asks --------------------------------------------------------------

    def latest(self, kind: ArtifactKind) -> Artifact | None:
        i = self._latest.get(kind)
        return None if i is None else self._versions[i]

    def count(self, kind: ArtifactKind) -> int:
        return self._counts.get(kind, 0)

    @property
    def events(self) -> int:
        """How many phase events were folded."""
        return len(self._history)

    @property
    def view(self) -> PhaseFold | None:
        """The fold as ``decide`` reads it: ``None`` until the instance is submitted."""
        return self if self._history else None

    # -- folding ------------------------------------------------------------------------

    def snapshot(self) -> ProtocolState | None:
        """The state as a frozen value (``None`` until submitted), built once per event."""
        if self._snapshot is None and self._history:
            self._snapshot = ProtocolState(
                self.instance_id,
                self.stage,
                self._request,
                sources=self._sources,
                constraints=self._constraints,
                tools=self._tools,
                versions=tuple(self._versions),
                feedback=tuple(self._feedback),
                pending_feedback=self.pending_feedback,
                output_mode=self.output_mode,
                history=tuple(self._history),
                protocol_version=self.protocol_version,
                pending_review=self.pending_review,
                inputs=tuple(self.inputs),
                result=self.result,
                termination=self.termination,
            )
        return self._snapshot

    def extend(self, events: Iterable[Event]) -> None:
        """Fold stored ``events`` (this instance's, in order, after ``last_sequence``), checking
        each: it must be exactly what its command yields from the state before it, else
        ``StoreCorruption`` (and the fold is unusable). Other event types are skipped."""
        batch = [e for e in events if e.type in PHASE_EVENT_TYPES]
        for n, event in enumerate(batch, start=1):
            try:
                self._check_and_apply(event, keep_previous=n == len(batch))
            except BaseException:
                self.last_sequence = -1
                raise

    def _check_and_apply(self, event: Event, *, keep_previous: bool) -> None:
        try:
            stored = canonical_json(event.payload)
            expected = decide(self.view, command_of(event.type, event.payload))
            if expected[0] != event.type or canonical_json(expected[1]) != stored:
                raise StoreCorruption(
                    self.instance_id,
                    event.sequence,
                    f"{event.type} payload differs from what its command yields",
                )
            self.apply(event, hashlib.sha256(stored).hexdigest(), keep_previous=keep_previous)
        except StoreCorruption:
            raise
        except (ContextError, KeyError, TypeError) as exc:
            raise StoreCorruption(
                self.instance_id,
                event.sequence,
                f"{event.type} cannot be replayed: {type(exc).__name__}: {exc}",
            ) from exc

    def apply(self, event: Event, payload_sha256: str | None = None, *, keep_previous: bool = True) -> None:
        """Fold one stored event that is known to be valid (the caller decided it from this
        very fold). ``payload_sha256`` is its payload's hash when the caller has it;
        ``keep_previous`` snapshots the state before it as ``previous`` (only the last event
        of a batch needs that)."""
        if keep_previous:
            self.previous = self.snapshot()
        self.fold(event.type, event.payload, event.sequence, payload_sha256)
        self.last = event

    def fold(
        self, event_type: str, payload: Mapping[str, Any], sequence: int, payload_sha256: str | None = None
    ) -> None:
        """Fold one valid event given by its parts (``evolve``); ``last`` and ``previous`` stay."""
        if payload_sha256 is None:
            payload_sha256 = payload_hash(dict(payload))
        record = PhaseRecord(sequence, event_type, payload_sha256)
        if event_type == SUBMITTED:
            if self._history:
                raise ProtocolStateError(f"instance {self.instance_id!r} has already been submitted")
            self._submitted(payload)
        elif not self._history:
            raise ProtocolStateError(f"instance {self.instance_id!r}: {event_type} before phase.submitted")
        else:
            self._evolve(event_type, payload)
        self._history.append(record)
        self._snapshot = None
        self.last_sequence = sequence

    def _submitted(self, p: Mapping[str, Any]) -> None:
        cmd = command_of(SUBMITTED, p)
        assert isinstance(cmd, Submit)
        self.stage = "prompt_drafting"
        self._request = cmd.request
        self._sources, self._constraints, self._tools = cmd.sources, cmd.constraints, cmd.tools
        self.protocol_version = cmd.protocol_version

    def _set_status(self, kind: ArtifactKind, status: ArtifactStatus) -> None:
        i = self._latest[kind]
        self._versions[i] = dataclasses.replace(self._versions[i], status=status)

    def _rejecting_plan(self, fb: Feedback) -> None:
        """Feedback that sends the displayed plan back: a task change (to the prompt) or an
        approach change."""
        self._set_status("plan", "rejected")
        self.stage = REVISING[fb.kind]
        self._feedback.append(fb)
        self.pending_feedback = fb
        self.pending_review = None

    def _evolve(self, event_type: str, p: Mapping[str, Any]) -> None:
        if event_type == ARTIFACT_RECORDED:
            kind = check_kind("phase.artifact.recorded", p["kind"])
            basis = p["basis"]
            artifact = Artifact(
                kind,
                p["version"],
                p["body"],
                p["digest"],
                "displayed",
                None if basis is None else ArtifactRef.from_dict(basis),
            )
            previous = self.latest(kind)
            if previous is not None and previous.status == "confirmed":
                # Only a change of task reopens a confirmed prompt; its successor replaces it.
                self._set_status(kind, "superseded")
            self._latest[kind] = len(self._versions)
            self._counts[kind] = self._counts.get(kind, 0) + 1
            self._versions.append(artifact)
            self.stage = REVIEW[kind]
            self.pending_feedback = None
        elif event_type == REVISED:
            kind = check_kind("phase.revised", p["kind"])
            fb = Feedback(kind, p["version"], p["feedback"], "revise")
            self._set_status(kind, "rejected")
            self.stage = REVISING[kind]
            self._feedback.append(fb)
            self.pending_feedback = fb
        elif event_type == CONFIRMED:
            kind = check_kind("phase.confirmed", p["kind"])
            mode = p["output_mode"]
            self._set_status(kind, "confirmed")
            self.stage = "plan_drafting" if kind == "prompt" else "executing"
            if kind == "plan":
                self.output_mode = mode
        elif event_type == CHANGE_REQUESTED:
            self._rejecting_plan(Feedback("prompt", p["prompt_version"], p["feedback"], "change_request"))
        elif event_type == REVIEW_RECEIVED:
            self.pending_review = Feedback("plan", p["plan_version"], p["feedback"], "review")
            self.stage = "review_interpreting"
        elif event_type == REVIEW_INTERPRETED:
            review, prompt = self.pending_review, self.prompt
            if review is None or prompt is None:  # pragma: no cover - decide checked the stage
                raise ProtocolStateError(f"instance {self.instance_id!r}: no review is pending")
            if check_verdict("phase.review.interpreted", p["verdict"]) == "task_change":
                self._rejecting_plan(Feedback("prompt", prompt.version, review.text, "review"))
            else:
                self._rejecting_plan(review)
        else:
            self._evolve_closing(event_type, p)

    def _evolve_closing(self, event_type: str, p: Mapping[str, Any]) -> None:
        if event_type == INPUT_REQUESTED:
            self.inputs.append(InputRequest(p["number"], p["question"], p["digest"], p["projection_sha256"]))
            self.stage = "waiting_input"
        elif event_type == INPUT_PROVIDED:
            self.inputs[-1] = dataclasses.replace(self.inputs[-1], answer=p["answer"])
            self.stage = "executing"
        elif event_type == COMPLETED:
            self.result = Result(
                p["result"],
                p["digest"],
                ArtifactRef.from_dict(p["prompt"]),
                ArtifactRef.from_dict(p["plan"]),
                check_output_mode("phase.completed", p["output_mode"]),
                p["projection_sha256"],
            )
            self.stage = "complete"
        elif event_type in (STOPPED, FAILED):
            self.termination = Termination(self.stage, p["reason"])
            self.stage = "stopped" if event_type == STOPPED else "error"
        else:
            raise ModelValidationError("phase event", "type", f"not a phase event type: {event_type!r}")


def evolve(
    state: ProtocolState | None, instance_id: str, event_type: str, payload: Mapping[str, Any], sequence: int
) -> ProtocolState:
    """``state`` after the (already validated) event. Each call copies ``state`` into a fold:
    to fold many events, use ``PhaseFold`` (or ``replay``)."""
    fold = PhaseFold.of(state, instance_id)
    fold.fold(event_type, payload, sequence)
    folded = fold.snapshot()
    assert folded is not None
    return folded


@dataclass(frozen=True, slots=True)
class Replay:
    """The folded state, the state before the last event, and that event (retry detection)."""

    state: ProtocolState | None
    previous: ProtocolState | None
    last: Event | None


def replay(instance_id: str, events: Iterable[Event]) -> Replay:
    """Fold ``events`` (one instance's ``phase.*`` events, in order), checking each one."""
    fold = PhaseFold(instance_id)
    fold.extend(events)
    return Replay(fold.snapshot(), fold.previous, fold.last)


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
    "PhaseFold",
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
