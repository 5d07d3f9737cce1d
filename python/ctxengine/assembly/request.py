"""The provider-neutral request: rendered prefix and body items, tools and metadata.

A ``RenderedItem`` is one message as the model will see it (envelopes
applied). It is a value type with the same ``_cj`` cache as conversation
items, so its canonical bytes, digest and raw estimate are computed once
and the body hash is a join of cached bytes, not a re-serialization.
Provider renderers (``ctxengine.providers``) turn a ``ModelRequest`` into
wire payloads.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import ModelValidationError
from ..model import ToolSpec
from ..model.checks import JSON, _get
from ..model.items import _Item

ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True, slots=True, eq=True)
class RenderedItem(_Item):
    """One rendered message. Exactly one of text, tool call, tool result or reasoning."""

    region_class: str
    role: str
    text: str | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: dict[str, Any] | None = None
    is_error: bool = False
    provider: str | None = None
    reasoning: dict[str, Any] | None = None
    seq: int | None = None
    _cj: tuple[bytes, bytes] | None = field(default=None, init=False, repr=False, compare=False)
    kind: ClassVar[str] = "rendered_item"
    __hash__ = _Item.__hash__

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ModelValidationError("RenderedItem", "role", f"unknown role {self.role!r}")

    @property
    def is_tool_call(self) -> bool:
        return self.role == "assistant" and self.call_id is not None

    @property
    def is_tool_result(self) -> bool:
        return self.role == "tool"

    def to_dict(self) -> dict[str, JSON]:
        return {
            "region_class": self.region_class,
            "role": self.role,
            "text": self.text,
            "call_id": self.call_id,
            "name": self.name,
            "arguments": self.arguments,
            "is_error": self.is_error,
            "provider": self.provider,
            "reasoning": self.reasoning,
            "seq": self.seq,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RenderedItem:
        n = "RenderedItem"
        return cls(
            region_class=_get(d, n, "region_class"),
            role=_get(d, n, "role"),
            text=_get(d, n, "text", None),
            call_id=_get(d, n, "call_id", None),
            name=_get(d, n, "name", None),
            arguments=_get(d, n, "arguments", None),
            is_error=_get(d, n, "is_error", False),
            provider=_get(d, n, "provider", None),
            reasoning=_get(d, n, "reasoning", None),
            seq=_get(d, n, "seq", None),
        )


def items_sha256(items: Sequence[RenderedItem]) -> str:
    """``payload_hash(list(items))``, computed from each item's cached canonical bytes."""
    h = hashlib.sha256(b"[")
    first = True
    for item in items:
        if not first:
            h.update(b",")
        h.update(item.canonical_bytes())
        first = False
    h.update(b"]")
    return h.hexdigest()


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """What the engine decided to send: same inputs, same bytes."""

    prefix: tuple[RenderedItem, ...]
    body: tuple[RenderedItem, ...]
    tools: tuple[ToolSpec, ...]
    max_output_tokens: int
    cache_breakpoints: tuple[int, ...]
    metadata: dict[str, Any]

    def to_dict(self) -> dict[str, JSON]:
        return {
            "prefix": [item.to_dict() for item in self.prefix],
            "body": [item.to_dict() for item in self.body],
            "tools": [tool.to_dict() for tool in self.tools],
            "max_output_tokens": self.max_output_tokens,
            "cache_breakpoints": list(self.cache_breakpoints),
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelRequest:
        n = "ModelRequest"
        return cls(
            prefix=tuple(RenderedItem.from_dict(i) for i in _get(d, n, "prefix")),
            body=tuple(RenderedItem.from_dict(i) for i in _get(d, n, "body")),
            tools=tuple(ToolSpec.from_dict(t) for t in _get(d, n, "tools")),
            max_output_tokens=_get(d, n, "max_output_tokens"),
            cache_breakpoints=tuple(_get(d, n, "cache_breakpoints")),
            metadata=dict(_get(d, n, "metadata")),
        )

    def canonical_bytes(self) -> bytes:
        """The request's identity bytes (what two builds must agree on)."""
        from ..core.canonical import canonical_json

        return canonical_json(self.to_dict())


__all__ = ["ROLES", "ModelRequest", "RenderedItem", "items_sha256"]
