"""Anthropic Messages <-> ctxengine items.

``to_items(messages, system=...)`` reads a request history (the ``system``
parameter and ``messages``: dicts, the SDK's ``MessageParam`` typed dicts,
or a response's content blocks such as ``TextBlock`` and ``ToolUseBlock``);
``from_items(items)`` writes ``{"system": ..., "messages": [...]}`` (``system``
only when the items start with a system item). Blocks become items in order:

- ``system`` parameter: ``SystemMessage`` (trust ``platform``; errors name index -1)
- string content: one ``UserMessage`` / ``AssistantMessage``
- a run of ``text`` blocks: one ``UserMessage`` / ``AssistantMessage`` of text parts
- ``tool_use``: ``ToolCall``
- ``tool_result``: ``ToolResult`` (``is_error`` kept; trust ``external_untrusted``, ADR
  0008)
- ``thinking``, ``redacted``: ``ReasoningItem("anthropic", block)``, verbatim

Response-only metadata is not history and is dropped: ``citations`` of text
blocks and the ``caller`` of tool uses. Fields at their API default come back
spelled as the default: an absent ``tool_result`` content as ``""``, a false
``is_error`` absent. Anything else (images, documents, ``cache_control``,
server tools) raises ``ConversionError`` naming the message index and field,
as does a turn whose blocks would merge with a neighbouring same-role turn
on the way back.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
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
    check_groups,
    check_trust,
    content_out,
    content_value,
    item_error,
    make,
    only_fields,
    seq_of,
    text_part,
)
from ._sdk import plain

SOURCE = "anthropic_messages"
#: Dropped on the way in, per block type: metadata of a response, not history.
RESPONSE_ONLY = {"text": frozenset({"citations"}), "tool_use": frozenset({"caller"})}
_REASONING = ("thinking", "redacted_thinking")
_FIELDS = {
    "text": frozenset({"type", "text"}),
    "tool_use": frozenset({"type", "id", "name", "input"}),
    "tool_result": frozenset({"type", "tool_use_id", "content", "is_error"}),
}


def _block(p: Provenance, index: int, where: str, raw: Any) -> tuple[str, dict[str, Any]]:
    block = plain(raw)
    if not isinstance(block, Mapping):
        raise p.error(index, where, f"expected a content block, got {type(block).__name__}")
    kind = block.get("type")
    if not isinstance(kind, str):
        raise p.error(index, f"{where}.type", "missing")
    dropped = RESPONSE_ONLY.get(kind, frozenset())
    block = {k: v for k, v in block.items() if k not in dropped}
    allowed = _FIELDS.get(kind)
    if allowed is not None:
        for key in block:
            if key not in allowed:
                raise p.error(index, f"{where}.{key}", "has no ctxengine form")
    return kind, block


def _blocks(
    p: Provenance, index: int, role: str, blocks: Sequence[Any], seqs: Sequencer, level: TrustLevel
) -> list[ConversationItem]:
    made: list[ConversationItem] = []
    run: list[TextPart] = []
    run_blocks: list[int] = []  # the block each part of the run came from

    def flush() -> None:
        if run:
            parts, at = tuple(run), tuple(run_blocks)
            run.clear()
            run_blocks.clear()
            cls = UserMessage if role == "user" else AssistantMessage
            made.append(make(p, index, cls, parts, trust=level, seq=seqs.take(), blocks=at))

    for j, raw in enumerate(blocks):
        where = f"content[{j}]"
        kind, block = _block(p, index, where, raw)
        if kind == "text":
            run.append(text_part(p, index, where, block.get("text")))
            run_blocks.append(j)
            continue
        flush()
        if role == "assistant" and kind == "tool_use":
            call_id, name, arguments = block.get("id"), block.get("name"), block.get("input")
            fields = {"call_id": f"{where}.id", "name": f"{where}.name", "arguments": f"{where}.input"}
            made.append(make(p, index, ToolCall, call_id, name, arguments, seq=seqs.take(), fields=fields))
        elif role == "assistant" and kind in _REASONING:
            payload = dict(block)
            made.append(
                make(
                    p, index, ReasoningItem, "anthropic", payload, seq=seqs.take(), fields={"payload": where}
                )
            )
        elif role == "user" and kind == "tool_result":
            content = content_value(p, index, f"{where}.content", block.get("content", ""), "text")
            is_error = block.get("is_error", False)
            tool_level = p.trust_for(index, block, p.tool_trust)
            call_id = block.get("tool_use_id")
            made.append(
                make(
                    p,
                    index,
                    ToolResult,
                    call_id,
                    content,
                    is_error=is_error,
                    trust=tool_level,
                    seq=seqs.take(),
                    fields={
                        "call_id": f"{where}.tool_use_id",
                        "content": f"{where}.content",
                        "is_error": f"{where}.is_error",
                    },
                )
            )
        else:
            raise p.error(index, f"{where}.type", f"{kind!r} blocks in a {role} turn have no ctxengine form")
    flush()
    return made


def to_items(
    messages: Sequence[Any],
    *,
    system: Any = None,
    seq_field: str | None = None,
    first_seq: int | None = 1,
    trust: TrustOverride = None,
    tool_trust: TrustLevel | str = TrustLevel.EXTERNAL_UNTRUSTED,
) -> list[ConversationItem]:
    """The ``system`` parameter and ``messages`` as ctxengine items (see the module docstring).
    ``trust`` overrides are keyed by message index (-1 for ``system``); for a tool result the
    callable receives the ``tool_result`` block."""
    p = Provenance(SOURCE, seq_field, first_seq, trust, tool_trust)
    seqs = Sequencer(p)
    items: list[ConversationItem] = []
    owners: list[int] = []
    if system is not None:
        value = [plain(b) for b in system] if isinstance(system, list | tuple) else system
        content = content_value(p, -1, "system", value, "text")
        level = p.trust_for(-1, system, TrustLevel.PLATFORM)
        # The system parameter has no field of its own to carry a sequence number.
        seq = None if p.seq_field is not None else seqs.take()
        items.append(make(p, -1, SystemMessage, content, trust=level, seq=seq, fields={"content": "system"}))
        owners.append(-1)
    for i, raw in enumerate(messages):
        m = plain(raw)
        if not isinstance(m, Mapping):
            raise p.error(i, "<message>", f"expected a dict, got {type(m).__name__}")
        only_fields(p, i, m, frozenset({"role", "content"}))
        seqs.message(p, i, seq_of(m, p))
        role = m.get("role")
        if role not in ("user", "assistant"):
            raise p.error(i, "role", f"{role!r} has no ctxengine form")
        level = p.trust_for(i, m, TrustLevel.USER if role == "user" else TrustLevel.EXTERNAL_UNTRUSTED)
        body = m.get("content")
        made: list[ConversationItem]
        if isinstance(body, str):
            cls = UserMessage if role == "user" else AssistantMessage
            made = [make(p, i, cls, body, trust=level, seq=seqs.take())]
        elif isinstance(body, list | tuple) and body:
            made = _blocks(p, i, role, body, seqs, level)
        else:
            raise p.error(i, "content", "expected a str or a non-empty list of blocks")
        items.extend(made)
        owners.extend([i] * len(made))
    check_groups(p, owners, groups(items), len(items))
    return items


def _side(item: ConversationItem) -> str:
    if isinstance(item, SystemMessage):
        return "system"
    return "user" if isinstance(item, UserMessage | ToolResult) else "assistant"


def _starts_turn(prev: ConversationItem, item: ConversationItem) -> bool:
    if _side(prev) != _side(item) or isinstance(item, SystemMessage):
        return True
    for x in (prev, item):
        if isinstance(x, UserMessage | AssistantMessage) and isinstance(x.content, str):
            return True  # string content is a whole turn
    if isinstance(prev, UserMessage):
        return True  # a user turn is its tool results, then its text
    return isinstance(prev, AssistantMessage) and isinstance(item, AssistantMessage)


def groups(items: Sequence[ConversationItem]) -> Iterator[tuple[int, int]]:
    """The item runs that make one turn each."""
    start = 0
    for k in range(1, len(items)):
        if _starts_turn(items[k - 1], items[k]):
            yield start, k
            start = k
    if items:
        yield start, len(items)


def from_items(
    items: Sequence[ConversationItem],
    *,
    trust: TrustOverride = None,
    tool_trust: TrustLevel | str = TrustLevel.EXTERNAL_UNTRUSTED,
) -> dict[str, Any]:
    """Items as ``{"system": ..., "messages": [...]}``. ``seq`` is not written; trust is the
    role's, so an item whose trust ``to_items`` would not give back, read with the same
    ``trust`` and ``tool_trust``, raises ``ConversionError`` (field ``trust``), as do a system
    item after the first position, file parts or another provider's reasoning."""
    p = Provenance(SOURCE, None, 1, trust, tool_trust)
    at = item_error(SOURCE)
    out: dict[str, Any] = {}
    messages: list[dict[str, Any]] = []
    for start, end in groups(items):
        first = items[start]
        if isinstance(first, SystemMessage):
            if start != 0:
                raise at(start)("type", "Messages has a system parameter only before the first turn")
            out["system"] = content_out(first.content, "text", at(start))
            check_trust(p, start, first, -1, out["system"], TrustLevel.PLATFORM)
            continue
        role = "user" if _side(first) == "user" else "assistant"
        level = TrustLevel.USER if role == "user" else TrustLevel.EXTERNAL_UNTRUSTED
        if isinstance(first, UserMessage | AssistantMessage) and isinstance(first.content, str):
            messages.append({"role": role, "content": first.content})
            check_trust(p, start, first, len(messages) - 1, messages[-1], level)
            continue
        blocks: list[dict[str, Any]] = []
        message = {"role": role, "content": blocks}
        results: list[tuple[int, dict[str, Any]]] = []
        for k in range(start, end):
            item, err = items[k], at(k)
            if isinstance(item, UserMessage | AssistantMessage):
                blocks.extend(content_out(item.content, "text", err))
            elif isinstance(item, ToolCall):
                blocks.append(
                    {"type": "tool_use", "id": item.call_id, "name": item.name, "input": dict(item.arguments)}
                )
            elif isinstance(item, ToolResult):
                block: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": item.call_id,
                    "content": content_out(item.content, "text", err),
                }
                if item.is_error:
                    block["is_error"] = True
                blocks.append(block)
                results.append((k, block))
            elif isinstance(item, ReasoningItem):
                if item.provider != "anthropic":
                    raise err("provider", f"{item.provider!r} reasoning has no Messages form")
                blocks.append(dict(item.payload))
            else:
                raise err("type", f"{type(item).__name__} has no Messages form")
        # Text takes the message's trust, each tool result its block's (as ``to_items`` reads them).
        index = len(messages)
        for k in range(start, end):
            if isinstance(items[k], UserMessage | AssistantMessage):
                check_trust(p, k, items[k], index, message, level)
        for k, block in results:
            check_trust(p, k, items[k], index, block, p.tool_trust)
        messages.append(message)
    out["messages"] = messages
    return out


__all__ = ["RESPONSE_ONLY", "SOURCE", "from_items", "groups", "to_items"]
