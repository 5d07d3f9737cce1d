"""The current turn of a long run, as a request shows it (ADR 0021; plans of builder version 2).

Every item of the turn is shown under the per-item cap (``clip``). When the
turn then counts more than its budget, completed tool pairs of the run,
oldest first (in the order they completed), are shown with their result as
a typed pointer (the call stays whole, so the pair stays whole; the pointer
names the tool, the call, the event, the trust and the byte length, never
content). Kept verbatim: the
run's user message, its other items, every call, the results of excluded
tools, an open pair, the newest completed pair always and the last
``keep_pairs`` completed pairs unless they alone are too many.

Which pairs are cleared is a pure function of the turn's items and the
plan (budget, policy, counting key), counted in raw tokens, so every worker
and every replay agrees with nothing stored:

- the turn's budget is what the usable body leaves after the working state's
  cap and the history's floor (the turn never crowds the history below it);
- the clearable pairs (completed, not excluded, whose pointer is smaller than
  their result, not the newest) in the order they completed; those before the
  last ``keep_pairs`` are grouped greedily from the oldest into chunks that save
  at least ``at_least_tokens`` each (a trailing chunk that saves less waits
  for more pairs);
- cleared: the fewest leading chunks that bring the turn within its budget;
  when every chunk is not enough, further clearable pairs one by one.

A turn only grows (items are appended, and an item's count never changes), and
chunks only extend, so the cleared set only grows as the run grows, and it
grows by whole chunks: the body changes when the turn has grown by another
chunk's worth, not on every step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.budget import BudgetPolicy
from ..core.history import shared_prefix
from ..model import ConversationItem, ReasoningItem, ToolCall, ToolResult, UserMessage, content_text
from ..plan import ContextPlan
from .clip import item_cap, shown
from .envelope import json_inline
from .render_cache import RenderCache
from .request import RenderedItem

#: The builder version whose plans get clipping and clearing.
LONG_RUNS_VERSION = "ctxengine-builder/2"
POINTER_TEXT = "[tool result elided under context pressure] "
FOLDED_TEXT = "[tool steps of this run elided under context pressure] "
#: The tokens set aside for the note of folded steps when deciding how many to fold.
FOLD_NOTE_TOKENS = 256


@dataclass(frozen=True, slots=True)
class TurnRules:
    """What shows a plan's current turn: the per-item cap, the turn's budget (raw tokens) and
    the clearing policy."""

    item_cap: int
    turn_budget: int
    keep_pairs: int
    at_least: int
    exclude_tools: frozenset[str]
    model_id: str


def turn_rules(plan: ContextPlan, policy: BudgetPolicy) -> TurnRules | None:
    """The rules of ``plan``'s turns, or ``None`` for a plan made before them (which keeps
    rendering as it did)."""
    if plan.builder_version != LONG_RUNS_VERSION:
        return None
    budget = plan.budget
    turn_budget = budget.usable_body_tokens - budget.working_state_tokens - policy.history_floor_tokens
    return TurnRules(
        item_cap=item_cap(budget, policy),
        turn_budget=max(0, turn_budget),
        keep_pairs=policy.clearing_keep_pairs,
        at_least=max(1, policy.clearing_at_least_tokens),
        exclude_tools=frozenset(policy.clearing_exclude_tools),
        model_id=plan.counting_key,
    )


@dataclass(frozen=True, slots=True)
class TurnView:
    """The turn as a request shows it: the current user message's render (or none) and the
    rest, with how many items are clipped, tool results cleared and tool steps folded; and
    what the view of the same turn grown longer starts from (``view_turn``'s ``previous``)."""

    user: tuple[RenderedItem, ...]
    rest: tuple[RenderedItem, ...]
    clipped: int
    #: Tool results shown as pointers.
    cleared: int
    #: Tool steps folded into one note.
    folded: int = 0
    rules: TurnRules | None = None
    #: The turn's items; each one's render under the cap, its raw count and whether it is clipped.
    items: tuple[ConversationItem, ...] = ()
    shown: tuple[RenderedItem, ...] = ()
    raws: tuple[int, ...] = ()
    clips: tuple[bool, ...] = ()
    #: By result index: the pointer of each completed pair looked at, and its raw count.
    pointers: Mapping[int, tuple[RenderedItem, int]] = field(default_factory=dict)
    #: The note of the folded steps.
    note: RenderedItem | None = None


def render_turn_pointer(item: ToolResult, tool: str) -> RenderedItem:
    """A current-turn tool result cleared to a typed pointer, naming its tool (from its call)."""
    pointer = {
        "byte_length": len(content_text(item.content).encode("utf-8")),
        "call_id": item.call_id,
        "elided": "tool_result",
        "event_id": item.seq,
        "is_error": item.is_error,
        "tool": tool,
        "trust": item.trust.value,
    }
    return RenderedItem(
        "current_turn",
        "tool",
        text=POINTER_TEXT + json_inline(pointer),
        call_id=item.call_id,
        is_error=item.is_error,
        seq=item.seq,
    )


def completed_pairs(turn: Sequence[ConversationItem]) -> list[tuple[int, int, str]]:
    """``(call index, result index, tool name)`` of each completed pair, in the order they
    completed (a result answers the latest open call of its id). Completion order, not call
    order: a pair that completes later never lands before pairs already counted."""
    open_calls: dict[str, tuple[int, str]] = {}
    pairs = []
    for i, item in enumerate(turn):
        if isinstance(item, ToolCall):
            open_calls[item.call_id] = (i, item.name)
        elif isinstance(item, ToolResult):
            call = open_calls.pop(item.call_id, None)
            if call is not None:
                pairs.append((call[0], i, call[1]))
    return pairs


def cleared_count(savings: Sequence[int], kept_from: int, excess: int, at_least: int) -> int:
    """How many leading clearable pairs are cleared (see the module): ``savings`` of each in
    order, the first ``kept_from`` of them grouped in chunks of at least ``at_least``,
    ``excess`` the tokens the turn is over its budget."""
    if excess <= 0:
        return 0
    freed = 0
    chunk = 0
    boundary = 0  # the end of the last whole chunk
    for m in range(kept_from):
        freed += savings[m]
        chunk += savings[m]
        if chunk >= at_least:
            chunk = 0
            boundary = m + 1
            if freed >= excess:
                return boundary
    # Every whole chunk is not enough: pair by pair from there.
    freed = sum(savings[:boundary])
    for m in range(boundary, len(savings)):
        freed += savings[m]
        if freed >= excess:
            return m + 1
    return len(savings)


def render_folded(steps: Sequence[tuple[ToolCall, ToolResult]]) -> RenderedItem:
    """The platform's note of folded tool steps: how many, their events and their tools
    (names and counts), never content."""
    tools: dict[str, int] = {}
    for call, _ in steps:
        tools[call.name] = tools.get(call.name, 0) + 1
    note = {
        "elided": "tool_steps",
        "count": len(steps),
        "first_event_id": steps[0][0].seq,
        "last_event_id": steps[-1][1].seq,
        "tools": tools,
    }
    return RenderedItem("current_turn", "system", text=FOLDED_TEXT + json_inline(note))


def view_turn(
    turn: Sequence[ConversationItem],
    rules: TurnRules,
    cache: RenderCache,
    estimator: Any,
    previous: TurnView | None = None,
) -> TurnView:
    """The turn under ``rules`` (see the module). ``previous``: the view of an earlier state
    of this turn, whose renders, counts and pointers of the items both share (by identity)
    are taken as they are (a function of the item and the rules alone)."""
    model_id = rules.model_id
    cap = rules.item_cap
    items = tuple(turn)
    k = 0
    if previous is not None and previous.rules == rules:
        k = shared_prefix(previous.items, items)
    user = bool(items) and isinstance(items[0], UserMessage)
    if k:
        assert previous is not None
        renders = list(previous.shown[:k])
        raws = list(previous.raws[:k])
        clips = list(previous.clips[:k])
        known = {at: made for at, made in previous.pointers.items() if at < k}
    else:
        renders, raws, clips, known = [], [], [], {}
    fresh = []
    for i in range(k, len(items)):
        rendered, clipped = shown(
            items[i], "current_user" if user and i == 0 else "current_turn", cap, cache, estimator, model_id
        )
        fresh.append(rendered)
        clips.append(clipped)
    if fresh:
        renders += fresh
        raws += estimator.raw_estimates(fresh, model_id)
    out: list[RenderedItem | None] = list(renders)
    excess = sum(raws) - rules.turn_budget
    cleared = folded = 0
    note = None
    if excess > 0:
        pairs = completed_pairs(items)
        kept = len(pairs) - rules.keep_pairs  # pairs from this index on are the kept ones
        # Every completed pair of a tool not excluded, the newest too (for the floor below).
        candidates: list[tuple[int, int, int]] = []
        new_pointers: list[tuple[int, RenderedItem]] = []
        for n, (call_at, at, tool) in enumerate(pairs):
            if tool in rules.exclude_tools:
                continue
            candidates.append((n, call_at, at))
            if at not in known:
                result = items[at]
                assert isinstance(result, ToolResult)
                new_pointers.append((at, render_turn_pointer(result, tool)))
        if new_pointers:
            made = estimator.raw_estimates([pointer for _, pointer in new_pointers], model_id)
            known.update((at, (pointer, raw)) for (at, pointer), raw in zip(new_pointers, made, strict=True))
        # Only pairs whose pointer is smaller than their result are cleared.
        useful = [(n, call_at, at) for n, call_at, at in candidates if raws[at] > known[at][1]]
        # The turn with every such pair cleared, the newest too: it only grows as the run grows.
        floor = sum(raws) - sum(raws[at] - known[at][1] for _, _, at in useful)
        if useful and useful[-1][0] == len(pairs) - 1:
            useful.pop()  # the newest is never cleared
        outside = sum(1 for u in useful if u[0] < kept)
        cleared = cleared_count(
            [raws[at] - known[at][1] for _, _, at in useful], outside, excess, rules.at_least
        )
        # Folding: when even that floor leaves no room for the newest output, the oldest
        # cleared steps outside the kept ones go whole (call and pointer), by chunks too.
        fold_savings = [raws[call_at] + known[at][1] for _, call_at, at in useful[:outside]]
        fold_excess = floor - (rules.turn_budget - rules.item_cap - FOLD_NOTE_TOKENS)
        folded = cleared_count(fold_savings, len(fold_savings), fold_excess, rules.at_least)
        cleared = max(cleared, folded)
        for _, _, at in useful[folded:cleared]:
            out[at] = known[at][0]
        if folded:
            steps = []
            for _, call_at, at in useful[:folded]:
                call, result = items[call_at], items[at]
                assert isinstance(call, ToolCall) and isinstance(result, ToolResult)
                steps.append((call, result))
                out[call_at] = out[at] = None
                # A reasoning item just before a folded call goes with it.
                before = call_at - 1
                while before >= 0 and isinstance(items[before], ReasoningItem):
                    out[before] = None
                    before -= 1
            # The same steps fold into the same note (they are old: in the shared prefix).
            same = previous is not None and previous.folded == folded and useful[folded - 1][2] < k
            note = previous.note if same and previous is not None else render_folded(steps)
            out[useful[0][1]] = note
    first = 1 if user else 0
    return TurnView(
        tuple(r for r in out[:first] if r is not None),
        tuple(r for r in out[first:] if r is not None),
        sum(clips),
        cleared - folded,
        folded,
        rules,
        items,
        tuple(renders),
        tuple(raws),
        tuple(clips),
        known,
        note,
    )


__all__ = [
    "FOLDED_TEXT",
    "FOLD_NOTE_TOKENS",
    "LONG_RUNS_VERSION",
    "POINTER_TEXT",
    "TurnRules",
    "TurnView",
    "cleared_count",
    "completed_pairs",
    "render_folded",
    "render_turn_pointer",
    "turn_rules",
    "view_turn",
]
