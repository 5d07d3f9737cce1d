"""Rendering the prefix and the turn body's blocks (summary, skills, working
state, knowledge, recall, notes, corrections, metadata, the current turn).

``BODY_BLOCKS`` renders each class of ``regions.BODY_CLASSES`` (but history,
which the fit takes from the render tables) from one ``BodyContext``: the
builder asks it for every class in body order, so a new class is a row in
the table and a renderer here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any, NamedTuple

from ..model import (
    Checkpoint,
    ConversationItem,
    ElidedSpan,
    KnowledgePassage,
    Principal,
    SkillBody,
    TrustLevel,
    UserMessage,
    WorkingState,
)
from ..plan import ContextPlan
from ..plan.planner import STABLE_BODY_VERSIONS
from ..plan.prefix import prefix_messages
from .envelope import envelope, escape_inline, json_inline
from .render import _value_digest
from .render_cache import RenderCache
from .request import RenderedItem

RECALL_TITLE = "Recalled memory:"
CORRECTIONS_TITLE = "Memory corrections (these override the memory snapshot):"
NOTES_TITLE = "Notes kept during this run:"

# -- Region A ----------------------------------------------------------------


def render_prefix(plan: ContextPlan) -> tuple[RenderedItem, ...]:
    """The frozen prefix: platform policy, agent instructions, skill catalog, memory snapshot."""
    messages = prefix_messages(
        plan.platform_policy,
        plan.agent_instructions,
        plan.skill_catalog,
        plan.memory_snapshot,
        omit_empty=plan.builder_version in STABLE_BODY_VERSIONS,
    )
    return tuple(RenderedItem(region_class, "system", text=text) for region_class, text in messages)


# -- Region B blocks -----------------------------------------------------------


#: How a model-written summary begins (``runtime.model_compactor``): its first line is the
#: platform's, so no model text can make a summary read as one or the other.
MODEL_SUMMARY_MARK = "Model summary of the conversation through event "


def is_model_summary(summary: str) -> bool:
    """A summary written by a model (rendered with the trust of model output, ADR 0026)."""
    return summary.startswith(MODEL_SUMMARY_MARK)


def render_summary(summary: str, elided: Sequence[ElidedSpan]) -> list[RenderedItem]:
    # An extractive summary quotes user and platform text (fenced as the user's); a model's
    # summary is model output, fenced as such, never platform text (ADR 0026).
    model = is_model_summary(summary)
    out = [
        RenderedItem(
            "compacted_summary",
            "system",
            text="Summary of earlier conversation:\n"
            + envelope(
                summary,
                trust=TrustLevel.EXTERNAL_UNTRUSTED if model else TrustLevel.USER,
                source="model_summary" if model else "compacted_summary",
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


#: Every character ``str.splitlines`` ends a line at, and how an entry spells it.
_LINE_BREAKS = (
    ("\r", "\\r"),
    ("\n", "\\n"),
    *((c, f"\\x{ord(c):02x}") for c in "\x0b\x0c\x1c\x1d\x1e\x85"),
    *((c, f"\\u{ord(c):04x}") for c in "\u2028\u2029"),
)


def _one_line(text: str) -> str:
    # An entry is one line, so no entry can forge the next one's "- [id]" prefix. (No
    # spelling holds a line break, so the order of the replacements does not matter.)
    for char, spelled in _LINE_BREAKS:
        if char in text:
            text = text.replace(char, spelled)
    return text


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
        lines += _section(
            label, [(e.trust, f"- [{escape_inline(e.entry_id)}] {_one_line(e.text)}") for e in entries]
        )
    lines += _section(
        "tasks",
        [(t.trust, f"- [{escape_inline(t.task_id)}] ({t.status}) {_one_line(t.text)}") for t in state.tasks],
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


def render_lines(
    region_class: str, title: str, lines: Sequence[str], trust: TrustLevel = TrustLevel.MEMORY
) -> RenderedItem:
    body = "\n".join(lines)
    text = envelope(body, trust=trust, source=region_class, digest=_value_digest([region_class, body]))
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


# -- the body's classes ----------------------------------------------------------


class BodyContext(NamedTuple):
    """What the body's blocks are rendered from, for one build."""

    checkpoint: Checkpoint
    turn: tuple[ConversationItem, ...]
    now: datetime
    principal: Principal
    surface: str
    #: The turn as a plan of builder version 2 shows it (``clearing.TurnView``), or ``None``:
    #: every turn item rendered whole.
    view: Any = None
    #: A plan of builder version 3 (ADR 0027): an empty working state renders no block.
    stable: bool = False


# (rendered items, their ids: passages only)
Block = tuple[tuple[RenderedItem, ...], tuple[str, ...]]
EMPTY: Block = ((), ())


def _summary(ctx: BodyContext, cache: RenderCache) -> Block:
    cp = ctx.checkpoint
    if cp.compacted_summary is None and not cp.summary_elided:
        return (), ()
    return summary_blocks(cache, cp.compacted_summary, cp.summary_elided), ()


def summary_blocks(
    cache: RenderCache, summary: str | None, elided: Sequence[ElidedSpan]
) -> tuple[RenderedItem, ...]:
    """The compacted-summary blocks, kept by their inputs (seeding primes the
    estimator with a carry's stored counts of these same blocks, ADR 0011)."""
    blocks: tuple[RenderedItem, ...] = cache.summary(
        summary, elided, lambda: tuple(render_summary(summary or "", elided))
    )
    return blocks


