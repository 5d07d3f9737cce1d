"""LangChain messages <-> ctxengine items (``langchain-core`` is imported only when used).

- ``SystemMessage``: ``SystemMessage`` (trust ``platform``; with
  ``additional_kwargs["__openai_role__"] == "developer"``: ``trusted_configuration``)
- ``HumanMessage``: ``UserMessage``; ``name`` is its ``principal_id``
- ``AIMessage``: its content as ``AssistantMessage`` items (a run of text blocks is one
  item; ``thinking`` and ``reasoning`` blocks are ``ReasoningItem`` items), then one
  ``ToolCall`` per ``tool_calls`` entry
- ``ToolMessage``: ``ToolResult``; ``status="error"`` is ``is_error``; trust
  ``external_untrusted`` (ADR 0008)

Response-only metadata is not history and is dropped: ``id``,
``response_metadata``, ``usage_metadata``, ``additional_kwargs`` entries that
are ``None`` (``refusal``), and the ``index``/``id`` of content blocks. A
``ToolMessage``'s ``name`` must be its call's tool name (as LangGraph's
``ToolNode`` writes it) and comes back as that name; an ``AIMessage`` whose
content is empty comes back with ``""``. Anything else (images, invalid
tool calls, artifacts, other message classes, chunks) raises
``ConversionError`` naming the message index and the field.
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
    item_error,
    make,
    text_part,
)

SOURCE = "langchain"
#: Dropped on the way in: metadata of a response or of storage, not history.
RESPONSE_ONLY = frozenset({"id", "response_metadata", "usage_metadata"})
_BLOCK_METADATA = frozenset({"index", "id"})
_REASONING = {"thinking": "anthropic", "redacted_thinking": "anthropic", "reasoning": "openai"}


def _lc() -> Any:
    try:
        from langchain_core import messages
    except ImportError as exc:  # pragma: no cover - exercised without the extra
        raise ImportError(
            "ctxengine.interop.langchain needs langchain-core (pip install langchain-core)"
        ) from exc
    return messages


def _kwargs(p: Provenance, index: int, message: Any, allowed: frozenset[str]) -> tuple[Any, dict[str, Any]]:
    """``(seq_value, kept)``: the message's ``additional_kwargs`` less ``None`` entries and the seq."""
    kept: dict[str, Any] = {}
    seq_value: Any = None
    for key, value in message.additional_kwargs.items():
        if key == p.seq_field:
            seq_value = value
        elif value is not None:
            if key not in allowed:
                raise p.error(index, f"additional_kwargs.{key}", "has no ctxengine form")
            kept[key] = value
    return seq_value, kept


def _text(
    p: Provenance, index: int, content: Any, blocks: Sequence[int] | None = None
) -> str | tuple[TextPart, ...]:
    """Message content that is a string or a list of text blocks (``blocks[j]``: the index
    in the message of block ``j``, when ``content`` is a run of its blocks)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise p.error(index, "content", f"expected a str or a list, got {type(content).__name__}")
    parts = []
    for j, block in enumerate(content):
        where = f"content[{j if blocks is None else blocks[j]}]"
        if not isinstance(block, Mapping) or block.get("type") != "text":
            kind = block.get("type") if isinstance(block, Mapping) else type(block).__name__
            raise p.error(index, f"{where}.type", f"{kind!r} blocks have no ctxengine form (text only)")
        for key in block:
            if key not in ("type", "text") and key not in _BLOCK_METADATA:
                raise p.error(index, f"{where}.{key}", "has no ctxengine form")
        parts.append(text_part(p, index, where, block.get("text")))
    return tuple(parts)


def _ai_content(
    p: Provenance, index: int, content: Any, seqs: Sequencer, level: TrustLevel
) -> list[ConversationItem]:
    """An AI message's content: runs of text blocks, and reasoning blocks between them."""
    if isinstance(content, str):
        if content == "":
            return []
        return [make(p, index, AssistantMessage, content, trust=level, seq=seqs.take())]
    if not isinstance(content, list):
        raise p.error(index, "content", f"expected a str or a list, got {type(content).__name__}")
    made: list[ConversationItem] = []
    run: list[Any] = []
    run_blocks: list[int] = []  # the block each part of the run came from

    def flush() -> None:
        if run:
            parts = _text(p, index, list(run), run_blocks)
            at = tuple(run_blocks)
            run.clear()
            run_blocks.clear()
            made.append(make(p, index, AssistantMessage, parts, trust=level, seq=seqs.take(), blocks=at))

    for j, block in enumerate(content):
        kind = block.get("type") if isinstance(block, Mapping) else None
        if isinstance(kind, str) and kind in _REASONING:
            flush()
            payload, provider = dict(block), _REASONING[kind]
            fields = {"payload": f"content[{j}]"}
            made.append(make(p, index, ReasoningItem, provider, payload, seq=seqs.take(), fields=fields))
        else:
            run.append(block)
            run_blocks.append(j)
    flush()
    return made


