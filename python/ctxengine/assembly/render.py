"""Rendering: conversation items and body blocks into ``RenderedItem``s.

Rendering is a pure function of an item and its region class, so a
conversation item caches its rendered forms in its ``_rc`` slot (a dict by
region class, plus the typed pointer of a truncated tool result); a build
reuses it (and through it the cached canonical bytes, digest and raw
estimate) instead of rendering again.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..core.canonical import canonical_json
from ..errors import ContextError
from ..model import (
    AssistantMessage,
    ConversationItem,
    ElidedSpan,
    KnowledgePassage,
    Principal,
    ReasoningItem,
    SkillBody,
    SystemMessage,
    ToolCall,
    ToolResult,
    TrustLevel,
    UserMessage,
    WorkingState,
    content_text,
)
from ..plan import ContextPlan
from ..plan.prefix import PREFIX_MESSAGE_CLASSES, prefix_texts
from .envelope import envelope, escape_inline, json_inline
from .regions import region_of
from .request import RenderedItem


def _item_digest(item: Any) -> bytes:
    from ..core import backends

    return backends.active().item_canonical(item)[1]


def _value_digest(value: object) -> bytes:
    import hashlib

    return hashlib.sha256(canonical_json(value)).digest()


def render_item(item: ConversationItem, region_class: str) -> RenderedItem:
    """The rendered form of a conversation item, cached per (item, region class)."""
    cache: dict[str, RenderedItem] | None = item._rc
    if cache is not None:
        hit = cache.get(region_class)
        if hit is not None:
            return hit
    else:
        cache = {}
        object.__setattr__(item, "_rc", cache)
    region_of(region_class)
    rendered = _render(item, region_class)
    cache[region_class] = rendered
    return rendered


def _render(item: ConversationItem, rc: str) -> RenderedItem:
    if isinstance(item, UserMessage):
        text = envelope(
            content_text(item.content), trust=item.trust, source="user", digest=_item_digest(item)
        )
        return RenderedItem(rc, "user", text=text, seq=item.seq)
    if isinstance(item, AssistantMessage):
        text = envelope(
            content_text(item.content), trust=item.trust, source="assistant", digest=_item_digest(item)
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
            digest=_item_digest(item),
        )
        return RenderedItem(rc, "tool", text=text, call_id=item.call_id, is_error=item.is_error, seq=item.seq)
    if isinstance(item, SystemMessage):
        text = envelope(
            content_text(item.content), trust=item.trust, source="system", digest=_item_digest(item)
        )
        return RenderedItem(rc, "system", text=text, seq=item.seq)
    if isinstance(item, ReasoningItem):
        return RenderedItem(rc, "assistant", provider=item.provider, reasoning=item.payload, seq=item.seq)
    raise ContextError(f"cannot render item of type {type(item).__name__}")


def tool_result_pointer(item: ToolResult) -> RenderedItem:
    """A tool result truncated to a typed pointer (the pair stays whole); cached like renders."""
    cache: dict[str, RenderedItem] | None = item._rc
    if cache is None:
        cache = {}
        object.__setattr__(item, "_rc", cache)
    hit = cache.get(_POINTER)
    if hit is None:
        hit = cache[_POINTER] = _pointer(item)
    return hit


_POINTER = "history:pointer"


def _pointer(item: ToolResult) -> RenderedItem:
    pointer = {
        "elided": "tool_result",
        "call_id": item.call_id,
        "byte_length": len(content_text(item.content).encode("utf-8")),
        "event_id": item.seq,
        "trust": item.trust.value,
        "is_error": item.is_error,
    }
    text = "[tool result elided under context pressure] " + json_inline(pointer)
    return RenderedItem(
        "history", "tool", text=text, call_id=item.call_id, is_error=item.is_error, seq=item.seq
    )


# -- Region A ----------------------------------------------------------------


def render_prefix(plan: ContextPlan) -> tuple[RenderedItem, ...]:
    """The frozen prefix: platform policy, agent instructions, skill catalog, memory snapshot."""
    texts = prefix_texts(
        plan.platform_policy, plan.agent_instructions, plan.skill_catalog, plan.memory_snapshot
    )
    return tuple(
        RenderedItem(region_class, "system", text=text)
        for region_class, text in zip(PREFIX_MESSAGE_CLASSES, texts, strict=True)
    )


# -- Region B blocks -----------------------------------------------------------


def render_summary(summary: str, elided: Sequence[ElidedSpan]) -> list[RenderedItem]:
    out = [
        RenderedItem(
            "compacted_summary",
            "system",
            text="Summary of earlier conversation:\n"
            + envelope(
                summary,
                trust=TrustLevel.USER,
                source="compacted_summary",
                digest=_value_digest(["summary", summary]),
            ),
        )
    ]
    if elided:
        lines = [json_inline(span.to_dict()) for span in elided]
        out.append(
            RenderedItem(
                "compacted_summary",
                "system",
                text="Untrusted content elided from the summary (pointers, not content):\n"
                + "\n".join(lines),
            )
        )
    return out


def render_skill(skill: SkillBody) -> RenderedItem:
    return RenderedItem("skill_bodies", "system", text=f"Skill {skill.name}:\n{skill.body}")


def _one_line(text: str) -> str:
    # An entry is one line, so no entry can forge the next one's "- [id]" prefix.
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _section(label: str, lines: list[tuple[TrustLevel, str]]) -> list[str]:
    """A section whose consecutive same-trust lines share one envelope."""
    out = [f"{label}:"]
    run: list[str] = []
    run_trust: TrustLevel | None = None

    def flush() -> None:
        if run and run_trust is not None:
            body = "\n".join(run)
            digest = _value_digest(["working_state", label, run_trust.value, body])
            out.append(envelope(body, trust=run_trust, source=f"working_state:{label}", digest=digest))

    for trust, line in lines:
        if trust is not run_trust:
            flush()
            run = []
            run_trust = trust
        run.append(line)
    flush()
    return out


def render_working_state(state: WorkingState) -> RenderedItem:
    """The working-state block. Objective and next action carry no author, so
    they are fenced as model-authored; entries are fenced by their own trust."""
    untrusted = TrustLevel.EXTERNAL_UNTRUSTED
    lines = ["Working state:"]
    lines += _section("objective", [(untrusted, _one_line(state.objective))] if state.objective else [])
    for label, entries in (
        ("constraints", state.constraints),
        ("established facts", state.established_facts),
        ("open questions", state.open_questions),
    ):
        lines += _section(label, [(e.trust, f"- [{e.entry_id}] {_one_line(e.text)}") for e in entries])
    lines += _section(
        "tasks", [(t.trust, f"- [{t.task_id}] ({t.status}) {_one_line(t.text)}") for t in state.tasks]
    )
    lines += _section("next action", [(untrusted, _one_line(state.next_action))] if state.next_action else [])
    return RenderedItem("working_state", "system", text="\n".join(lines))


def render_knowledge(passage: KnowledgePassage) -> RenderedItem:
    text = envelope(
        passage.text,
        trust=TrustLevel.KNOWLEDGE,
        source=f"{passage.source}:{passage.passage_id}",
        digest=_value_digest(passage.to_dict()),
    )
    return RenderedItem("knowledge", "system", text=text)


def render_lines(region_class: str, title: str, lines: Sequence[str]) -> RenderedItem:
    body = "\n".join(lines)
    text = envelope(
        body, trust=TrustLevel.MEMORY, source=region_class, digest=_value_digest([region_class, body])
    )
    return RenderedItem(region_class, "system", text=f"{title}\n{text}")


def render_metadata(now: datetime, principal: Principal, surface: str) -> RenderedItem:
    # Principal ids and scopes come from the identity provider, not from us: each is
    # escaped so that none can add a line or a scope to this trusted block.
    scopes = ", ".join(sorted(escape_inline(scope) for scope in principal.scopes)) or "(none)"
    text = (
        f"Runtime metadata:\ndate: {now.date().isoformat()} ({now.strftime('%A')})\n"
        f"time_utc: {now.strftime('%H:%M')}\nprincipal: {escape_inline(principal.principal_id)}\n"
        f"scopes: {scopes}\nsurface: {surface}"
    )
    return RenderedItem("runtime_metadata", "system", text=text)


__all__ = [
    "render_item",
    "render_knowledge",
    "render_lines",
    "render_metadata",
    "render_prefix",
    "render_skill",
    "render_summary",
    "render_working_state",
    "tool_result_pointer",
]
