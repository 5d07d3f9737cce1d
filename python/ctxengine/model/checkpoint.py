"""The run checkpoint and the parts only it holds (elided spans, knowledge, loaded skills)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import ModelValidationError
from .checks import JSON, _get, _get_list, _optional_int, _require, _tuple_of
from .items import (
    AssistantMessage,
    ConversationItem,
    ReasoningItem,
    SystemMessage,
    ToolCall,
    ToolResult,
    UserMessage,
    item_from_dict,
)
from .state import WorkingState
from .trust import TrustLevel, _trust

#: How deep compacted summaries may nest (SPEC section 6): a depth-2 summary is not
#: summarized again. The builder (which reports whether compacting again can help)
#: and the compactor (which refuses to go deeper) each take the limit as
#: configuration, defaulting to this; ``ContextLoop`` checks that they agree.
MAX_COMPACTION_DEPTH = 2


#: Checkpoint fields ``to_dict()`` leaves out when empty (added after checkpoints
#: were first stored: a checkpoint without them keeps its bytes).
OMITTED_WHEN_EMPTY = ("notes",)


def check_compaction_depth(owner: str, name: str, value: object) -> int:
    """``value`` as a depth limit (an int >= 1), or ``ModelValidationError`` naming ``owner.name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ModelValidationError(owner, name, f"expected int >= 1, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class ElidedSpan:
    """A typed pointer to untrusted content that compaction removed without summarizing it."""

    item_id: str
    trust: TrustLevel
    byte_length: int
    event_id: int | None = None
    artifact_ref: str | None = None

    def __post_init__(self) -> None:
        _require("ElidedSpan", "item_id", self.item_id, str)
        object.__setattr__(self, "trust", _trust("ElidedSpan", self.trust))
        _require("ElidedSpan", "byte_length", self.byte_length, int)
        _optional_int("ElidedSpan", "event_id", self.event_id)

    def to_dict(self) -> dict[str, JSON]:
        return {
            "item_id": self.item_id,
            "trust": self.trust.value,
            "byte_length": self.byte_length,
            "event_id": self.event_id,
            "artifact_ref": self.artifact_ref,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ElidedSpan:
        n = "ElidedSpan"
        return cls(
            _get(d, n, "item_id"),
            _get(d, n, "trust"),
            _get(d, n, "byte_length"),
            _get(d, n, "event_id", None),
            _get(d, n, "artifact_ref", None),
        )


@dataclass(frozen=True, slots=True)
class KnowledgePassage:
    """A retrieved passage; under pressure the lowest-scored drop first, whole."""

    passage_id: str
    text: str
    score: float = 0.0
    source: str = "knowledge"

    def __post_init__(self) -> None:
        _require("KnowledgePassage", "passage_id", self.passage_id, str)
        _require("KnowledgePassage", "text", self.text, str)
        _require("KnowledgePassage", "score", self.score, (int, float))
        _require("KnowledgePassage", "source", self.source, str)

    def to_dict(self) -> dict[str, JSON]:
        return {"passage_id": self.passage_id, "text": self.text, "score": self.score, "source": self.source}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KnowledgePassage:
        n = "KnowledgePassage"
        return cls(
            _get(d, n, "passage_id"),
            _get(d, n, "text"),
            _get(d, n, "score", 0.0),
            _get(d, n, "source", "knowledge"),
        )


@dataclass(frozen=True, slots=True)
class SkillBody:
    """A skill the model loaded from the catalog; its body rides in Region B."""

    name: str
    body: str

    def __post_init__(self) -> None:
        _require("SkillBody", "name", self.name, str)
        _require("SkillBody", "body", self.body, str)

    def to_dict(self) -> dict[str, JSON]:
        return {"name": self.name, "body": self.body}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SkillBody:
        return cls(_get(d, "SkillBody", "name"), _get(d, "SkillBody", "body"))


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A run's materialized state (rebuildable from the log; not the record).

    ``conversation`` holds the retained history and the current turn in
    event order. ``reasoning`` holds this run's opaque provider continuations,
    kept apart so compaction and cross-run carry can never touch them; the
    builder replays each just before the item that followed it.
    ``corrections`` are memory corrections: the memory snapshot is frozen in
    the prefix, so a correction rides in the body and never yields.
    ``notes`` are the run's notes (model-authored, so rendered untrusted):
    capped by the policy's ``notes.max_tokens`` and dropped from the end
    under pressure, like recall. Empty notes are left out of ``to_dict()``,
    so a checkpoint without notes keeps its bytes.
    """

    run_id: str
    version: int = 1
    conversation: tuple[ConversationItem, ...] = ()
    compacted_summary: str | None = None
    summary_source_event_ids: tuple[int, ...] = ()
    summary_elided: tuple[ElidedSpan, ...] = ()
    replaced_through_sequence: int = 0
    summary_depth: int = 0
    working_state: WorkingState = field(default_factory=WorkingState)
    knowledge: tuple[KnowledgePassage, ...] = ()
    recall: tuple[str, ...] = ()
    loaded_skills: tuple[SkillBody, ...] = ()
    reasoning: tuple[ReasoningItem, ...] = ()
    corrections: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        n = "Checkpoint"
        _require(n, "run_id", self.run_id, str)
        _require(n, "version", self.version, int)
        conv_types = (SystemMessage, UserMessage, AssistantMessage, ToolCall, ToolResult, ReasoningItem)
        conversation = _tuple_of(n, "conversation", self.conversation, conv_types)
        object.__setattr__(self, "conversation", conversation)
        last = None
        for i, item in enumerate(conversation):
            # Event order: the builder's history/turn split relies on it.
            if item.seq is not None:
                if last is not None and item.seq <= last:
                    raise ModelValidationError(
                        n, f"conversation[{i}]", f"seq {item.seq} does not follow seq {last}"
                    )
                last = item.seq
        if self.compacted_summary is not None:
            _require(n, "compacted_summary", self.compacted_summary, str)
        object.__setattr__(
            self,
            "summary_source_event_ids",
            _tuple_of(n, "summary_source_event_ids", self.summary_source_event_ids, int),
        )
        object.__setattr__(
            self, "summary_elided", _tuple_of(n, "summary_elided", self.summary_elided, ElidedSpan)
        )
        _require(n, "replaced_through_sequence", self.replaced_through_sequence, int)
        _require(n, "summary_depth", self.summary_depth, int)
        _require(n, "working_state", self.working_state, WorkingState)
        object.__setattr__(self, "knowledge", _tuple_of(n, "knowledge", self.knowledge, KnowledgePassage))
        object.__setattr__(self, "recall", _tuple_of(n, "recall", self.recall, str))
        object.__setattr__(
            self, "loaded_skills", _tuple_of(n, "loaded_skills", self.loaded_skills, SkillBody)
        )
        object.__setattr__(self, "reasoning", _tuple_of(n, "reasoning", self.reasoning, ReasoningItem))
        object.__setattr__(self, "corrections", _tuple_of(n, "corrections", self.corrections, str))
        object.__setattr__(self, "notes", _tuple_of(n, "notes", self.notes, str))

    def to_dict(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {
            "run_id": self.run_id,
            "version": self.version,
            "conversation": [item.to_dict() for item in self.conversation],
            "compacted_summary": self.compacted_summary,
            "summary_source_event_ids": list(self.summary_source_event_ids),
            "summary_elided": [span.to_dict() for span in self.summary_elided],
            "replaced_through_sequence": self.replaced_through_sequence,
            "summary_depth": self.summary_depth,
            "working_state": self.working_state.to_dict(),
            "knowledge": [p.to_dict() for p in self.knowledge],
            "recall": list(self.recall),
            "loaded_skills": [s.to_dict() for s in self.loaded_skills],
            "reasoning": [r.to_dict() for r in self.reasoning],
            "corrections": list(self.corrections),
        }
        if self.notes:
            out["notes"] = list(self.notes)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Checkpoint:
        n = "Checkpoint"
        return cls(
            run_id=_get(d, n, "run_id"),
            version=_get(d, n, "version", 1),
            conversation=tuple(item_from_dict(i) for i in _get_list(d, n, "conversation")),
            compacted_summary=_get(d, n, "compacted_summary", None),
            summary_source_event_ids=tuple(_get_list(d, n, "summary_source_event_ids")),
            summary_elided=tuple(ElidedSpan.from_dict(s) for s in _get_list(d, n, "summary_elided")),
            replaced_through_sequence=_get(d, n, "replaced_through_sequence", 0),
            summary_depth=_get(d, n, "summary_depth", 0),
            working_state=WorkingState.from_dict(_get(d, n, "working_state", {})),
            knowledge=tuple(KnowledgePassage.from_dict(p) for p in _get_list(d, n, "knowledge")),
            recall=tuple(_get_list(d, n, "recall")),
            loaded_skills=tuple(SkillBody.from_dict(s) for s in _get_list(d, n, "loaded_skills")),
            reasoning=tuple(ReasoningItem.from_dict(r) for r in _get_list(d, n, "reasoning")),
            corrections=tuple(_get_list(d, n, "corrections")),
            notes=tuple(_get_list(d, n, "notes")),
        )
