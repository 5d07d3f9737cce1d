"""Stored conversation items, decoded in one call: the twin of ``_core.decode_items`` (ADR 0011).

A ``conversation.item.appended`` event stores ``{"item": {...}}`` as RFC 8785
canonical JSON text. ``decode_items`` reads a batch of such payloads as the
items of the given event sequences: the text must be exactly what the
canonicalizer writes (the same check ``json.loads`` plus re-canonicalizing
makes); the item is checked in the same order, with the same words, as the
value types' ``from_dict`` and constructors; each item's ``_cj`` cache is
filled. A failure is returned, not raised: ``(items before it, its index,
the reason)``, so the caller can name the row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import CanonicalizationError
from ..model import schema
from .canonical import canonical_json, item_canonical

REASON_NOT_CANONICAL = "payload is not canonical JSON"
REASON_NO_ITEM = "conversation item payload has no 'item' object"
REASON_ITEM_PREFIX = "conversation item does not decode: "

_TYPE_NAMES = {type(None): "NoneType", bool: "bool", int: "int", float: "float", str: "str"}
_TYPE_NAMES.update({list: "list", dict: "dict"})
TRUST_VALUES = schema.TRUST_LEVELS
_DEFAULT_TRUST = {
    kind: schema.default_trust(kind) for kind, spec in schema.ITEMS.items() if spec.field("trust")
}


class _Bad(Exception):
    def __init__(self, type_name: str, field: str, reason: str) -> None:
        super().__init__(f"{type_name}.{field}: {reason}")


def _refuse_constant(name: str) -> Any:
    raise ValueError(name)


def canonical_object(text: object) -> dict[str, Any] | None:
    """The JSON object ``text`` spells, when it is exactly canonical JSON; else None."""
    if not isinstance(text, str):
        return None
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
        if not isinstance(value, dict) or canonical_json(value) != text.encode("utf-8", "surrogatepass"):
            return None
    except (ValueError, RecursionError, CanonicalizationError):
        return None
    return value


def _got(type_name: str, field: str, what: str, value: object) -> _Bad:
    return _Bad(type_name, field, f"expected {what}, got {_TYPE_NAMES[type(value)]}")


def _required(d: dict[str, Any], type_name: str, key: str) -> Any:
    if key not in d:
        raise _Bad(type_name, key, "missing")
    return d[key]


def _text(value: object, type_name: str, field: str) -> str:
    if not isinstance(value, str):
        raise _got(type_name, field, "str", value)
    return value


def _optional_text(d: dict[str, Any], type_name: str, field: str) -> str | None:
    value = d.get(field)
    return None if value is None else _text(value, type_name, field)


def _object(value: object, type_name: str, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _got(type_name, field, "dict", value)
    return value


def _trust(d: dict[str, Any], type_name: str, kind: str, members: Sequence[Any]) -> Any:
    value = d.get("trust", _DEFAULT_TRUST[kind])
    if not isinstance(value, str) or value not in TRUST_VALUES:
        raise _Bad(type_name, "trust", "unknown trust level")
    return members[TRUST_VALUES.index(value)]


def _content(value: object, type_name: str, parts: tuple[type[Any], type[Any]]) -> Any:
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise _got(type_name, "content", "str or list", value)
    text_part, file_ref = parts
    out = []
    for i, raw in enumerate(value):
        tag = raw.get("type") if isinstance(raw, dict) else None
        if tag == "text_part":
            out.append(text_part(_text(_required(raw, "TextPart", "text"), "TextPart", "text")))
        elif tag == "file_ref":
            artifact = _required(raw, "FileRef", "artifact_id")
            media = _required(raw, "FileRef", "media_type")
            out.append(
                file_ref(
                    _text(artifact, "FileRef", "artifact_id"),
                    _text(media, "FileRef", "media_type"),
                    _optional_text(raw, "FileRef", "filename"),
                )
            )
        else:
            raise _Bad(type_name, f"content[{i}]", "unknown part type")
    return tuple(out)


def _call_id(value: object, type_name: str) -> str:
    call_id = _text(value, type_name, "call_id")
    if not call_id:
        raise _Bad(type_name, "call_id", "must not be empty")
    return call_id


def _fields(
    d: dict[str, Any], parts: tuple[type[Any], type[Any]], trust: Sequence[Any]
) -> tuple[str, list[Any]]:
    """The item kind and its constructor's positional values (without ``seq``)."""
    kind = d.get("type")
    if kind in ("system_message", "assistant_message"):
        n = "SystemMessage" if kind == "system_message" else "AssistantMessage"
        content = _content(_required(d, n, "content"), n, parts)
        return kind, [content, _trust(d, n, kind, trust)]
    if kind == "user_message":
        n = "UserMessage"
        content = _content(_required(d, n, "content"), n, parts)
        member = _trust(d, n, kind, trust)
        return kind, [content, member, _optional_text(d, n, "principal_id")]
    if kind == "tool_call":
        n = "ToolCall"
        call_id, name, args = (_required(d, n, k) for k in ("call_id", "name", "arguments"))
        return kind, [_call_id(call_id, n), _text(name, n, "name"), _object(args, n, "arguments")]
    if kind == "tool_result":
        n = "ToolResult"
        call_id = _required(d, n, "call_id")
        content = _content(_required(d, n, "content"), n, parts)
        checked = _call_id(call_id, n)
        is_error = d.get("is_error", False)
        if not isinstance(is_error, bool):
            raise _got(n, "is_error", "bool", is_error)
        return kind, [checked, content, is_error, _trust(d, n, kind, trust)]
    if kind == "reasoning":
        n = "ReasoningItem"
        provider, payload = _required(d, n, "provider"), _required(d, n, "payload")
        return kind, [_text(provider, n, "provider"), _object(payload, n, "payload")]
    raise _Bad("ConversationItem", "type", "unknown item type")