def to_items(
    messages: Sequence[Any],
    *,
    seq_field: str | None = None,
    first_seq: int | None = 1,
    trust: TrustOverride = None,
    tool_trust: TrustLevel | str = TrustLevel.EXTERNAL_UNTRUSTED,
) -> list[ConversationItem]:
    """LangChain messages as ctxengine items (see the module docstring). ``seq_field`` names
    a key of each message's ``additional_kwargs``."""
    lc = _lc()
    p = Provenance(SOURCE, seq_field, first_seq, trust, tool_trust)
    seqs = Sequencer(p)
    items: list[ConversationItem] = []
    owners: list[int] = []
    call_names: dict[str, str] = {}
    for i, m in enumerate(messages):
        if not isinstance(m, lc.BaseMessage) or type(m).__name__.endswith("Chunk"):
            raise p.error(i, "<message>", f"{type(m).__name__} has no ctxengine form")
        made: list[ConversationItem]
        if isinstance(m, lc.SystemMessage):
            seq_value, kept = _kwargs(p, i, m, frozenset({"__openai_role__"}))
            seqs.message(p, i, seq_value)
            role = kept.get("__openai_role__", "system")
            if role not in ("system", "developer"):
                raise p.error(i, "additional_kwargs.__openai_role__", f"{role!r} has no ctxengine form")
            if m.name is not None:
                raise p.error(i, "name", "system messages have no name in ctxengine")
            default = TrustLevel.TRUSTED_CONFIGURATION if role == "developer" else TrustLevel.PLATFORM
            content, level = _text(p, i, m.content), p.trust_for(i, m, default)
            made = [make(p, i, SystemMessage, content, trust=level, seq=seqs.take())]
        elif isinstance(m, lc.HumanMessage):
            seq_value, _ = _kwargs(p, i, m, frozenset())
            seqs.message(p, i, seq_value)
            content, level = _text(p, i, m.content), p.trust_for(i, m, TrustLevel.USER)
            made = [
                make(
                    p,
                    i,
                    UserMessage,
                    content,
                    trust=level,
                    principal_id=m.name,
                    seq=seqs.take(),
                    fields={"principal_id": "name"},
                )
            ]
        elif isinstance(m, lc.AIMessage):
            seq_value, _ = _kwargs(p, i, m, frozenset())
            seqs.message(p, i, seq_value)
            if m.name is not None:
                raise p.error(i, "name", "assistant messages have no name in ctxengine")
            if m.invalid_tool_calls:
                raise p.error(i, "invalid_tool_calls", "has no ctxengine form")
            level = p.trust_for(i, m, TrustLevel.EXTERNAL_UNTRUSTED)
            made = _ai_content(p, i, m.content, seqs, level)
            for j, call in enumerate(m.tool_calls):
                call_id, name, args = call.get("id"), call.get("name"), call.get("args")
                if not isinstance(call_id, str):
                    raise p.error(i, f"tool_calls[{j}].id", f"expected a str, got {type(call_id).__name__}")
                fields = {
                    "call_id": f"tool_calls[{j}].id",
                    "name": f"tool_calls[{j}].name",
                    "arguments": f"tool_calls[{j}].args",
                }
                made.append(make(p, i, ToolCall, call_id, name, args, seq=seqs.take(), fields=fields))
                call_names[call_id] = name
            if not made:  # an empty AI message is still a turn
                made = [make(p, i, AssistantMessage, "", trust=level, seq=seqs.take())]
        elif isinstance(m, lc.ToolMessage):
            seq_value, _ = _kwargs(p, i, m, frozenset())
            seqs.message(p, i, seq_value)
            if m.artifact is not None:
                raise p.error(i, "artifact", "has no ctxengine form")
            if m.name is not None and m.name != call_names.get(m.tool_call_id):
                raise p.error(i, "name", "must be the name of its tool call (it is written back as that)")
            level = p.trust_for(i, m, p.tool_trust)
            content = _text(p, i, m.content)
            made = [
                make(
                    p,
                    i,
                    ToolResult,
                    m.tool_call_id,
                    content,
                    is_error=m.status == "error",
                    trust=level,
                    seq=seqs.take(),
                    fields={"call_id": "tool_call_id", "is_error": "status"},
                )
            ]
        else:
            raise p.error(i, "<message>", f"{type(m).__name__} has no ctxengine form")
        items.extend(made)
        owners.extend([i] * len(made))
    check_groups(p, owners, groups(items), len(items))
    return items


