"""Conversation items: frozen, slotted, hashable, JSON round-trippable.

Items hold their data only: their renders are the renderer's (see
``ctxengine.assembly.render``).

An item read from (or appended to) a session's log also carries ``_log``,
that session's id: such an item is that event's at its ``seq``, byte for
byte, so a checkpoint can refer to it by sequence instead of copying it
(ADR 0011). ``dataclasses.replace`` clears it.

Conversation items carry a private ``_cj`` slot that caches
``(canonical_json_bytes, sha256_digest)`` of ``to_dict()``. Both backends
fill it the first time an item is canonicalized, hashed or estimated, and
reuse it afterwards: per-item work happens once per immutable item. The
cache is excluded from equality, hashing and ``repr``; both backends write
identical values, so switching backends never invalidates it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import ModelValidationError
from .checks import JSON, _get, _optional_int, _require, _text
from .content import Content, _content, _content_from_json, _content_to_json
from .trust import TrustLevel, _trust


class _Item:
    """Shared behaviour of conversation items (slot-free mixin)."""

    __slots__ = ()
    kind: ClassVar[str]

    def to_dict(self) -> dict[str, JSON]:  # pragma: no cover - overridden
        raise NotImplementedError

    def canonical_bytes(self) -> bytes:
        """RFC 8785 bytes of ``to_dict()``, computed once and cached."""
        from ..core import backends

        data: bytes = backends.active().item_canonical(self)[0]
        return data

    def payload_hash(self) -> str:
        """SHA-256 hex of the canonical bytes, computed once and cached."""
        from ..core import backends

        digest: bytes = backends.active().item_canonical(self)[1]
        return digest.hex()

    def __hash__(self) -> int:
        """Pure Python (no backend) and consistent with the dataclass equality.

        Built from the compared fields' scalar and tuple values: equal items
        have equal fields, hence equal hashes (``1 == 1.0`` hash alike too).
        JSON-object fields (``arguments``, ``payload``, ``input_schema``) are
        left out: they are unhashable and key order does not change equality;
        leaving them out only costs collisions between items equal elsewhere.
        """
        values = [getattr(self, name) for name in _compared_fields(type(self))]
        return hash((self.kind, *[v for v in values if isinstance(v, _HASHED_TYPES)]))


_HASHED_TYPES = (str, int, float, tuple, type(None))


_COMPARED_FIELDS: dict[type, tuple[str, ...]] = {}


def _compared_fields(cls: type) -> tuple[str, ...]:
    names = _COMPARED_FIELDS.get(cls)
    if names is None:
        names = _COMPARED_FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.compare)
    return names


@dataclass(frozen=True, slots=True, eq=True)
class SystemMessage(_Item):
    content: Content
    trust: TrustLevel = TrustLevel.PLATFORM
    seq: int | None = None
    _cj: tuple[bytes, bytes] | None = field(default=None, init=False, repr=False, compare=False)
    _log: str | None = field(default=None, init=False, repr=False, compare=False)
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
    _log: str | None = field(default=None, init=False, repr=False, compare=False)
    kind: ClassVar[str] = "user_message"
    __hash__ = _Item.__hash__

    def __post_init__(self) -> None:
        object.__setattr__(self, "content", _content("UserMessage", self.content))
        object.__setattr__(self, "trust", _trust("UserMessage", self.trust))
        if self.principal_id is not None:
            _text("UserMessage", "principal_id", self.principal_id)
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
    _log: str | None = field(default=None, init=False, repr=False, compare=False)
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
    _log: str | None = field(default=None, init=False, repr=False, compare=False)
    kind: ClassVar[str] = "tool_call"
    __hash__ = _Item.__hash__

    def __post_init__(self) -> None:
        _text("ToolCall", "call_id", self.call_id)
        if not self.call_id:
            raise ModelValidationError("ToolCall", "call_id", "must not be empty")
        _text("ToolCall", "name", self.name)
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
    _log: str | None = field(default=None, init=False, repr=False, compare=False)
    kind: ClassVar[str] = "tool_result"
    __hash__ = _Item.__hash__

    def __post_init__(self) -> None:
        _text("ToolResult", "call_id", self.call_id)
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
    _log: str | None = field(default=None, init=False, repr=False, compare=False)
    kind: ClassVar[str] = "reasoning"
    __hash__ = _Item.__hash__

    def __post_init__(self) -> None:
        _text("ReasoningItem", "provider", self.provider)
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