#: The slots each kind's decoder fills itself: the schema's fields (constructor order), ``_cj``.
FIELDS = {kind: (*spec.names, "_cj") for kind, spec in schema.ITEMS.items()}


def _other_slots(cls: type[Any], kind: str) -> tuple[str, ...]:
    slots: tuple[str, ...] = getattr(cls, "__slots__", ())
    return tuple(name for name in slots if name not in FIELDS[kind])


def decode_items(
    payloads: Sequence[object],
    seqs: Sequence[int],
    classes: Mapping[str, type[Any]],
    parts: tuple[type[Any], type[Any]],
    trust: Sequence[Any],
    extra: Mapping[str, object] | None = None,
) -> tuple[list[Any], int | None, str | None]:
    """Items of events ``seqs`` from their stored payloads; see the module docstring."""
    if len(trust) != len(TRUST_VALUES):
        raise ValueError(f"trust: expected the {len(TRUST_VALUES)} trust levels, got {len(trust)}")
    if len(payloads) != len(seqs):
        raise ValueError(f"{len(payloads)} payloads for {len(seqs)} sequences")
    out: list[Any] = []
    for i, (payload, seq) in enumerate(zip(payloads, seqs, strict=True)):
        value = canonical_object(payload)
        if value is None:
            return out, i, REASON_NOT_CANONICAL
        data = value.get("item")
        if not isinstance(data, dict):
            return out, i, REASON_NO_ITEM
        try:
            kind, values = _fields(data, parts, trust)
        except _Bad as exc:
            return out, i, REASON_ITEM_PREFIX + str(exc)
        item = classes[kind](*values, seq=seq)
        try:
            item_canonical(item)  # fills _cj, as the Rust decoder does
        except CanonicalizationError:
            pass  # a seq beyond 2**53-1: the item fails the same way when asked for its bytes
        for name in _other_slots(classes[kind], kind):
            if extra is not None and name in extra:
                object.__setattr__(item, name, extra[name])
        out.append(item)
    return out, None, None


__all__ = [
    "REASON_ITEM_PREFIX",
    "REASON_NOT_CANONICAL",
    "REASON_NO_ITEM",
    "TRUST_VALUES",
    "canonical_object",
    "decode_items",
]
