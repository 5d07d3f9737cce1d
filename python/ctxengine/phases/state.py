"""The controller-owned canonical state of one protocol instance (ADR-0003).

``ProtocolState`` is never stored as such: it is rebuilt by folding the
instance's ``phase.*`` events (``transitions.replay``), so any worker holding
the log holds the state. Every artifact version is kept, whatever its status,
so the state doubles as the audit record; projections read only the current,
authorized versions.

``protocol_version`` is fixed when an instance is submitted (adr 0004): 1 for
instances written before issue 16 (their ``phase.submitted`` payload has no
version), 2 for new ones. It selects how the instance's projections render,
so a stored instance keeps compiling to the bytes it compiled to.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from ..errors import CanonicalizationError, FieldTooLarge, ModelValidationError
from ..model import ToolSpec, TrustLevel

ArtifactKind = Literal["prompt", "plan"]
ArtifactStatus = Literal["displayed", "confirmed", "rejected", "superseded"]
OutputMode = Literal["standard", "pseudocode"]
FeedbackOrigin = Literal["revise", "change_request", "review"]
Verdict = Literal["task_change", "approach_change"]
Stage = Literal[
    "prompt_drafting",
    "prompt_review",
    "prompt_revising",
    "plan_drafting",
    "plan_review",
    "plan_revising",
    "review_interpreting",
    "executing",
    "waiting_input",
    "complete",
    "stopped",
    "error",
]

ARTIFACT_KINDS: tuple[str, ...] = get_args(ArtifactKind)
ARTIFACT_STATUSES: tuple[str, ...] = get_args(ArtifactStatus)
OUTPUT_MODES: tuple[str, ...] = get_args(OutputMode)
VERDICTS: tuple[str, ...] = get_args(Verdict)
STAGES: tuple[str, ...] = get_args(Stage)
#: Stages an instance never leaves: every further transition is refused.
TERMINAL_STAGES: tuple[Stage, ...] = ("complete", "stopped", "error")
ACTIVE_STAGES: tuple[Stage, ...] = tuple(s for s in get_args(Stage) if s not in TERMINAL_STAGES)

#: Protocol versions this code compiles; new instances are submitted at the newest.
PROTOCOL_VERSIONS: tuple[int, ...] = (1, 2)
PROTOCOL_VERSION = PROTOCOL_VERSIONS[-1]

_HEX64 = re.compile(r"[0-9a-f]{64}")


def body_digest(body: str) -> str:
    """SHA-256 hex of the UTF-8 body: what a user can check with ``sha256sum``."""
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def check_text(action: str, field: str, value: object, max_bytes: int | None) -> None:
    """The check every controller call runs on each text it would write, before anything else.

    A lone surrogate is ``CanonicalizationError`` at the field's JSON path in
    the event payload (what canonical JSON raises for it); a text longer than
    ``max_bytes`` UTF-8 bytes (``None``: no limit) is ``FieldTooLarge``. Both
    name ``action`` and ``field``. Other types are left to ``decide``, which
    names them.
    """
    if not isinstance(value, str):
        return
    if value.isascii():
        size = len(value)
    else:
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise CanonicalizationError(
                f"$.{field}",
                f"lone surrogate in string ({action}: U+{ord(value[exc.start]):04X} at index {exc.start})",
            ) from None
    if max_bytes is not None and size > max_bytes:
        raise FieldTooLarge(action, field, size, max_bytes, "ProtocolController(max_text_bytes=...)")


def is_blank(value: str) -> bool:
    """Empty or whitespace only (``not value.strip()`` without copying a long text)."""
    return not value or value.isspace()


def _text(type_name: str, field: str, value: object, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise ModelValidationError(type_name, field, f"expected str, got {type(value).__name__}")
    if not allow_empty and is_blank(value):
        raise ModelValidationError(type_name, field, "must not be empty")
    return value


def _version(type_name: str, field: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ModelValidationError(type_name, field, f"expected a positive int, got {value!r}")
    return value


def check_kind(type_name: str, value: object) -> ArtifactKind:
    if value == "prompt":
        return "prompt"
    if value == "plan":
        return "plan"
    raise ModelValidationError(
        type_name, "kind", f"unknown artifact kind {value!r}; expected 'prompt' or 'plan'"
    )


def check_digest(type_name: str, value: object) -> str:
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise ModelValidationError(type_name, "digest", f"expected 64 lowercase hex digits, got {value!r}")
    return value


def check_verdict(type_name: str, value: object) -> Verdict:
    if value == "task_change":
        return "task_change"
    if value == "approach_change":
        return "approach_change"
    raise ModelValidationError(type_name, "verdict", f"unknown verdict {value!r}; expected {VERDICTS}")


def check_output_mode(type_name: str, value: object) -> OutputMode:
    if value == "standard":
        return "standard"
    if value == "pseudocode":
        return "pseudocode"
    raise ModelValidationError(
        type_name, "output_mode", f"unknown output mode {value!r}; expected {OUTPUT_MODES}"
    )


def _field(d: Mapping[str, Any], type_name: str, key: str) -> Any:
    try:
        return d[key]
    except (KeyError, TypeError):
        raise ModelValidationError(type_name, key, "missing") from None


@dataclass(frozen=True, slots=True)
class Source:
    """A canonical source input of the task, kept by the controller.

    The prompt phases see only its reference (id, description, uri, digest,
    size); execution sees its ``content`` as a task input, inside a trust
    envelope unless ``trust`` is trusted. ``content=None`` is a pure reference
    (the executor fetches it with its tools).
    """

    source_id: str
    content: str | None = None
    description: str = ""
    uri: str | None = None
    trust: TrustLevel = TrustLevel.EXTERNAL_UNTRUSTED

    def __post_init__(self) -> None:
        n = "Source"
        _text(n, "source_id", self.source_id)
        if self.content is not None:
            _text(n, "content", self.content, allow_empty=True)
        _text(n, "description", self.description, allow_empty=True)
        if self.uri is not None:
            _text(n, "uri", self.uri)
        try:
            object.__setattr__(self, "trust", TrustLevel(self.trust))
        except ValueError:
            raise ModelValidationError(n, "trust", f"unknown trust level {self.trust!r}") from None

    @property
    def digest(self) -> str | None:
        return None if self.content is None else body_digest(self.content)

    def reference(self) -> dict[str, Any]:
        """What the prompt phases may see: everything but the content."""
        return {
            "source_id": self.source_id,
            "description": self.description,
            "uri": self.uri,
            "sha256": self.digest,
            "bytes": None if self.content is None else len(self.content.encode("utf-8")),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "source_id": self.source_id,
            "content": self.content,
            "description": self.description,
            "uri": self.uri,
            "trust": self.trust.value,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Source:
        n = "Source"
        return cls(
            _field(d, n, "source_id"),
            content=_field(d, n, "content"),
            description=_field(d, n, "description"),
            uri=_field(d, n, "uri"),
            trust=_field(d, n, "trust"),
        )


@dataclass(frozen=True, slots=True)
class ArtifactRef:
    """Names one artifact version exactly: what a confirmation and a plan's basis carry."""

    kind: ArtifactKind
    version: int
    digest: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "version": self.version, "digest": self.digest}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ArtifactRef:
        n = "ArtifactRef"
        return cls(
            check_kind(n, _field(d, n, "kind")),
            _version(n, "version", _field(d, n, "version")),
            check_digest(n, _field(d, n, "digest")),
        )


