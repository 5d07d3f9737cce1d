"""Value types: frozen, slotted, hashable, JSON round-trippable.

Conversation items also carry ``_rc``, the builder's cache of their
rendered form (see ``ctxengine.builder``).

Conversation items carry a private ``_cj`` slot that caches
``(canonical_json_bytes, sha256_digest)`` of ``to_dict()``. Both backends
fill it the first time an item is canonicalized, hashed or estimated, and
reuse it afterwards: per-item work happens once per immutable item. The
cache is excluded from equality, hashing and ``repr``; both backends write
identical values, so switching backends never invalidates it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .errors import ModelValidationError

JSON = Any


class TrustLevel(enum.StrEnum):
    """Who authored a piece of content, most trusted first."""

    PLATFORM = "platform"
    TRUSTED_CONFIGURATION = "trusted_configuration"
    USER = "user"
    INTERNAL_TOOL = "internal_tool"
    EXTERNAL_UNTRUSTED = "external_untrusted"
    MEMORY = "memory"
    KNOWLEDGE = "knowledge"

    @property
    def rank(self) -> int:
        """0 is most trusted."""
        return _TRUST_ORDER.index(self)

    def is_trusted(self) -> bool:
        """True for platform and trusted_configuration: rendered without an envelope."""
        return self.rank <= TrustLevel.TRUSTED_CONFIGURATION.rank


_TRUST_ORDER = tuple(TrustLevel)


def _trust(type_name: str, value: object) -> TrustLevel:
    try:
        return TrustLevel(value)  # type: ignore[arg-type]  # validated here
    except ValueError:
        raise ModelValidationError(type_name, "trust", f"unknown trust level {value!r}") from None


def _require(type_name: str, name: str, value: object, kind: type | tuple[type, ...]) -> None:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ModelValidationError(type_name, name, f"expected {expected}, got {type(value).__name__}")


def _optional_int(type_name: str, name: str, value: object) -> None:
    if value is not None:
        _require(type_name, name, value, int)


def _get(d: dict[str, Any], type_name: str, key: str, default: Any = ...) -> Any:
    if not isinstance(d, dict):
        raise ModelValidationError(type_name, "<dict>", f"expected a dict, got {type(d).__name__}")
    if key in d:
        return d[key]
    if default is ...:
        raise ModelValidationError(type_name, key, "missing")
    return default


# --------------------------------------------------------------------------
# content parts


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str
    kind: ClassVar[str] = "text_part"

    def __post_init__(self) -> None:
        _require("TextPart", "text", self.text, str)

    def to_dict(self) -> dict[str, JSON]:
        return {"type": self.kind, "text": self.text}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TextPart:
        return cls(_get(d, "TextPart", "text"))


@dataclass(frozen=True, slots=True)
class FileRef:
    artifact_id: str
    media_type: str
    filename: str | None = None
    kind: ClassVar[str] = "file_ref"

    def __post_init__(self) -> None:
        _require("FileRef", "artifact_id", self.artifact_id, str)
        _require("FileRef", "media_type", self.media_type, str)
        if self.filename is not None:
            _require("FileRef", "filename", self.filename, str)

    def to_dict(self) -> dict[str, JSON]:
        return {
            "type": self.kind,
            "artifact_id": self.artifact_id,
            "media_type": self.media_type,
            "filename": self.filename,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FileRef:
        return cls(
            _get(d, "FileRef", "artifact_id"),
            _get(d, "FileRef", "media_type"),
            _get(d, "FileRef", "filename", None),
        )


ContentPart = TextPart | FileRef
Content = str | tuple[ContentPart, ...]


def _content(type_name: str, value: object) -> Content:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        for i, part in enumerate(value):
            if not isinstance(part, (TextPart, FileRef)):
                raise ModelValidationError(
                    type_name, f"content[{i}]", f"expected TextPart or FileRef, got {type(part).__name__}"
                )
        return tuple(value)
    raise ModelValidationError(type_name, "content", f"expected str or parts, got {type(value).__name__}")


def _content_to_json(content: Content) -> JSON:
    if isinstance(content, str):
        return content
    return [part.to_dict() for part in content]


def _content_from_json(type_name: str, value: Any) -> Content:
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise ModelValidationError(type_name, "content", f"expected str or list, got {type(value).__name__}")
    parts: list[ContentPart] = []
    for i, raw in enumerate(value):
        tag = raw.get("type") if isinstance(raw, dict) else None
        if tag == "text_part":
            parts.append(TextPart.from_dict(raw))
        elif tag == "file_ref":
            parts.append(FileRef.from_dict(raw))
        else:
            raise ModelValidationError(type_name, f"content[{i}]", f"unknown part type {tag!r}")
    return tuple(parts)


def content_text(content: Content) -> str:
    """The text of a content value; file references render as placeholders."""
    if isinstance(content, str):
        return content
    out = []
    for part in content:
        if isinstance(part, TextPart):
            out.append(part.text)
        else:
            out.append(f"[file {part.artifact_id} {part.media_type}]")
    return "\n".join(out)


# --------------------------------------------------------------------------
# conversation items


class _Item:
    """Shared behaviour of conversation items (slot-free mixin)."""

    __slots__ = ()
    kind: ClassVar[str]

    def to_dict(self) -> dict[str, JSON]:  # pragma: no cover - overridden
        raise NotImplementedError

    def canonical_bytes(self) -> bytes:
        """RFC 8785 bytes of ``to_dict()``, computed once and cached."""
        from . import backends

        return backends.active().item_canonical(self)[0]

    def payload_hash(self) -> str:
        """SHA-256 hex of the canonical bytes, computed once and cached."""
        from . import backends

        return backends.active().item_canonical(self)[1].hex()

    def __hash__(self) -> int:
        return hash(self.canonical_bytes())


@dataclass(frozen=True, slots=True, eq=True)
class SystemMessage(_Item):
    content: Content
    trust: TrustLevel = TrustLevel.PLATFORM
    seq: int | None = None
    _cj: tuple[bytes, bytes] | None = field(default=None, init=False, repr=False, compare=False)
    _rc: Any = field(default=None, init=False, repr=False, compare=False)
    kind: ClassVar[str] = "system_message"
    __hash__ = _Item.__hash__

    def __post_init__(self) -> None:
        object.__setattr__(self, "content", _content("SystemMessage", self.content))
        object.__setattr__(self, "trust", _trust("SystemMessage", self.trust))
        _optional_int("SystemMessage", "seq", self.seq)

    def to_dict(self) -> dict[str, JSON]:
        return {
            "type": self.kind,
            "content": _content_to_json(self.content),
            "trust": self.trust.value,
            "seq": self.seq,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SystemMessage:
        n = "SystemMessage"
        return cls(
            _content_from_json(n, _get(d, n, "content")),
            trust=_get(d, n, "trust", TrustLevel.PLATFORM.value),
            seq=_get(d, n, "seq", None),
        )


@dataclass(frozen=True, slots=True, eq=True)
class UserMessage(_Item):
    content: Content
    trust: TrustLevel = TrustLevel.USER
    principal_id: str | None = None
    seq: int | None = None
    _cj: tuple[bytes, bytes] | None = field(default=None, init=False, repr=False, compare=False)
    _rc: Any = field(default=None, init=False, repr=False, compare=False)
    kind: ClassVar[str] = "user_message"
    __hash__ = _Item.__hash__

    def __post_init__(self) -> None:
        object.__setattr__(self, "content", _content("UserMessage", self.content))
        object.__setattr__(self, "trust", _trust("UserMessage", self.trust))
        if self.principal_id is not None:
            _require("UserMessage", "principal_id", self.principal_id, str)
        _optional_int("UserMessage", "seq", self.seq)

    def to_dict(self) -> dict[str, JSON]:
        return {
            "type": self.kind,
            "content": _content_to_json(self.content),
            "trust": self.trust.value,
            "principal_id": self.principal_id,
            "seq": self.seq,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> UserMessage:
        n = "UserMessage"
        return cls(
            _content_from_json(n, _get(d, n, "content")),
            trust=_get(d, n, "trust", TrustLevel.USER.value),
            principal_id=_get(d, n, "principal_id", None),
            seq=_get(d, n, "seq", None),
        )


@dataclass(frozen=True, slots=True, eq=True)
class AssistantMessage(_Item):
    content: Content
    trust: TrustLevel = TrustLevel.EXTERNAL_UNTRUSTED
    seq: int | None = None
    _cj: tuple[bytes, bytes] | None = field(default=None, init=False, repr=False, compare=False)
    _rc: Any = field(default=None, init=False, repr=False, compare=False)
    kind: ClassVar[str] = "assistant_message"
    __hash__ = _Item.__hash__

    def __post_init__(self) -> None:
        object.__setattr__(self, "content", _content("AssistantMessage", self.content))
        object.__setattr__(self, "trust", _trust("AssistantMessage", self.trust))
        _optional_int("AssistantMessage", "seq", self.seq)

    def to_dict(self) -> dict[str, JSON]:
        return {
            "type": self.kind,
            "content": _content_to_json(self.content),
            "trust": self.trust.value,
            "seq": self.seq,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AssistantMessage:
        n = "AssistantMessage"
        return cls(
            _content_from_json(n, _get(d, n, "content")),
            trust=_get(d, n, "trust", TrustLevel.EXTERNAL_UNTRUSTED.value),
            seq=_get(d, n, "seq", None),
        )


@dataclass(frozen=True, slots=True, eq=True)
class ToolCall(_Item):
    call_id: str
    name: str
    arguments: dict[str, Any]
    seq: int | None = None
    _cj: tuple[bytes, bytes] | None = field(default=None, init=False, repr=False, compare=False)
    _rc: Any = field(default=None, init=False, repr=False, compare=False)
    kind: ClassVar[str] = "tool_call"
    __hash__ = _Item.__hash__

    def __post_init__(self) -> None:
        _require("ToolCall", "call_id", self.call_id, str)
        if not self.call_id:
            raise ModelValidationError("ToolCall", "call_id", "must not be empty")
        _require("ToolCall", "name", self.name, str)
        _require("ToolCall", "arguments", self.arguments, dict)
        object.__setattr__(self, "arguments", dict(self.arguments))
        _optional_int("ToolCall", "seq", self.seq)

    def to_dict(self) -> dict[str, JSON]:
        return {
            "type": self.kind,
            "call_id": self.call_id,
            "name": self.name,
            "arguments": dict(self.arguments),
            "seq": self.seq,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToolCall:
        n = "ToolCall"
        return cls(
            _get(d, n, "call_id"),
            _get(d, n, "name"),
            _get(d, n, "arguments"),
            seq=_get(d, n, "seq", None),
        )


@dataclass(frozen=True, slots=True, eq=True)
class ToolResult(_Item):
    call_id: str
    content: Content
    is_error: bool = False
    trust: TrustLevel = TrustLevel.INTERNAL_TOOL
    seq: int | None = None
    _cj: tuple[bytes, bytes] | None = field(default=None, init=False, repr=False, compare=False)
    _rc: Any = field(default=None, init=False, repr=False, compare=False)
    kind: ClassVar[str] = "tool_result"
    __hash__ = _Item.__hash__

    def __post_init__(self) -> None:
        _require("ToolResult", "call_id", self.call_id, str)
        if not self.call_id:
            raise ModelValidationError("ToolResult", "call_id", "must not be empty")
        object.__setattr__(self, "content", _content("ToolResult", self.content))
        _require("ToolResult", "is_error", self.is_error, bool)
        object.__setattr__(self, "trust", _trust("ToolResult", self.trust))
        _optional_int("ToolResult", "seq", self.seq)

    def to_dict(self) -> dict[str, JSON]:
        return {
            "type": self.kind,
            "call_id": self.call_id,
            "content": _content_to_json(self.content),
            "is_error": self.is_error,
            "trust": self.trust.value,
            "seq": self.seq,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToolResult:
        n = "ToolResult"
        return cls(
            _get(d, n, "call_id"),
            _content_from_json(n, _get(d, n, "content")),
            is_error=_get(d, n, "is_error", False),
            trust=_get(d, n, "trust", TrustLevel.INTERNAL_TOOL.value),
            seq=_get(d, n, "seq", None),
        )


@dataclass(frozen=True, slots=True, eq=True)
class ReasoningItem(_Item):
    """Opaque provider continuation: replayed verbatim within a run only."""

    provider: str
    payload: dict[str, Any]
    seq: int | None = None
    _cj: tuple[bytes, bytes] | None = field(default=None, init=False, repr=False, compare=False)
    _rc: Any = field(default=None, init=False, repr=False, compare=False)
    kind: ClassVar[str] = "reasoning"
    __hash__ = _Item.__hash__

    def __post_init__(self) -> None:
        _require("ReasoningItem", "provider", self.provider, str)
        _require("ReasoningItem", "payload", self.payload, dict)
        object.__setattr__(self, "payload", dict(self.payload))
        _optional_int("ReasoningItem", "seq", self.seq)

    def to_dict(self) -> dict[str, JSON]:
        return {"type": self.kind, "provider": self.provider, "payload": dict(self.payload), "seq": self.seq}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ReasoningItem:
        n = "ReasoningItem"
        return cls(_get(d, n, "provider"), _get(d, n, "payload"), seq=_get(d, n, "seq", None))


ConversationItem = SystemMessage | UserMessage | AssistantMessage | ToolCall | ToolResult | ReasoningItem

ITEM_TYPES: dict[str, type[Any]] = {
    cls.kind: cls
    for cls in (SystemMessage, UserMessage, AssistantMessage, ToolCall, ToolResult, ReasoningItem)
}


def item_from_dict(d: dict[str, Any]) -> ConversationItem:
    """Decode any conversation item from its ``to_dict()`` form."""
    tag = d.get("type") if isinstance(d, dict) else None
    cls = ITEM_TYPES.get(tag) if isinstance(tag, str) else None
    if cls is None:
        raise ModelValidationError("ConversationItem", "type", f"unknown item type {tag!r}")
    item: ConversationItem = cls.from_dict(d)
    return item


def with_seq(item: ConversationItem, seq: int) -> ConversationItem:
    """A copy of ``item`` with its source event sequence set."""
    d = item.to_dict()
    d["seq"] = seq
    return item_from_dict(d)


# --------------------------------------------------------------------------
# tools, models, agents, principals, runs


@dataclass(frozen=True, slots=True, eq=True)
class ToolSpec(_Item):
    name: str
    description: str
    input_schema: dict[str, Any]
    _cj: tuple[bytes, bytes] | None = field(default=None, init=False, repr=False, compare=False)
    kind: ClassVar[str] = "tool_spec"
    __hash__ = _Item.__hash__

    def __post_init__(self) -> None:
        _require("ToolSpec", "name", self.name, str)
        if not self.name:
            raise ModelValidationError("ToolSpec", "name", "must not be empty")
        _require("ToolSpec", "description", self.description, str)
        _require("ToolSpec", "input_schema", self.input_schema, dict)
        object.__setattr__(self, "input_schema", dict(self.input_schema))

    def to_dict(self) -> dict[str, JSON]:
        return {
            "type": self.kind,
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.input_schema),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToolSpec:
        n = "ToolSpec"
        return cls(_get(d, n, "name"), _get(d, n, "description"), _get(d, n, "input_schema"))


@dataclass(frozen=True, slots=True)
class ResolvedModel:
    provider: str
    model: str
    context_window: int
    max_output_tokens: int
    default_output_reserve: int
    capabilities: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        n = "ResolvedModel"
        _require(n, "provider", self.provider, str)
        _require(n, "model", self.model, str)
        for name in ("context_window", "max_output_tokens", "default_output_reserve"):
            value = getattr(self, name)
            _require(n, name, value, int)
            if value <= 0:
                raise ModelValidationError(n, name, f"must be positive, got {value}")
        object.__setattr__(self, "capabilities", frozenset(self.capabilities))

    @property
    def model_id(self) -> str:
        return f"{self.provider}:{self.model}"

    def to_dict(self) -> dict[str, JSON]:
        return {
            "provider": self.provider,
            "model": self.model,
            "context_window": self.context_window,
            "max_output_tokens": self.max_output_tokens,
            "default_output_reserve": self.default_output_reserve,
            "capabilities": sorted(self.capabilities),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ResolvedModel:
        n = "ResolvedModel"
        return cls(
            _get(d, n, "provider"),
            _get(d, n, "model"),
            _get(d, n, "context_window"),
            _get(d, n, "max_output_tokens"),
            _get(d, n, "default_output_reserve"),
            frozenset(_get(d, n, "capabilities", [])),
        )


@dataclass(frozen=True, slots=True)
class AgentSpec:
    agent_id: str
    version: str
    instructions: str

    def __post_init__(self) -> None:
        for name in ("agent_id", "version", "instructions"):
            _require("AgentSpec", name, getattr(self, name), str)

    def to_dict(self) -> dict[str, JSON]:
        return {"agent_id": self.agent_id, "version": self.version, "instructions": self.instructions}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AgentSpec:
        n = "AgentSpec"
        return cls(_get(d, n, "agent_id"), _get(d, n, "version"), _get(d, n, "instructions"))


@dataclass(frozen=True, slots=True)
class Principal:
    principal_id: str
    tenant_id: str
    scopes: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        _require("Principal", "principal_id", self.principal_id, str)
        _require("Principal", "tenant_id", self.tenant_id, str)
        object.__setattr__(self, "scopes", frozenset(self.scopes))

    def to_dict(self) -> dict[str, JSON]:
        return {"principal_id": self.principal_id, "tenant_id": self.tenant_id, "scopes": sorted(self.scopes)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Principal:
        n = "Principal"
        return cls(_get(d, n, "principal_id"), _get(d, n, "tenant_id"), frozenset(_get(d, n, "scopes", [])))


@dataclass(frozen=True, slots=True)
class RunContext:
    run_id: str
    session_id: str
    seed_sequence: int
    step: int = 0
    max_output_tokens: int | None = None

    def __post_init__(self) -> None:
        n = "RunContext"
        _require(n, "run_id", self.run_id, str)
        _require(n, "session_id", self.session_id, str)
        _require(n, "seed_sequence", self.seed_sequence, int)
        _require(n, "step", self.step, int)
        _optional_int(n, "max_output_tokens", self.max_output_tokens)

    def to_dict(self) -> dict[str, JSON]:
        return {
            "run_id": self.run_id,
            "session_id": self.session_id,
            "seed_sequence": self.seed_sequence,
            "step": self.step,
            "max_output_tokens": self.max_output_tokens,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunContext:
        n = "RunContext"
        return cls(
            _get(d, n, "run_id"),
            _get(d, n, "session_id"),
            _get(d, n, "seed_sequence"),
            _get(d, n, "step", 0),
            _get(d, n, "max_output_tokens", None),
        )


# --------------------------------------------------------------------------
# working state and the run checkpoint

TASK_STATUSES = ("open", "in_progress", "completed")


def _tuple_of(type_name: str, name: str, value: object, kind: type | tuple[type, ...]) -> tuple[Any, ...]:
    if not isinstance(value, (list, tuple)):
        raise ModelValidationError(type_name, name, f"expected a sequence, got {type(value).__name__}")
    for i, entry in enumerate(value):
        if not isinstance(entry, kind):
            expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise ModelValidationError(
                type_name, f"{name}[{i}]", f"expected {expected}, got {type(entry).__name__}"
            )
    return tuple(value)


@dataclass(frozen=True, slots=True)
class StateEntry:
    """One constraint, fact or open question, with who wrote it."""

    entry_id: str
    text: str
    trust: TrustLevel = TrustLevel.EXTERNAL_UNTRUSTED

    def __post_init__(self) -> None:
        _require("StateEntry", "entry_id", self.entry_id, str)
        _require("StateEntry", "text", self.text, str)
        object.__setattr__(self, "trust", _trust("StateEntry", self.trust))

    def to_dict(self) -> dict[str, JSON]:
        return {"entry_id": self.entry_id, "text": self.text, "trust": self.trust.value}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StateEntry:
        n = "StateEntry"
        return cls(_get(d, n, "entry_id"), _get(d, n, "text"), _get(d, n, "trust", "external_untrusted"))


@dataclass(frozen=True, slots=True)
class Task:
    task_id: str
    text: str
    status: str = "open"
    trust: TrustLevel = TrustLevel.EXTERNAL_UNTRUSTED

    def __post_init__(self) -> None:
        _require("Task", "task_id", self.task_id, str)
        _require("Task", "text", self.text, str)
        if self.status not in TASK_STATUSES:
            raise ModelValidationError(
                "Task", "status", f"expected one of {TASK_STATUSES}, got {self.status!r}"
            )
        object.__setattr__(self, "trust", _trust("Task", self.trust))

    def to_dict(self) -> dict[str, JSON]:
        return {"task_id": self.task_id, "text": self.text, "status": self.status, "trust": self.trust.value}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Task:
        n = "Task"
        return cls(
            _get(d, n, "task_id"),
            _get(d, n, "text"),
            _get(d, n, "status", "open"),
            _get(d, n, "trust", "external_untrusted"),
        )


@dataclass(frozen=True, slots=True)
class WorkingState:
    """The run's structured state: rendered in Region B, never compacted away."""

    objective: str | None = None
    constraints: tuple[StateEntry, ...] = ()
    tasks: tuple[Task, ...] = ()
    established_facts: tuple[StateEntry, ...] = ()
    open_questions: tuple[StateEntry, ...] = ()
    next_action: str | None = None

    def __post_init__(self) -> None:
        n = "WorkingState"
        if self.objective is not None:
            _require(n, "objective", self.objective, str)
        if self.next_action is not None:
            _require(n, "next_action", self.next_action, str)
        object.__setattr__(self, "constraints", _tuple_of(n, "constraints", self.constraints, StateEntry))
        object.__setattr__(self, "tasks", _tuple_of(n, "tasks", self.tasks, Task))
        object.__setattr__(
            self, "established_facts", _tuple_of(n, "established_facts", self.established_facts, StateEntry)
        )
        object.__setattr__(
            self, "open_questions", _tuple_of(n, "open_questions", self.open_questions, StateEntry)
        )

    def is_empty(self) -> bool:
        return self == WorkingState()

    def to_dict(self) -> dict[str, JSON]:
        return {
            "objective": self.objective,
            "constraints": [e.to_dict() for e in self.constraints],
            "tasks": [t.to_dict() for t in self.tasks],
            "established_facts": [e.to_dict() for e in self.established_facts],
            "open_questions": [e.to_dict() for e in self.open_questions],
            "next_action": self.next_action,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WorkingState:
        n = "WorkingState"
        return cls(
            objective=_get(d, n, "objective", None),
            constraints=tuple(StateEntry.from_dict(e) for e in _get(d, n, "constraints", [])),
            tasks=tuple(Task.from_dict(t) for t in _get(d, n, "tasks", [])),
            established_facts=tuple(StateEntry.from_dict(e) for e in _get(d, n, "established_facts", [])),
            open_questions=tuple(StateEntry.from_dict(e) for e in _get(d, n, "open_questions", [])),
            next_action=_get(d, n, "next_action", None),
        )


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

    def to_dict(self) -> dict[str, JSON]:
        return {
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

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Checkpoint:
        n = "Checkpoint"
        return cls(
            run_id=_get(d, n, "run_id"),
            version=_get(d, n, "version", 1),
            conversation=tuple(item_from_dict(i) for i in _get(d, n, "conversation", [])),
            compacted_summary=_get(d, n, "compacted_summary", None),
            summary_source_event_ids=tuple(_get(d, n, "summary_source_event_ids", [])),
            summary_elided=tuple(ElidedSpan.from_dict(s) for s in _get(d, n, "summary_elided", [])),
            replaced_through_sequence=_get(d, n, "replaced_through_sequence", 0),
            summary_depth=_get(d, n, "summary_depth", 0),
            working_state=WorkingState.from_dict(_get(d, n, "working_state", {})),
            knowledge=tuple(KnowledgePassage.from_dict(p) for p in _get(d, n, "knowledge", [])),
            recall=tuple(_get(d, n, "recall", [])),
            loaded_skills=tuple(SkillBody.from_dict(s) for s in _get(d, n, "loaded_skills", [])),
            reasoning=tuple(ReasoningItem.from_dict(r) for r in _get(d, n, "reasoning", [])),
            corrections=tuple(_get(d, n, "corrections", [])),
        )


__all__ = [
    "TASK_STATUSES",
    "AgentSpec",
    "Checkpoint",
    "ElidedSpan",
    "KnowledgePassage",
    "SkillBody",
    "StateEntry",
    "Task",
    "WorkingState",
    "AssistantMessage",
    "Content",
    "ContentPart",
    "ConversationItem",
    "FileRef",
    "ITEM_TYPES",
    "Principal",
    "ReasoningItem",
    "ResolvedModel",
    "RunContext",
    "SystemMessage",
    "TextPart",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "TrustLevel",
    "UserMessage",
    "content_text",
    "item_from_dict",
    "with_seq",
]