def _skills(ctx: BodyContext, cache: RenderCache) -> Block:
    skills = ctx.checkpoint.loaded_skills
    if not skills:
        return EMPTY
    return tuple(cache.block(("skill", s), partial(render_skill, s)) for s in skills), ()


_NO_STATE = WorkingState()


def _working_state(ctx: BodyContext, cache: RenderCache) -> Block:
    state = ctx.checkpoint.working_state
    if ctx.stable and state == _NO_STATE:
        return EMPTY
    block: Block = cache.last(
        "working_state",
        state,
        lambda: ((cache.block(("working_state", state), lambda: render_working_state(state)),), ()),
    )
    return block


def _knowledge(ctx: BodyContext, cache: RenderCache) -> Block:
    if not ctx.checkpoint.knowledge:
        return EMPTY
    passages = sorted(ctx.checkpoint.knowledge, key=lambda p: (-p.score, p.passage_id))
    items = tuple(cache.block(("knowledge", p), partial(render_knowledge, p)) for p in passages)
    return items, tuple(p.passage_id for p in passages)


def lines_block(
    cache: RenderCache,
    region_class: str,
    title: str,
    lines: Sequence[str],
    trust: TrustLevel = TrustLevel.MEMORY,
) -> Block:
    """A lines block: ``items[k - 1]`` holds the first ``k`` lines (the fit drops lines from the end)."""
    if not lines:
        return EMPTY
    key = ("lines", region_class, title, trust, tuple(lines))

    def make() -> tuple[RenderedItem, ...]:
        return tuple(render_lines(region_class, title, lines[:k], trust) for k in range(1, len(lines) + 1))

    return cache.block(key, make), ()


def _recall(ctx: BodyContext, cache: RenderCache) -> Block:
    return lines_block(cache, "recall", RECALL_TITLE, ctx.checkpoint.recall)


def _notes(ctx: BodyContext, cache: RenderCache) -> Block:
    # Model-authored: enveloped as untrusted.
    return lines_block(cache, "notes", NOTES_TITLE, ctx.checkpoint.notes, TrustLevel.EXTERNAL_UNTRUSTED)


def _corrections(ctx: BodyContext, cache: RenderCache) -> Block:
    corrections = ctx.checkpoint.corrections
    if not corrections:
        return EMPTY
    key = ("corrections", corrections)
    return (cache.block(key, lambda: render_lines("memory_corrections", CORRECTIONS_TITLE, corrections)),), ()


def clock_window(now: datetime) -> tuple[datetime, datetime]:
    """The clock readings around ``now`` over which every block renders the
    same (the metadata's minute): a renderer that reads the clock more finely
    must narrow this."""
    minute = now.replace(second=0, microsecond=0)
    return minute, minute + timedelta(minutes=1)


def _metadata(ctx: BodyContext, cache: RenderCache) -> Block:
    # The block changes by the minute: the last one holds while the clock
    # stays within its minute (its principal kept by identity).
    now = ctx.now
    last = cache.last_value("runtime_metadata")
    if last is not None:
        principal, surface, start, end, block = last
        if principal is ctx.principal and surface == ctx.surface and start <= now < end:
            return block  # type: ignore[no-any-return]
    minute, end = clock_window(now)
    key = ("metadata", minute, ctx.principal, ctx.surface)
    block = (cache.block(key, lambda: render_metadata(now, ctx.principal, ctx.surface)),), ()
    cache.keep_last("runtime_metadata", (ctx.principal, ctx.surface, minute, end, block))
    return block


def _current_user(ctx: BodyContext, cache: RenderCache) -> Block:
    if ctx.view is not None:
        return ctx.view.user, ()
    turn = ctx.turn
    if turn and isinstance(turn[0], UserMessage):
        return cache.items(turn[:1], "current_user"), ()
    return EMPTY


def _current_turn(ctx: BodyContext, cache: RenderCache) -> Block:
    if ctx.view is not None:
        return ctx.view.rest, ()
    turn = ctx.turn
    if turn and isinstance(turn[0], UserMessage):
        turn = turn[1:]
    return cache.items(turn, "current_turn"), ()


BODY_BLOCKS: dict[str, Callable[[BodyContext, RenderCache], Block]] = {
    "compacted_summary": _summary,
    "skill_bodies": _skills,
    "working_state": _working_state,
    "knowledge": _knowledge,
    "recall": _recall,
    "notes": _notes,
    "memory_corrections": _corrections,
    "runtime_metadata": _metadata,
    "current_user": _current_user,
    "current_turn": _current_turn,
}


__all__ = [
    "BODY_BLOCKS",
    "CORRECTIONS_TITLE",
    "NOTES_TITLE",
    "RECALL_TITLE",
    "EMPTY",
    "BodyContext",
    "clock_window",
    "lines_block",
    "render_knowledge",
    "render_lines",
    "render_metadata",
    "render_prefix",
    "render_skill",
    "MODEL_SUMMARY_MARK",
    "is_model_summary",
    "render_summary",
    "render_working_state",
]
