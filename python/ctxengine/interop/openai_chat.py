"""OpenAI Chat Completions messages <-> ctxengine items.

``to_items(messages)`` reads a request history (``messages`` of
``POST /chat/completions``: dicts, the SDK's ``*MessageParam`` typed dicts,
or a response's ``ChatCompletionMessage``) and ``from_items(items)`` writes
one. Each message becomes items as follows:

- ``system``: ``SystemMessage`` (trust ``platform``)
- ``developer``: ``SystemMessage`` (trust ``trusted_configuration``)
- ``user``: ``UserMessage``; ``name`` is its ``principal_id``
- ``assistant``: ``AssistantMessage`` when it has content, then one ``ToolCall`` per
  entry of ``tool_calls``
- ``tool``: ``ToolResult`` (trust ``external_untrusted``, ADR 0008)

Content is a string or a list of ``{"type": "text"}`` parts (text parts).
Tool-call ``arguments`` are held as the JSON object they encode and written
back as compact JSON in the same key order. Response-only metadata
(``annotations``; fields that are ``null``) is not history and is dropped;
anything else with no ctxengine form (images, audio, refusals, ``name`` on
other roles, a ``function`` role) raises ``ConversionError`` naming the
message index and the field.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..model import (
    AssistantMessage,
    ConversationItem,
    SystemMessage,
    ToolCall,
    ToolResult,
    TrustLevel,
    UserMessage,
)
from ._common import (
    Provenance,
    Sequencer,
    TrustOverride,
    check_groups,
    check_trust,
    content_out,
    content_value,
    dump_arguments,
    item_error,
    make,
    only_fields,
    parse_arguments,
    seq_of,
)
from ._sdk import plain, without_nulls

SOURCE = "openai_chat"
#: Dropped on the way in: metadata of a response, not part of a request history.
RESPONSE_ONLY = frozenset({"annotations"})
_NULLABLE = frozenset({"content", "refusal", "audio", "function_call", "tool_calls", "name"})
_SYSTEM_ROLES = {"system": TrustLevel.PLATFORM, "developer": TrustLevel.TRUSTED_CONFIGURATION}


def _message(p: Provenance, index: int, raw: Any) -> Mapping[str, Any]:
    message = plain(raw)
    if not isinstance(message, Mapping):
        raise p.error(index, "<message>", f"expected a dict, got {type(message).__name__}")
    message = without_nulls(message, _NULLABLE)
    return {k: v for k, v in message.items() if k not in RESPONSE_ONLY}


def _tool_call(p: Provenance, index: int, j: int, call: Any, seq: int | None) -> ToolCall:
    call = plain(call)
    where = f"tool_calls[{j}]"
    if not isinstance(call, Mapping):
        raise p.error(index, where, f"expected a dict, got {type(call).__name__}")
    for key in call:
        if key not in ("id", "type", "function"):
            raise p.error(index, f"{where}.{key}", "has no ctxengine form")
    if call.get("type") != "function":
        raise p.error(index, f"{where}.type", f"{call.get('type')!r} calls have no ctxengine form")
    function = call.get("function")
    if not isinstance(function, Mapping):
        raise p.error(index, f"{where}.function", "expected a dict")
    for key in function:
        if key not in ("name", "arguments"):
            raise p.error(index, f"{where}.function.{key}", "has no ctxengine form")
    arguments = parse_arguments(p, index, f"{where}.function.arguments", function.get("arguments"))
    call_id, name = call.get("id"), function.get("name")
    if not isinstance(call_id, str):
        raise p.error(index, f"{where}.id", f"expected a str, got {type(call_id).__name__}")
    if not isinstance(name, str):
        raise p.error(index, f"{where}.function.name", f"expected a str, got {type(name).__name__}")
    fields = {
        "call_id": f"{where}.id",
        "name": f"{where}.function.name",
        "arguments": f"{where}.function.arguments",
    }
    return make(p, index, ToolCall, call_id, name, arguments, seq=seq, fields=fields)  # type: ignore[return-value]


def _convert(p: Provenance, messages: Sequence[Any]) -> tuple[list[ConversationItem], list[int]]:
    items: list[ConversationItem] = []
    owners: list[int] = []
    seqs = Sequencer(p)
    for i, raw in enumerate(messages):
        m = _message(p, i, raw)
        role = m.get("role")
        if not isinstance(role, str):
            raise p.error(i, "role", f"expected a str, got {type(role).__name__}")
        seqs.message(p, i, seq_of(m, p))
        made: list[ConversationItem] = []
        if role in _SYSTEM_ROLES:
            only_fields(p, i, m, frozenset({"role", "content"}))
            content = content_value(p, i, "content", m.get("content"), "text")
            trust = p.trust_for(i, m, _SYSTEM_ROLES[role])
            made.append(make(p, i, SystemMessage, content, trust=trust, seq=seqs.take()))
        elif role == "user":
            only_fields(p, i, m, frozenset({"role", "content", "name"}))
            content = content_value(p, i, "content", m.get("content"), "text")
            trust = p.trust_for(i, m, TrustLevel.USER)
            name = m.get("name")
            made.append(
                make(
                    p,
                    i,
                    UserMessage,
                    content,
                    trust=trust,
                    principal_id=name,
                    seq=seqs.take(),
                    fields={"principal_id": "name"},
                )
            )
        elif role == "assistant":
            only_fields(p, i, m, frozenset({"role", "content", "tool_calls"}))
            calls = m.get("tool_calls")
            if "content" in m:
                content = content_value(p, i, "content", m["content"], "text")
                trust = p.trust_for(i, m, TrustLevel.EXTERNAL_UNTRUSTED)
                made.append(make(p, i, AssistantMessage, content, trust=trust, seq=seqs.take()))
            if calls is not None:
                if not isinstance(calls, list | tuple) or not calls:
                    raise p.error(i, "tool_calls", "expected a non-empty list")
                made.extend(_tool_call(p, i, j, call, seqs.take()) for j, call in enumerate(calls))
            if not made:
                raise p.error(i, "content", "an assistant message needs content or tool_calls")
        elif role == "tool":
            only_fields(p, i, m, frozenset({"role", "content", "tool_call_id"}))
            content = content_value(p, i, "content", m.get("content"), "text")
            trust = p.trust_for(i, m, p.tool_trust)
            call_id = m.get("tool_call_id")
            made.append(
                make(
                    p,
                    i,
                    ToolResult,
                    call_id,
                    content,
                    trust=trust,
                    seq=seqs.take(),
                    fields={"call_id": "tool_call_id"},
                )
            )
        else:
            raise p.error(i, "role", f"{role!r} has no ctxengine form")
        items.extend(made)
        owners.extend([i] * len(made))
    return items, owners


def to_items(
    messages: Sequence[Any],
    *,
    seq_field: str | None = None,
    first_seq: int | None = 1,
    trust: TrustOverride = None,
    tool_trust: TrustLevel | str = TrustLevel.EXTERNAL_UNTRUSTED,
) -> list[ConversationItem]:
    """Chat messages as ctxengine items (see the module docstring for the mapping)."""
    p = Provenance(SOURCE, seq_field, first_seq, trust, tool_trust)
    items, owners = _convert(p, messages)
    check_groups(p, owners, groups(items), len(items))
    return items


def groups(items: Sequence[ConversationItem]) -> Iterator[tuple[int, int]]:
    """The item runs that make one chat message each: calls join the assistant text before them."""
    start = 0
    for k in range(1, len(items) + 1):
        if k == len(items):
            break
        joins = isinstance(items[k], ToolCall) and isinstance(items[k - 1], AssistantMessage | ToolCall)
        if not joins:
            yield start, k
            start = k
    if items:
        yield start, len(items)


def from_items(
    items: Sequence[ConversationItem],
    *,
    seq_field: str | None = None,
    trust: TrustOverride = None,
    tool_trust: TrustLevel | str = TrustLevel.EXTERNAL_UNTRUSTED,
) -> list[dict[str, Any]]:
    """Items as chat messages. ``seq`` is not written unless ``seq_field`` names a field for it;
    trust is the role's (a system item trusted as ``trusted_configuration`` is a ``developer``
    message), so an item whose trust ``to_items`` would not give back, read with the same
    ``trust`` and ``tool_trust``, raises ``ConversionError`` (field ``trust``), as does anything
    else chat cannot hold (file parts, an ``is_error`` result, reasoning)."""
    p = Provenance(SOURCE, seq_field, 1, trust, tool_trust)
    at = item_error(SOURCE)
    out: list[dict[str, Any]] = []
    for start, end in groups(items):
        first = items[start]
        err = at(start)
        message: dict[str, Any]
        default: TrustLevel | str = TrustLevel.EXTERNAL_UNTRUSTED
        if isinstance(first, SystemMessage):
            role = "developer" if first.trust is TrustLevel.TRUSTED_CONFIGURATION else "system"
            message = {"role": role, "content": content_out(first.content, "text", err)}
            default = _SYSTEM_ROLES[role]
        elif isinstance(first, UserMessage):
            message = {"role": "user", "content": content_out(first.content, "text", err)}
            if first.principal_id is not None:
                message["name"] = first.principal_id
            default = TrustLevel.USER
        elif isinstance(first, ToolResult):
            if first.is_error:
                raise err("is_error", "chat tool messages have no error flag")
            message = {
                "role": "tool",
                "tool_call_id": first.call_id,
                "content": content_out(first.content, "text", err),
            }
            default = p.tool_trust
        elif isinstance(first, AssistantMessage | ToolCall):
            message = {"role": "assistant"}
            calls = items[start:end]
            if isinstance(first, AssistantMessage):
                message["content"] = content_out(first.content, "text", err)
                calls = items[start + 1 : end]
            if calls:
                message["tool_calls"] = [
                    {
                        "id": c.call_id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": dump_arguments(c.arguments)},
                    }
                    for c in calls
                    if isinstance(c, ToolCall)
                ]
        else:
            raise err("type", f"{type(first).__name__} has no chat form")
        if seq_field is not None and first.seq is not None:
            message[seq_field] = first.seq
        if not isinstance(first, ToolCall):
            check_trust(p, start, first, len(out), message, default)
        out.append(message)
    return out


def select_history(
    messages: Sequence[Any],
    summary_floor: int,
    history_tokens: int,
    estimator: Any,
    model_id: str,
    *,
    seq_field: str | None = None,
    first_seq: int | None = 1,
    tool_trust: TrustLevel | str = TrustLevel.EXTERNAL_UNTRUSTED,
    strict: bool = False,
) -> int:
    """The cut as a message index: ``messages[cut:]`` is the largest suffix whose items fit
    (the same estimates and rules as ``ce.select_history`` over ``to_items(messages)``),
    moved later to a message boundary if it fell inside one. Runs on the active backend;
    the Rust backend converts and measures without building items.

    Orphans follow the rule the ``trim_messages`` drop-in follows (docs/interop.md, ADR
    0019): tool pairs pair by position (a ``tool`` message answers the nearest earlier open
    call with its id, so an id may recur once its pair is complete); a result without an
    open call, a call never answered and a call superseded while open are orphans, and the
    cut falls after the last one; the calls of the last assistant message with
    ``tool_calls``, followed only by ``tool`` messages, are the open pair and are kept
    unanswered. ``strict=True`` raises ``OrphanedToolPair`` (naming the message) for any
    orphan, the open pair included."""
    from . import fast

    return fast.openai_chat_cut(
        messages,
        summary_floor,
        history_tokens,
        estimator,
        model_id,
        seq_field=seq_field,
        first_seq=first_seq,
        tool_trust=tool_trust,
        strict=strict,
    )


__all__ = ["RESPONSE_ONLY", "SOURCE", "from_items", "groups", "select_history", "to_items"]