@dataclass(frozen=True, slots=True)
class Artifact:
    """One version of the Prompt Pseudocode or the Response Plan.

    The body and digest never change; only the status moves (displayed ->
    confirmed | rejected, confirmed -> superseded). ``basis`` is, for a plan,
    the prompt version it was drafted from: a plan only authorizes execution
    while that prompt is the current, confirmed one.
    """

    kind: ArtifactKind
    version: int
    body: str
    digest: str
    status: ArtifactStatus
    basis: ArtifactRef | None = None

    def __post_init__(self) -> None:
        n = "Artifact"
        check_kind(n, self.kind)
        _version(n, "version", self.version)
        _text(n, "body", self.body)
        check_digest(n, self.digest)
        if self.status not in ARTIFACT_STATUSES:
            raise ModelValidationError(
                n, "status", f"unknown status {self.status!r}; expected {ARTIFACT_STATUSES}"
            )

    @property
    def ref(self) -> ArtifactRef:
        return ArtifactRef(self.kind, self.version, self.digest)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "version": self.version,
            "body": self.body,
            "digest": self.digest,
            "status": self.status,
            "basis": None if self.basis is None else self.basis.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class Feedback:
    """User feedback on one artifact version.

    ``origin`` is how it arrived: ``revise`` (the user's revision of the
    displayed version), ``change_request`` (a semantic change, chosen by the
    user during plan review) or ``review`` (plan-review feedback routed by the
    review-interpretation verdict). Feedback of kind ``prompt`` that is not a
    ``revise`` changes the task itself: it amends the request.
    """

    kind: ArtifactKind
    version: int
    text: str
    origin: FeedbackOrigin

    @property
    def changes_task(self) -> bool:
        return self.kind == "prompt" and self.origin != "revise"


@dataclass(frozen=True, slots=True)
class InputRequest:
    """A non-semantic input that execution asked the user for, and the answer once given.

    ``projection_sha256`` names the execute projection whose reply asked it.
    """

    number: int
    question: str
    digest: str
    projection_sha256: str
    answer: str | None = None


