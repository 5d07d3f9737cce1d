"""Sessions to replay: from a store's log, or from foreign transcripts (issue 42).

A ``ReplaySession`` is a session's conversation items in log order (each with its ``seq``),
what had to be left out to replay it and why (``issues``), and the system text a foreign
transcript opened with. Pairs pair by position (ADR 0019): a result without an open call, a
call never answered and a call superseded by a later call with its id while open are
orphans, left out and reported; a call id reused after its pair completed is replayed and
reported. Reasoning items are provider continuations the replay cannot rebuild (they are
kept apart from the conversation, ADR 0005) and are left out with a count; so are items
before the session's first user message (no run starts there).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ContextError, ConversionError
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

#: The foreign formats ``load_transcript`` reads (``ctxengine.interop`` modules).
FORMATS = ("openai_chat", "openai_responses", "anthropic")


@dataclass(frozen=True, slots=True)
class Issue:
    """Something a replay left out or noticed: ``kind``, the item index, the call id."""

    kind: str
    index: int
    call_id: str | None = None
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "index": self.index, "call_id": self.call_id, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class ReplaySession:
    session_id: str
    items: tuple[ConversationItem, ...]
    issues: tuple[Issue, ...] = ()
    #: The system text a foreign transcript opened with (the agent's instructions there).
    system: str | None = None
    source: str = "store"


def clean(items: Sequence[ConversationItem]) -> tuple[list[ConversationItem], list[Issue]]:
    """The items a replay can rebuild requests from, and what was left out (module doc)."""
    issues: list[Issue] = []
    keep = [True] * len(items)
    open_calls: dict[str, int] = {}
    completed: set[str] = set()
    started = False
    for i, item in enumerate(items):
        if isinstance(item, ReasoningItem | SystemMessage):
            keep[i] = False
            kind = "reasoning_item" if isinstance(item, ReasoningItem) else "system_message"
            issues.append(Issue(kind, i, None, "not replayed"))
            continue
        if isinstance(item, UserMessage):
            started = True
        elif not started:
            keep[i] = False
            issues.append(Issue("before_first_user_message", i, None, "no run starts before it"))
            continue
        if isinstance(item, ToolCall):
            earlier = open_calls.get(item.call_id)
            if earlier is not None:
                keep[earlier] = False
                issues.append(
                    Issue("superseded_call", earlier, item.call_id, f"reused at item {i} while open")
                )
            elif item.call_id in completed:
                issues.append(Issue("repeated_call_id", i, item.call_id, "reused after its pair completed"))
            open_calls[item.call_id] = i
        elif isinstance(item, ToolResult):
            call = open_calls.pop(item.call_id, None)
            if call is None:
                keep[i] = False
                issues.append(Issue("orphan_result", i, item.call_id, "no open call with this id"))
            else:
                completed.add(item.call_id)
    for call_id, i in open_calls.items():
        keep[i] = False
        issues.append(Issue("unanswered_call", i, call_id, "no result follows"))
    issues.sort(key=lambda issue: issue.index)
    return [item for item, k in zip(items, keep, strict=True) if k], issues


def _records(path: Path) -> list[Any]:
    out: list[Any] = []
    with path.open("rb") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except ValueError as exc:
                raise ConversionError(str(path), n - 1, "<line>", f"line {n} is not JSON: {exc}") from None
    return out


def detect_format(records: Sequence[Any]) -> str:
    """Which foreign format a transcript's records are in (``FORMATS``)."""
    for r in records:
        if not isinstance(r, dict):
            continue
        if r.get("type") in ("message", "function_call", "function_call_output", "reasoning"):
            return "openai_responses"
        if "tool_calls" in r or r.get("role") == "tool":
            return "openai_chat"
        content = r.get("content")
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result", "thinking") for b in content
        ):
            return "anthropic"
    return "openai_chat"


def load_transcript(path: str | Path, fmt: str = "auto", session_id: str | None = None) -> ReplaySession:
    """One foreign transcript (JSONL, one message or item a line) as a session. A file that
    does not convert is a session with no items and its error as an issue: never a crash."""
    from ..interop import anthropic, openai_chat, openai_responses

    p = Path(path)
    sid = session_id or p.stem
    try:
        records = _records(p)
        kind = detect_format(records) if fmt == "auto" else fmt
        system: str | None = None
        if kind == "openai_chat":
            items = openai_chat.to_items(records)
        elif kind == "openai_responses":
            items = openai_responses.to_items(records)
        elif kind == "anthropic":
            # A leading {"system": ...} line is the Messages API's system parameter.
            head = (
                records[0] if records and isinstance(records[0], dict) and "role" not in records[0] else None
            )
            body = records[1:] if head is not None else records
            items = anthropic.to_items(body, system=head.get("system") if head else None)
        else:
            raise ConversionError(str(p), 0, "format", f"unknown format {kind!r}; expected one of {FORMATS}")
    except (ContextError, OSError) as exc:
        return ReplaySession(
            sid, (), (Issue("not_converted", 0, None, f"{type(exc).__name__}: {exc}"),), None, fmt
        )
    system_texts = [content_text(i.content) for i in items if isinstance(i, SystemMessage)]
    if system_texts:
        system = "\n\n".join(system_texts)
    kept, issues = clean(items)
    return ReplaySession(sid, tuple(kept), tuple(issues), system, kind)


def request_points(items: Sequence[ConversationItem]) -> list[int]:
    """Where a model request was built: before each model response (an assistant message or
    a tool call following the user's message or a tool result)."""
    points = []
    for i, item in enumerate(items):
        if (
            isinstance(item, AssistantMessage | ToolCall)
            and i
            and isinstance(items[i - 1], UserMessage | ToolResult)
        ):
            points.append(i)
    return points


async def read_sessions(
    store: Any, session_ids: Sequence[str], counter: str | None = None
) -> list[tuple[ReplaySession, list[int | None]]]:
    """Each session's logged items (one read each), with the stored history counts under
    ``counter`` (``None`` where none is stored)."""
    from ..runtime.session import decode_rows

    out = []
    for sid in session_ids:
        rows = await store.events.read_items(sid, 0, counter=counter)
        items = decode_rows(sid, rows)
        counts = {row.sequence: row.tokens for row in rows}
        kept, issues = clean(items)
        out.append((ReplaySession(sid, tuple(kept), tuple(issues)), [counts.get(i.seq) for i in kept]))
    return out


__all__ = [
    "FORMATS",
    "Issue",
    "ReplaySession",
    "clean",
    "detect_format",
    "load_transcript",
    "read_sessions",
    "request_points",
]
