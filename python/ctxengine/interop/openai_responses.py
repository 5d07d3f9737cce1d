"""OpenAI Responses input items <-> ctxengine items.

``to_items(input_items)`` reads the ``input`` of ``POST /responses`` (dicts,
the SDK's typed dicts, or output items of a previous response such as
``ResponseOutputMessage`` and ``ResponseFunctionToolCall``); ``from_items``
writes one. The mapping is one item for one input item:

- ``message`` system: ``SystemMessage`` (``developer``: trust ``trusted_configuration``)
- ``message`` user: ``UserMessage`` (``input_text`` parts are text parts)
- ``message`` assistant: ``AssistantMessage`` (``output_text`` parts are text parts)
- ``function_call``: ``ToolCall`` (arguments held as the JSON object they encode)
- ``function_call_output``: ``ToolResult`` (trust ``external_untrusted``, ADR 0008)
- ``reasoning``: ``ReasoningItem("openai", item)``, verbatim

Response-only metadata is not history and is dropped: the ``id``,
``status`` and ``phase`` of messages and calls, and ``annotations`` and
``logprobs`` of output text (written back as ``"annotations": []``, which the
API requires). A message without ``"type"`` comes back with
``"type": "message"``. Anything else (images, files, refusals, built-in tool
calls, item references) raises ``ConversionError`` naming the index and field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..model import (
    AssistantMessage,
    ConversationItem,
    ReasoningItem,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResult,
    TrustLevel,
    UserMessage,
)
from ._common import (
    Provenance,
    Sequencer,
    TrustOverride,
    check_trust,
    dump_arguments,
    item_error,
    make,
    only_fields,
    parse_arguments,
    seq_of,
    text_part,
)
from ._sdk import plain

SOURCE = "openai_responses"
#: Dropped on the way in, per item type: metadata of a response, not history.
RESPONSE_ONLY = {
    "message": frozenset({"id", "status", "phase"}),
    "function_call": frozenset({"id", "status", "caller", "namespace", "async"}),
    "function_call_output": frozenset({"id", "status"}),
    "output_text": frozenset({"annotations", "logprobs"}),
}
_ROLES = {
    "system": TrustLevel.PLATFORM,
    "developer": TrustLevel.TRUSTED_CONFIGURATION,
    "user": TrustLevel.USER,
    "assistant": TrustLevel.EXTERNAL_UNTRUSTED,
}


def _content(p: Provenance, index: int, value: Any, part_type: str) -> str | tuple[TextPart, ...]:
    if isinstance(value, str):
        return value
    if not isinstance(value, list | tuple):
        raise p.error(index, "content", f"expected a str or a list, got {type(value).__name__}")
    parts = []
    for j, raw in enumerate(value):
        block = plain(raw)
        where = f"content[{j}]"
        if not isinstance(block, Mapping) or block.get("type") != part_type:
            kind = block.get("type") if isinstance(block, Mapping) else type(block).__name__
            raise p.error(index, f"{where}.type", f"{kind!r} has no ctxengine form (only {part_type!r})")
        dropped = RESPONSE_ONLY.get(part_type, frozenset())
        for key in block:
            if key not in ("type", "text") and key not in dropped:
                raise p.error(index, f"{where}.{key}", "has no ctxengine form")
        parts.append(text_part(p, index, where, block.get("text")))
    return tuple(parts)


def _item(p: Provenance, index: int, raw: Any) -> tuple[str, dict[str, Any]]:
    item = plain(raw)
    if not isinstance(item, Mapping):
        raise p.error(index, "<item>", f"expected a dict, got {type(item).__name__}")
    kind = item.get("type", "message" if "role" in item else None)
    if not isinstance(kind, str):
        raise p.error(index, "type", f"expected a str, got {type(kind).__name__}")
    dropped = RESPONSE_ONLY.get(kind, frozenset())
    return kind, {k: v for k, v in item.items() if k not in dropped}


def to_items(
    input_items: Sequence[Any],
    *,
    seq_field: str | None = None,
    first_seq: int | None = 1,
    trust: TrustOverride = None,
    tool_trust: TrustLevel | str = TrustLevel.EXTERNAL_UNTRUSTED,
) -> list[ConversationItem]:
    """Responses input items as ctxengine items (see the module docstring)."""
    p = Provenance(SOURCE, seq_field, first_seq, trust, tool_trust)
    seqs = Sequencer(p)
    items: list[ConversationItem] = []
    for i, raw in enumerate(input_items):
        kind, it = _item(p, i, raw)
        seqs.message(p, i, seq_of(it, p))
        if kind == "message":
            only_fields(p, i, it, frozenset({"type", "role", "content"}))
            role = it.get("role")
            if not isinstance(role, str):
                raise p.error(i, "role", f"expected a str, got {type(role).__name__}")
            if role not in _ROLES:
                raise p.error(i, "role", f"{role!r} has no ctxengine form")
            content = _content(
                p, i, it.get("content"), "output_text" if role == "assistant" else "input_text"
            )
            level = p.trust_for(i, it, _ROLES[role])
            if role == "user":
                items.append(make(p, i, UserMessage, content, trust=level, seq=seqs.take()))
            elif role == "assistant":
                items.append(make(p, i, AssistantMessage, content, trust=level, seq=seqs.take()))
            else:
                items.append(make(p, i, SystemMessage, content, trust=level, seq=seqs.take()))
        elif kind == "function_call":
            only_fields(p, i, it, frozenset({"type", "call_id", "name", "arguments"}))
            arguments = parse_arguments(p, i, "arguments", it.get("arguments"))
            call_id, name = it.get("call_id"), it.get("name")
            items.append(make(p, i, ToolCall, call_id, name, arguments, seq=seqs.take()))
        elif kind == "function_call_output":
            only_fields(p, i, it, frozenset({"type", "call_id", "output"}))
            content = _content(p, i, it.get("output"), "input_text")
            level = p.trust_for(i, it, p.tool_trust)
            call_id = it.get("call_id")
            items.append(
                make(
                    p,
                    i,
                    ToolResult,
                    call_id,
                    content,
                    trust=level,
                    seq=seqs.take(),
                    fields={"content": "output"},
                )
            )
        elif kind == "reasoning":
            payload = {k: v for k, v in it.items() if k != p.seq_field}
            items.append(
                make(p, i, ReasoningItem, "openai", payload, seq=seqs.take(), fields={"payload": ""})
            )
        else:
            raise p.error(i, "type", f"{kind!r} items have no ctxengine form")
    return items


def _content_out(content: Any, part_type: str, err: Any) -> Any:
    if isinstance(content, str):
        return content
    out: list[dict[str, Any]] = []
    for j, part in enumerate(content):
        if not isinstance(part, TextPart):
            raise err(f"content[{j}]", f"{type(part).__name__} has no Responses form")
        block: dict[str, Any] = {"type": part_type, "text": part.text}
        if part_type == "output_text":
            block["annotations"] = []
        out.append(block)
    return out


def from_items(
    items: Sequence[ConversationItem],
    *,
    seq_field: str | None = None,
    trust: TrustOverride = None,
    tool_trust: TrustLevel | str = TrustLevel.EXTERNAL_UNTRUSTED,
) -> list[dict[str, Any]]:
    """Items as Responses input items. ``seq`` is not written unless ``seq_field`` names a field
    for it; trust is the role's (a ``trusted_configuration`` system item is a ``developer``
    message), so an item whose trust ``to_items`` would not give back, read with the same
    ``trust`` and ``tool_trust``, raises ``ConversionError`` (field ``trust``), as do an
    ``is_error`` result, file parts or another provider's reasoning."""
    p = Provenance(SOURCE, seq_field, 1, trust, tool_trust)
    at = item_error(SOURCE)
    out: list[dict[str, Any]] = []
    for k, item in enumerate(items):
        err = at(k)
        made: dict[str, Any]
        default: TrustLevel | str | None = None
        if isinstance(item, SystemMessage):
            role = "developer" if item.trust is TrustLevel.TRUSTED_CONFIGURATION else "system"
            made = {"type": "message", "role": role, "content": _content_out(item.content, "input_text", err)}
            default = _ROLES[role]
        elif isinstance(item, UserMessage):
            made = {
                "type": "message",
                "role": "user",
                "content": _content_out(item.content, "input_text", err),
            }
            default = _ROLES["user"]
        elif isinstance(item, AssistantMessage):
            content = _content_out(item.content, "output_text", err)
            made = {"type": "message", "role": "assistant", "content": content}
            default = _ROLES["assistant"]
        elif isinstance(item, ToolCall):
            made = {
                "type": "function_call",
                "call_id": item.call_id,
                "name": item.name,
                "arguments": dump_arguments(item.arguments),
            }
        elif isinstance(item, ToolResult):
            if item.is_error:
                raise err("is_error", "function_call_output has no error flag")
            made = {
                "type": "function_call_output",
                "call_id": item.call_id,
                "output": _content_out(item.content, "input_text", err),
            }
            default = p.tool_trust
        elif isinstance(item, ReasoningItem):
            if item.provider != "openai":
                raise err("provider", f"{item.provider!r} reasoning has no Responses form")
            made = dict(item.payload)
        else:
            raise err("type", f"{type(item).__name__} has no Responses form")
        if seq_field is not None and item.seq is not None:
            made[seq_field] = item.seq
        if default is not None:
            check_trust(p, k, item, k, made, default)
        out.append(made)
    return out


__all__ = ["RESPONSE_ONLY", "SOURCE", "from_items", "to_items"]
