"""Rendering conversation items into ``RenderedItem``s (uncached: the
renderer's cache is ``render_cache``; the body's blocks are ``blocks``).
"""

from __future__ import annotations

import hashlib
import json.encoder as json_encoder
from collections.abc import Sequence
from typing import Any

from ..core import backends
from ..core.canonical import canonical_json
from ..core.decode import paused_gc
from ..errors import ContextError
from ..model import (
    AssistantMessage,
    ConversationItem,
    ReasoningItem,
    SystemMessage,
    ToolCall,
    ToolResult,
    UserMessage,
    content_text,
)
from .envelope import envelope
from .regions import region_of
from .request import RenderedItem

_json_str = json_encoder.encode_basestring_ascii  # json.dumps of one string (ensure_ascii)


def _inline_escapes(text: str) -> str:
    """What ``json_inline`` does after ``json.dumps``."""
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


POINTER = "history:pointer"


def digest_of(item: Any) -> bytes:
    """The SHA-256 digest of an item's canonical bytes (its own cache: computed once)."""
    cached = item._cj
    if cached is not None:
        known: bytes = cached[1]
        return known
    digest: bytes = backends.active().item_canonical(item)[1]
    return digest


def _value_digest(value: object) -> bytes:
    return hashlib.sha256(canonical_json(value)).digest()


def render_conversation(item: ConversationItem, rc: str) -> RenderedItem:
    """The rendered form of a conversation item in region class ``rc`` (uncached)."""
    region_of(rc)
    if isinstance(item, UserMessage):
        text = envelope(content_text(item.content), trust=item.trust, source="user", digest=digest_of(item))
        return RenderedItem(rc, "user", text=text, seq=item.seq)
    if isinstance(item, AssistantMessage):
        text = envelope(
            content_text(item.content), trust=item.trust, source="assistant", digest=digest_of(item)
        )
        return RenderedItem(rc, "assistant", text=text, seq=item.seq)
    if isinstance(item, ToolCall):
        return RenderedItem(
            rc, "assistant", call_id=item.call_id, name=item.name, arguments=item.arguments, seq=item.seq
        )
    if isinstance(item, ToolResult):
        text = envelope(
            content_text(item.content),
            trust=item.trust,
            source=f"tool:{item.call_id}",
            digest=digest_of(item),
        )
        return RenderedItem(rc, "tool", text=text, call_id=item.call_id, is_error=item.is_error, seq=item.seq)
    if isinstance(item, SystemMessage):
        text = envelope(content_text(item.content), trust=item.trust, source="system", digest=digest_of(item))
        return RenderedItem(rc, "system", text=text, seq=item.seq)
    if isinstance(item, ReasoningItem):
        return RenderedItem(rc, "assistant", provider=item.provider, reasoning=item.payload, seq=item.seq)
    raise ContextError(f"cannot render item of type {type(item).__name__}")


def render_items(items: Sequence[ConversationItem], region_class: str) -> list[RenderedItem]:
    """``render_conversation`` of each item, in one backend call (the Rust backend renders
    conversation items natively, byte for byte the same; ADR 0011)."""
    region_of(region_class)
    with paused_gc():
        rendered: list[RenderedItem | None] = backends.active().render_items(
            items, region_class, RenderedItem
        )
    return [
        hit if hit is not None else render_conversation(item, region_class)
        for item, hit in zip(items, rendered, strict=True)
    ]


def render_pointer(item: ToolResult) -> RenderedItem:
    """A tool result truncated to a typed pointer (the pair stays whole; uncached)."""
    # ``json_inline`` of the pointer object, spelled out: every tool result of a cold history
    # gets one, and json.dumps of a dict cost more than the rest of its render.
    seq = item.seq
    pointer = (
        f'{{"byte_length": {len(content_text(item.content).encode("utf-8"))}, '
        f'"call_id": {_json_str(item.call_id)}, "elided": "tool_result", '
        f'"event_id": {"null" if seq is None else int.__repr__(seq)}, '
        f'"is_error": {"true" if item.is_error else "false"}, "trust": {_json_str(item.trust.value)}}}'
    )
    text = "[tool result elided under context pressure] " + _inline_escapes(pointer)
    return RenderedItem(
        "history", "tool", text=text, call_id=item.call_id, is_error=item.is_error, seq=item.seq
    )


def render_pointers(items: Sequence[ToolResult]) -> list[RenderedItem]:
    """``render_pointer`` of each tool result, in one backend call (the Rust backend writes
    them natively, byte for byte the same)."""
    with paused_gc():
        made: list[RenderedItem | None] = backends.active().render_pointers(items, RenderedItem)
    return [hit if hit is not None else render_pointer(item) for item, hit in zip(items, made, strict=True)]


__all__ = ["POINTER", "digest_of", "render_conversation", "render_items", "render_pointer", "render_pointers"]