@dataclass(frozen=True, slots=True)
class Result:
    """The delivered result of a complete instance, with its provenance.

    ``prompt`` and ``plan`` are the confirmed versions it executed,
    ``projection_sha256`` the execute projection it answers.
    """

    body: str
    digest: str
    prompt: ArtifactRef
    plan: ArtifactRef
    output_mode: OutputMode
    projection_sha256: str


@dataclass(frozen=True, slots=True)
class Termination:
    """Why an instance stopped or failed, and the stage it was in."""

    stage: Stage
    reason: str | None


@dataclass(frozen=True, slots=True)
class PhaseRecord:
    """One applied ``phase.*`` event, for audit (the payload itself stays in the log)."""

    sequence: int
    type: str
    payload_sha256: str


class StateQueries:
    """What ``decide`` asks of an instance's state, answered alike by the frozen
    ``ProtocolState`` and by the controller's running fold (``transitions.PhaseFold``), which
    keeps the newest version and the number of versions of each kind at hand instead of
    scanning the versions for them."""

    __slots__ = ()

    instance_id: str
    stage: Stage
    protocol_version: int
    output_mode: OutputMode | None
    inputs: Sequence[InputRequest]

    def latest(self, kind: ArtifactKind) -> Artifact | None:
        """The newest version of ``kind``, whatever its status."""
        raise NotImplementedError

    def count(self, kind: ArtifactKind) -> int:
        """How many versions of ``kind`` were recorded."""
        raise NotImplementedError

    @property
    def prompt(self) -> Artifact | None:
        """The current prompt: its newest version (check ``status`` before relying on it)."""
        return self.latest("prompt")

    @property
    def plan(self) -> Artifact | None:
        """The current plan: its newest version, unless it was drafted from a prompt
        version that is no longer the current prompt (then None)."""
        plan = self.latest("plan")
        prompt = self.prompt
        if plan is None or prompt is None or plan.basis != prompt.ref:
            return None
        return plan

    @property
    def pending_input(self) -> InputRequest | None:
        """The unanswered input request, while the instance waits for input."""
        if self.stage == "waiting_input" and self.inputs:
            return self.inputs[-1]
        return None

    @property
    def displayed(self) -> Artifact | None:
        """The version awaiting the user's decision, in a review stage; else None."""
        if self.stage == "prompt_review":
            return self.latest("prompt")
        if self.stage == "plan_review":
            return self.latest("plan")
        return None


@dataclass(frozen=True, slots=True)
class ProtocolState(StateQueries):
    """The canonical state of one protocol instance, as of its latest ``phase.*`` event."""

    instance_id: str
    stage: Stage
    request: str
    sources: tuple[Source, ...] = ()
    constraints: tuple[str, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    versions: tuple[Artifact, ...] = ()
    feedback: tuple[Feedback, ...] = ()
    pending_feedback: Feedback | None = None
    output_mode: OutputMode | None = None
    history: tuple[PhaseRecord, ...] = ()
    protocol_version: int = 1
    pending_review: Feedback | None = None
    inputs: tuple[InputRequest, ...] = ()
    result: Result | None = None
    termination: Termination | None = None

    def latest(self, kind: ArtifactKind) -> Artifact | None:
        """The newest version of ``kind``, whatever its status."""
        for artifact in reversed(self.versions):
            if artifact.kind == kind:
                return artifact
        return None

    def count(self, kind: ArtifactKind) -> int:
        return sum(1 for a in self.versions if a.kind == kind)

    @property
    def task_changes(self) -> tuple[Feedback, ...]:
        """The user's changes to the task that a prompt version has already answered, in order.

        The request as amended by these is the authoritative request (the
        pending change, if any, is shown as the feedback under revision).
        """
        answered = self.feedback
        if self.pending_feedback is not None and answered and answered[-1] == self.pending_feedback:
            answered = answered[:-1]
        return tuple(f for f in answered if f.changes_task)


__all__ = [
    "ACTIVE_STAGES",
    "ARTIFACT_KINDS",
    "ARTIFACT_STATUSES",
    "OUTPUT_MODES",
    "PROTOCOL_VERSION",
    "PROTOCOL_VERSIONS",
    "STAGES",
    "TERMINAL_STAGES",
    "VERDICTS",
    "Artifact",
    "ArtifactKind",
    "ArtifactRef",
    "ArtifactStatus",
    "Feedback",
    "FeedbackOrigin",
    "InputRequest",
    "OutputMode",
    "PhaseRecord",
    "ProtocolState",
    "Result",
    "Source",
    "Stage",
    "StateQueries",
    "Termination",
    "Verdict",
    "body_digest",
    "check_digest",
    "check_kind",
    "check_output_mode",
    "check_text",
    "check_verdict",
    "is_blank",
]