def groups(items: Sequence[ConversationItem]) -> Iterator[tuple[int, int]]:
    """The item runs that make one message each: an AI message's content items, then its calls."""
    start = 0
    for k in range(1, len(items)):
        prev, item = items[k - 1], items[k]
        if isinstance(item, ToolCall):
            joins = isinstance(prev, AssistantMessage | ReasoningItem | ToolCall)
        elif isinstance(item, ReasoningItem | AssistantMessage):
            joins = (
                isinstance(prev, ReasoningItem | AssistantMessage)
                and not (isinstance(prev, AssistantMessage) and isinstance(item, AssistantMessage))
                and not any(
                    isinstance(x, AssistantMessage) and isinstance(x.content, str) for x in (prev, item)
                )
            )
        else:
            joins = False
        if not joins:
            yield start, k
            start = k
    if items:
        yield start, len(items)


def _blocks(content: Any, err: Any) -> Any:
    if isinstance(content, str):
        return content
    out: list[Any] = []
    for j, part in enumerate(content):
        if not isinstance(part, TextPart):
            raise err(f"content[{j}]", f"{type(part).__name__} has no LangChain form")
        out.append({"type": "text", "text": part.text})
    return out


def _block_list(content: Any) -> list[Any]:
    """The AI message's content so far as the list its blocks are appended to: extended in
    place, never rebuilt per block (a turn of many blocks stays linear)."""
    return content if isinstance(content, list) else [*(content or [])]


def from_items(
    items: Sequence[ConversationItem],
    *,
    seq_field: str | None = None,
    trust: TrustOverride = None,
    tool_trust: TrustLevel | str = TrustLevel.EXTERNAL_UNTRUSTED,
) -> list[Any]:
    """Items as LangChain messages. ``seq`` goes to ``additional_kwargs[seq_field]`` when one
    is named and is not written otherwise; trust is the role's (a ``trusted_configuration``
    system item is a developer-role ``SystemMessage``), so an item whose trust ``to_items``
    would not give back, read with the same ``trust`` and ``tool_trust``, raises
    ``ConversionError`` (field ``trust``)."""
    lc = _lc()
    p = Provenance(SOURCE, seq_field, 1, trust, tool_trust)
    at = item_error(SOURCE)
    out: list[Any] = []
    names: dict[str, str] = {}
    for start, end in groups(items):
        first, err = items[start], at(start)
        kwargs: dict[str, Any] = {}
        if seq_field is not None and first.seq is not None:
            kwargs[seq_field] = first.seq
        if isinstance(first, SystemMessage):
            default = TrustLevel.PLATFORM
            if first.trust is TrustLevel.TRUSTED_CONFIGURATION:
                kwargs["__openai_role__"] = "developer"
                default = TrustLevel.TRUSTED_CONFIGURATION
            message = lc.SystemMessage(content=_blocks(first.content, err), additional_kwargs=kwargs)
            check_trust(p, start, first, len(out), message, default)
        elif isinstance(first, UserMessage):
            message = lc.HumanMessage(
                content=_blocks(first.content, err), name=first.principal_id, additional_kwargs=kwargs
            )
            check_trust(p, start, first, len(out), message, TrustLevel.USER)
        elif isinstance(first, ToolResult):
            message = lc.ToolMessage(
                content=_blocks(first.content, err),
                tool_call_id=first.call_id,
                name=names.get(first.call_id),
                status="error" if first.is_error else "success",
                additional_kwargs=kwargs,
            )
            check_trust(p, start, first, len(out), message, p.tool_trust)
        else:
            content: Any = ""
            calls = []
            for k in range(start, end):
                item = items[k]
                if isinstance(item, ToolCall):
                    calls.append(
                        {
                            "name": item.name,
                            "args": dict(item.arguments),
                            "id": item.call_id,
                            "type": "tool_call",
                        }
                    )
                    names[item.call_id] = item.name
                elif isinstance(item, AssistantMessage):
                    blocks = _blocks(item.content, at(k))
                    if isinstance(blocks, str):
                        content = blocks
                    else:
                        content = _block_list(content)
                        content.extend(blocks)
                elif isinstance(item, ReasoningItem):
                    content = _block_list(content)
                    content.append(dict(item.payload))
                else:
                    raise at(k)("type", f"{type(item).__name__} has no LangChain form")
            message = lc.AIMessage(content=content, tool_calls=calls, additional_kwargs=kwargs)
            for k in range(start, end):
                if isinstance(items[k], AssistantMessage):
                    check_trust(p, k, items[k], len(out), message, TrustLevel.EXTERNAL_UNTRUSTED)
        out.append(message)
    return out


__all__ = ["RESPONSE_ONLY", "SOURCE", "from_items", "groups", "to_items"]
